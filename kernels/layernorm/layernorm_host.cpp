#include "kernels/layernorm/layernorm_host.h"

#include <cmath>
#include <vector>

#include "kernels/common/row_host.h"
#include "kernels/layernorm/layernorm_plan.h"

namespace ulpcheck::layernorm_host {

namespace {
using namespace layernorm_plan;
using namespace row_host;

/// Every thread's fp32 accumulation over its columns (in the CUDA thread's
/// order), then the block all-reduce: one of the kernels' row sums.
template <typename Term>
float rowSum(const RowPlan& p, std::vector<float>& acc, Term&& term) {
  for (int t = 0; t < p.threads; ++t) {
    float a = 0.f;
    forThreadColumns(p, t, true, [&](int64_t col) { a = term(a, col); });
    acc[t] = a;
  }
  return blockAllReduce(acc);
}
/// gamma_j or beta_j, or `absent` where the spec has no such parameter (null).
float affineParameter(const void* p, DType t, int64_t col, float absent) { return p ? load(p, t, col) : absent; }
}  // namespace

void forward(const LayerNormForwardArgs& f, const LaunchEnv&, const Defects& defects) {
  const auto& s = f.shape;
  const DType wt = s.wdtype();  // read from the spec once, not per element
  const RowPlan p = planRow(s.dtype, s.N, s.ld,
                            aligned16(f.x) && aligned16(f.gamma) && aligned16(f.beta) && aligned16(f.y));
  std::vector<float> acc(p.threads);
  for (int64_t row = 0; row < s.M; ++row) {
    const int64_t base = row * s.ld;
    auto x = [&](int64_t col) { return load(f.x, s.dtype, base + col); };
    const float mean = rowSum(p, acc, [&](float a, int64_t col) { return a + x(col); }) / float(s.N);
    float sq = rowSum(p, acc, [&](float a, int64_t col) {
      const float d = x(col) - mean;
      return std::fma(d, d, a);
    });
    // The buggy kernel loads the tail as one masked vector whose vec - tail
    // masked lanes read 0 and add their squared deviations.
    if (defects.variance_counts_masked_lanes && p.tail > 0) sq += float(p.vec - p.tail) * (mean * mean);
    float var = sq / float(s.N);
    if (defects.one_pass_variance)
      var = rowSum(p, acc, [&](float a, int64_t col) { return std::fma(x(col), x(col), a); }) / float(s.N) -
            mean * mean;
    const float r = 1.0f / std::sqrt(var + s.eps);
    f.mean[row] = savedStat(s, mean);
    f.rstd[row] = savedStat(s, r);
    for (int64_t col = 0; col < s.N; ++col) {
      const float xhat = (x(col) - mean) * r;
      store(f.y, s.dtype, base + col,
            std::fma(xhat, affineParameter(f.gamma, wt, col, 1.f), affineParameter(f.beta, wt, col, 0.f)));
    }
  }
}

void backward(const LayerNormBackwardArgs& b, const LaunchEnv& env, const Defects& defects) {
  const auto& s = b.shape;
  const DType wt = s.wdtype();
  const RowPlan p = planRow(s.dtype, s.N, s.ld,
                            aligned16(b.x) && aligned16(b.gamma) && aligned16(b.dy) && aligned16(b.dx));
  const int64_t ctas = backwardCtas(p, s.M, env.sm_count, env.ctas_override);
  const int64_t pld = partialLd(s.N), wld = workspaceLd(s.N);
  auto* partial = static_cast<float*>(b.workspace);
  std::vector<float> gamma(s.N), acc(p.threads), dgamma_acc(s.N), dbeta_acc(s.N);
  for (int64_t col = 0; col < s.N; ++col) gamma[col] = affineParameter(b.gamma, wt, col, 1.f);

  for (int64_t cta = 0; cta < ctas; ++cta) {
    std::fill(dgamma_acc.begin(), dgamma_acc.end(), 0.f);
    std::fill(dbeta_acc.begin(), dbeta_acc.end(), 0.f);
    for (int64_t row = cta; row < s.M; row += ctas) {
      const float mu = b.mean[row], r = b.rstd[row];
      const int64_t base = row * s.ld;
      auto xhat = [&](int64_t col) { return (load(b.x, s.dtype, base + col) - mu) * r; };
      auto dy = [&](int64_t col) { return load(b.dy, s.dtype, base + col); };
      const float c1 = rowSum(p, acc, [&](float a, int64_t col) { return a + dy(col) * gamma[col]; }) / float(s.N);
      const float c2 = rowSum(p, acc,
                              [&](float a, int64_t col) { return std::fma(dy(col) * gamma[col], xhat(col), a); }) /
                       float(s.N);
      for (int64_t col = 0; col < s.N; ++col) {
        const float g = dy(col), xh = xhat(col);
        store(b.dx, s.dtype, base + col, r * std::fma(-xh, c2, g * gamma[col] - c1));
        dgamma_acc[col] = std::fma(g, xh, dgamma_acc[col]);
        dbeta_acc[col] = dbeta_acc[col] + g;
      }
    }
    for (int64_t col = 0; col < s.N; ++col) {
      partial[cta * wld + col] = dgamma_acc[col];
      partial[cta * wld + pld + col] = dbeta_acc[col];
    }
  }
  const bool swapped = defects.swap_dgamma_dbeta_at_large_m && s.M >= 256;
  void* dgamma = swapped ? b.dbeta : b.dgamma;
  void* dbeta = swapped ? b.dgamma : b.dbeta;
  for (int64_t col = 0; col < s.N; ++col) {  // null where the spec has no such parameter
    if (dgamma) store(dgamma, wt, col, sumPartials(partial, wld, ctas, col, DwStrategy::Separate));
    if (dbeta) store(dbeta, wt, col, sumPartials(partial + pld, wld, ctas, col, DwStrategy::Separate));
  }
}

namespace {
bool registerPort(const char* name, const char* description, const char* bug, const char* caught_by, Defects defects) {
  const RowPathModel paths{.backward = true, .large_m_from = defects.swap_dgamma_dbeta_at_large_m ? 256 : 0};
  KernelInfo info{"layernorm",
                  name,
                  Backend::Host,
                  {DType::F32, DType::F16, DType::BF16},
                  Contracts{.deterministic = true, .batch_invariant = true, .accumulation = DType::F32},
                  description,
                  bug,
                  caught_by};
  // gamma, beta (and their gradients) in fp32 or T; without beta, without either.
  info.specs = SpecSupport{}
                   .with(kWeightDtype, {std::nullopt, DType::F32})
                   .with(kAffine, {Affine::Full, Affine::NoBias, Affine::None})
                   .with(kSavedStats, {SavedStats::Fp32, SavedStats::Activation});
  return LayerNormRegistry::add(LayerNormKernel{
      withRowPaths(std::move(info), paths), workspaceBytes,
      [defects](const LayerNormForwardArgs& f, const LaunchEnv& e) { forward(f, e, defects); },
      [defects](const LayerNormBackwardArgs& b, const LaunchEnv& e) { backward(b, e, defects); }, depths});
}

const bool registered = registerPort(
    "host_twopass", "host port of cuda_twopass: same plan, accumulation order and dgamma/dbeta partials", "", "", {});
}  // namespace

bool registerMutant(const char* name, const char* description, const char* bug, const char* caught_by,
                    Defects defects) {
  return registerPort(name, description, bug, caught_by, defects);
}

}  // namespace ulpcheck::layernorm_host
