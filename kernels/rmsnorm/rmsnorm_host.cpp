#include "kernels/rmsnorm/rmsnorm_host.h"

#include <atomic>
#include <vector>

#include "kernels/common/row_host.h"
#include "kernels/rmsnorm/rmsnorm_plan.h"

namespace ulpcheck::rmsnorm_host {

namespace {

using namespace rmsnorm_plan;
using namespace row_host;

float roundToBf16(float v) { return static_cast<float>(roundToFormat(DType::BF16, v)); }

/// offset + w of every column, in fp32 (or, with the defect, in the activation dtype).
std::vector<float> effectiveWeights(const void* w, const RowShape& s, const Defects& defects) {
  std::vector<float> out(size_t(s.N));
  const float offset = kWeightOffset(s.spec);
  for (int64_t col = 0; col < s.N; ++col) {
    const float v = load(w, s.wdtype(), col);
    out[size_t(col)] = offset == 0.f                        ? v
                       : defects.offset_in_activation_dtype ? float(roundToFormat(s.dtype, double(offset + v)))
                                                            : offset + v;
  }
  return out;
}

/// The spec's rounding points, read once per call (not per element).
struct RoundingPoints {
  DType T;
  bool xhat_in_t;      // rounding=llama: x-hat rounded to T before the weight multiplies it
  bool dw_terms_in_t;  // and dW's terms dy round_T(x-hat), products of two T values, rounded to T
};

RoundingPoints roundingPoints(const RowShape& s, const Defects& defects) {
  const bool llama = kRounding(s.spec) == Rounding::Llama;
  return {s.dtype, llama && !defects.llama_xhat_unrounded, llama && s.dtype != DType::F32};
}

/// The factor the weight multiplies: x-hat, rounded to the activation dtype
/// under rounding=llama.
float weightedXhat(float xhat, const RoundingPoints& p) { return p.xhat_in_t ? float(roundToFormat(p.T, xhat)) : xhat; }

/// Llama's dW term dy round_T(x-hat), a product of two activation-dtype
/// values, is rounded to T before the fp32 accumulator adds it (rmsnorm_
/// forward.cuh's accumulateDw); elsewhere an fma.
float accumulateDw(float acc, float g, float xhat, const RoundingPoints& p) {
  const float weighted = weightedXhat(xhat, p);
  return p.dw_terms_in_t ? acc + float(roundToFormat(p.T, g * weighted)) : std::fma(g, weighted, acc);
}

/// v to T truncated toward zero (Defects::y_stored_truncated): the nearest
/// value, or where that lies beyond v the next code toward zero (codes of
/// one sign are ordered as their magnitudes).
void storeTruncated(void* base, DType t, int64_t i, float v) {
  uint32_t bits = doubleToBits(t, v);
  if (std::fabs(decodeBits(t, bits)) > std::fabs(double(v))) --bits;
  setElementBits(base, t, i, bits);
}

}  // namespace

/// The row stride the port addresses rows with: ld, or N with the defect.
int64_t rowStride(const RowShape& s, const Defects& defects) { return defects.ignore_row_stride ? s.N : s.ld; }

void forward(const RmsNormForwardArgs& f, const LaunchEnv&, const Defects& defects) {
  const auto& s = f.shape;
  const DType xt = f.x_dtype.value_or(s.dtype);  // an fp32 residual_out normalised into T (res=fp32)
  const RowPlan p = planRow(s.dtype, s.N, s.ld, aligned16(f.x) && aligned16(f.w) && aligned16(f.y));
  std::vector<float> acc(p.threads);
  const std::vector<float> w = effectiveWeights(f.w, s, defects);
  const RoundingPoints points = roundingPoints(s, defects);
  const DType wt = s.wdtype();
  for (int64_t row = 0; row < s.M; ++row) {
    const int64_t base = row * rowStride(s, defects);
    for (int t = 0; t < p.threads; ++t) {
      float a = 0.f;
      forThreadColumns(p, t, true, [&](int64_t col) {
        const float x = load(f.x, xt, base + col);
        if (defects.x_squared_in_fp16) a += static_cast<float>(roundToFormat(DType::F16, x * x));
        else a = std::fma(x, x, a);
      });
      acc[t] = a;
    }
    float r = 1.0f / std::sqrt(blockAllReduce(acc) / float(s.N) + s.eps);
    if (defects.rstd_in_bf16) r = roundToBf16(r);
    f.rstd[row] = savedStat(s, r);
    for (int64_t col = 0; col < s.N; ++col) {
      const float scaled = weightedXhat(load(f.x, xt, base + col) * r, points) * w[size_t(col)];
      const float y = f.b ? scaled + load(f.b, wt, col) : scaled;
      if (defects.y_stored_truncated) storeTruncated(f.y, s.dtype, base + col, y);
      else store(f.y, s.dtype, base + col, y);
    }
  }
}

void backward(const RmsNormBackwardArgs& b, const LaunchEnv& env, DwStrategy strategy, const Defects& defects,
              const ResidualGradients& residual) {
  const auto& s = b.shape;
  const DType xt = residual.x_dtype.value_or(s.dtype);
  // dy as the norm's backward reads it: with quack PR #53's bug, plus dresidual_out.
  const auto gradient = [&](int64_t i) {
    const float g = load(b.dy, s.dtype, i);
    return residual.added_before_the_norm ? g + load(residual.dresidual_out, residual.residual_dtype, i) : g;
  };
  RowPlan p = planRow(s.dtype, s.N, s.ld, aligned16(b.x) && aligned16(b.w) && aligned16(b.dy) && aligned16(b.dx));
  // The grid is the correct plan's: the workspace holds one partial row per
  // CTA of it (a grid grown with the halved CTAs would write past the end).
  const int64_t ctas = backwardCtas(p, s.M, env.sm_count, env.ctas_override);
  // "Small batches get bigger CTAs"; the halved CTA stays whole warps.
  if (defects.threads_from_m && s.M > 16 && p.threads % (2 * kWarp) == 0) {
    p.threads /= 2;
    p.vpt *= 2;
  }
  const int64_t pld = partialLd(s.N);
  auto* partial = static_cast<float*>(b.workspace);
  const std::vector<float> w = effectiveWeights(b.w, s, defects);
  const RoundingPoints points = roundingPoints(s, defects);
  std::vector<float> acc(p.threads), dw_acc(s.N), db_acc(b.db ? s.N : 0);
  // db's partials, one row per CTA like dW's, summed the same way.
  std::vector<float> db_partial(b.db ? size_t(ctas * s.N) : 0);
  const bool tail = !defects.drop_tail;
  // Liger PR #950: the large-M dispatch path summed the dW partials in bf16.
  const bool large_m_bf16_dw = defects.dw_in_bf16_at_large_m && s.M >= 32768;

  // The race: on a racy call, columns another warp owns lose the CTA's last row.
  static std::atomic<uint64_t> backward_calls{0};
  const bool racy = defects.atomic_partials_race && strategy == DwStrategy::Atomic &&
                    !keepsRowInRegisters(p, registerElements(storageBytes(s.dtype))) && backward_calls++ % 3 == 2;
  std::vector<float> before_last_row;
  for (int64_t cta = 0; cta < ctas; ++cta) {
    std::fill(dw_acc.begin(), dw_acc.end(), 0.f);
    std::fill(db_acc.begin(), db_acc.end(), 0.f);
    for (int64_t row = cta; row < s.M; row += ctas) {
      if (racy && row + ctas >= s.M) before_last_row = dw_acc;
      const float r = b.rstd[row];
      const int64_t base = row * rowStride(s, defects);
      for (int t = 0; t < p.threads; ++t) {
        float a = 0.f;
        forThreadColumns(p, t, tail, [&](int64_t col) {
          const float xhat = load(b.x, xt, base + col) * r;
          const float gw = gradient(base + col) * w[col];
          a = std::fma(gw, xhat, a);
          if (defects.rowsum_in_bf16) a = roundToBf16(a);
        });
        acc[t] = a;
      }
      const float c = blockAllReduce(acc) / float(s.N);
      for (int t = 0; t < p.threads; ++t) {
        forThreadColumns(p, t, tail, [&](int64_t col) {
          const float g = gradient(base + col);
          const float xhat = load(b.x, xt, base + col) * r;
          float dx = r * std::fma(-xhat, c, g * w[col]);
          if (residual.dresidual) {  // g = dresidual_out + dnorm, one fp32 add, stored twice
            if (!residual.added_before_the_norm)
              dx += load(residual.dresidual_out, residual.residual_dtype, base + col);
            store(residual.dresidual, residual.residual_dtype, base + col, dx);
          }
          store(b.dx, s.dtype, base + col, dx);
          dw_acc[col] = accumulateDw(dw_acc[col], g, xhat, points);
          if (b.db) db_acc[col] += g;
        });
      }
    }
    for (int t = 0; t < p.threads; ++t)
      forThreadColumns(p, t, tail, [&](int64_t col) {
        // Thread col % threads adds column col (the strided loop); the owner
        // of its vector, thread (col / vec) % threads, wrote it.
        const bool peer_warp = col < p.nvec * p.vec && (col % p.threads) / kWarp != ((col / p.vec) % p.threads) / kWarp;
        partial[cta * pld + col] = racy && peer_warp ? before_last_row[col] : dw_acc[col];
        if (b.db) db_partial[size_t(cta * s.N + col)] = db_acc[col];
      });
  }

  static std::atomic<uint64_t> calls{0};  // Atomic: a different first CTA on every call
  const int64_t first = strategy == DwStrategy::Atomic ? int64_t(calls++ % uint64_t(ctas)) : 0;
  for (int64_t col = 0; col < s.N; ++col) {
    float total = 0.f;
    if (large_m_bf16_dw)  // the partials' block reduction accumulated in bf16
      for (int64_t c = 0; c < ctas; ++c) total = roundToBf16(total + partial[c * pld + col]);
    else if (defects.lastblock_drops_partial_on_large_grid && strategy == DwStrategy::LastBlock && ctas > 1024)
      total = sumPartials(partial, pld, ctas - 1, col, strategy, first);
    else total = sumPartials(partial, pld, ctas, col, strategy, first);
    store(b.dw, s.wdtype(), col, total);
    if (b.db) store(b.db, s.wdtype(), col, sumPartials(db_partial.data(), s.N, ctas, col, strategy, first));
  }
}

namespace {
bool registerPort(const char* name, const char* description, const char* bug, const char* caught_by, bool deterministic,
                  Defects defects, DwStrategy strategy, int64_t row_depth_factor) {
  const RowPathModel paths{.backward = true, .large_m_from = defects.dw_in_bf16_at_large_m ? 32768 : 0};
  KernelInfo info = withRowPaths(KernelInfo{"rmsnorm",
                                            name,
                                            Backend::Host,
                                            {DType::F32, DType::F16, DType::BF16},
                                            Contracts{.deterministic = deterministic,
                                                      .batch_invariant = true,
                                                      .accumulation = DType::F32,
                                                      .column_reduction_ftz = strategy == DwStrategy::Atomic},
                                            description,
                                            bug,
                                            caught_by},
                                 paths);
  info.specs = specSupport();
  return RmsNormRegistry::add(RmsNormKernel{
      std::move(info), workspaceBytes,
      [defects](const RmsNormForwardArgs& f, const LaunchEnv& e) { forward(f, e, defects); },
      [defects, strategy](const RmsNormBackwardArgs& b, const LaunchEnv& e) { backward(b, e, strategy, defects); },
      [strategy, row_depth_factor](const RowShape& s, const LaunchEnv& e) {
        ReductionDepths d = reductionDepths(s, e, strategy);
        d.row *= row_depth_factor;
        return d;
      }});
}

const bool registered =
    registerPort("host_separate", "host port of cuda_separate: same plan, accumulation order and dW partials", "", "",
                 true, {}, DwStrategy::Separate, 1) &&
    registerPort("host_lastblock", "host port of cuda_lastblock: dW partials summed serially in CTA order", "", "",
                 true, {}, DwStrategy::LastBlock, 1) &&
    registerPort("host_atomic",
                 "host port of cuda_atomic: dW partials summed in an order that changes per call, subnormals flushed",
                 "", "", false, {}, DwStrategy::Atomic, 1);
}  // namespace

SpecSupport specSupport() {
  return SpecSupport{}
      .with(kWeightDtype, {std::nullopt, DType::F32})
      .with(kRounding, {Rounding::Plain, Rounding::Llama})
      .with(kWeightOffset, {0.f, 1.f})
      .with(kSavedStats, {SavedStats::Fp32, SavedStats::Activation})
      .with(kRmsBias, {false, true});
}

bool registerMutant(const char* name, const char* description, const char* bug, const char* caught_by, Defects defects,
                    DwStrategy strategy, int64_t row_depth_factor, bool deterministic) {
  return registerPort(name, description, bug, caught_by, deterministic, defects, strategy, row_depth_factor);
}

}  // namespace ulpcheck::rmsnorm_host
