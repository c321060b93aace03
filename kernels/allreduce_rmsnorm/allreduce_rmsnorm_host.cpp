// Host ports of the CUDA allreduce + residual + RMSNorm variants
// (allreduce_rmsnorm_cuda.cu) over virtual ranks in host memory: the same
// rank-order fp32 sum, the same round trips through T, and rmsnorm's host
// forward for the normalisation, in the same stages (unfused: three passes
// over the tensors; one-shot: row by row; two-stage: owned rows, then copies).
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm_host.h"

#include <cstring>
#include <tuple>

#include "kernels/common/row_host.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck::allreduce_rmsnorm_host {

namespace {

using namespace row_host;

/// Element i of rank `rank`'s fp32 sum x_0 + ... + x_{R-1}, in rank order
/// from x_0 (or, with the sum_from_own_rank defect, from x_rank on).
float rankSum(const AllreduceRmsNormArgs& a, int rank, int64_t i, const Defects& defects) {
  const DType t = a.shape.dtype;
  const int first = defects.sum_from_own_rank ? rank : 0;
  float acc = load(a.x[first], t, i);
  for (int k = 1; k < a.ranks; ++k) acc += load(a.x[(first + k) % a.ranks], t, i);
  return acc;
}

float allreduceAt(const AllreduceRmsNormArgs& a, int64_t i) {
  return static_cast<float>(roundToFormat(a.shape.dtype, rankSum(a, 0, i, {})));
}

/// round_R(s + residual) for s already in T, R the residual's dtype (T, or fp32 under res=fp32).
float residualAdd(DType r, float s, float residual) { return static_cast<float>(roundToFormat(r, s + residual)); }

DType residualOf(const RowShape& s) { return residualDtype(s.dtype, s.spec); }

/// rmsnorm's host forward of residual_out (in its own dtype) into y.
void normalise(const RowShape& rows, const void* residual_out, const void* w, void* y, float* rstd,
               const LaunchEnv& env) {
  RmsNormForwardArgs f{rows, residual_out, w, y, rstd};
  if (residualOf(rows) != rows.dtype) f.x_dtype = residualOf(rows);
  rmsnorm_host::forward(f, env);
}

/// Rows [begin, end) of rank r: allreduce and residual add into
/// residual_out, then rmsnorm's host forward on those rows.
void fusedRows(const AllreduceRmsNormArgs& a, int r, int64_t begin, int64_t end, const LaunchEnv& env,
               std::vector<float>& rstd, const Defects& defects) {
  const RowShape& s = a.shape;
  const DType rt = residualOf(s);
  if (end <= begin) return;
  for (int64_t row = begin; row < end; ++row)
    for (int64_t col = 0; col < s.N; ++col) {
      const int64_t i = row * s.ld + col;
      const float sum = rankSum(a, r, i, defects);
      const float reduced = defects.no_round_trip ? sum : static_cast<float>(roundToFormat(s.dtype, sum));
      store(a.residual_out[r], rt, i, residualAdd(rt, reduced, load(a.residual[r], rt, i)));
    }
  RowShape rows = s;
  rows.M = end - begin;
  if (defects.gamma_as_input_dtype) kWeightDtype.set(rows.spec, std::nullopt);  // w's bytes read as T
  rstd.resize(size_t(rows.M));
  normalise(rows, static_cast<const char*>(a.residual_out[r]) + size_t(begin * s.ld) * storageBytes(rt), a.w[r],
            static_cast<char*>(a.y[r]) + size_t(begin * s.ld) * storageBytes(s.dtype), rstd.data(), env);
}

void runUnfused(const AllreduceRmsNormArgs& a, const LaunchEnv& env) {
  const RowShape& s = a.shape;
  std::vector<float> sum(size_t(s.M * s.N)), rstd(size_t(s.M));
  for (int r = 0; r < a.ranks; ++r) {
    for (int64_t row = 0; row < s.M; ++row)  // the allreduce
      for (int64_t col = 0; col < s.N; ++col) sum[size_t(row * s.N + col)] = allreduceAt(a, row * s.ld + col);
    for (int64_t row = 0; row < s.M; ++row)  // the residual add
      for (int64_t col = 0; col < s.N; ++col) {
        const int64_t i = row * s.ld + col;
        store(a.residual_out[r], residualOf(s), i,
              residualAdd(residualOf(s), sum[size_t(row * s.N + col)], load(a.residual[r], residualOf(s), i)));
      }
    normalise(s, a.residual_out[r], a.w[r], a.y[r], rstd.data(), env);
  }
}

void runFusedOneshot(const AllreduceRmsNormArgs& a, const LaunchEnv& env, const Defects& defects) {
  std::vector<float> rstd;
  for (int r = 0; r < a.ranks; ++r) fusedRows(a, r, 0, a.shape.M, env, rstd, defects);
}

int64_t ownedBegin(int64_t M, int ranks, int r) { return M * r / ranks; }

void runFusedTwostage(const AllreduceRmsNormArgs& a, const LaunchEnv& env) {
  const RowShape& s = a.shape;
  std::vector<float> rstd;
  for (int r = 0; r < a.ranks; ++r)
    fusedRows(a, r, ownedBegin(s.M, a.ranks, r), ownedBegin(s.M, a.ranks, r + 1), env, rstd, {});
  for (int r = 0; r < a.ranks; ++r)
    for (int owner = 0; owner < a.ranks; ++owner) {
      if (owner == r) continue;
      for (int64_t row = ownedBegin(s.M, a.ranks, owner); row < ownedBegin(s.M, a.ranks, owner + 1); ++row)
        for (auto [from, to, t] : {std::tuple{a.residual_out[owner], a.residual_out[r], residualOf(s)},
                                   std::tuple{a.y[owner], a.y[r], s.dtype}}) {
          const size_t bytes = storageBytes(t), at = size_t(row * s.ld) * bytes;
          std::memcpy(static_cast<char*>(to) + at, static_cast<const char*>(from) + at, size_t(s.N) * bytes);
        }
    }
}

ReductionDepths rmsnormDepths(const RowShape& s, const LaunchEnv& env) {
  return reductionDepths(s, env, DwStrategy::Separate);
}
size_t noWorkspace(const RowShape&, int) { return 0; }

using Runner = std::function<void(const AllreduceRmsNormArgs&, const LaunchEnv&)>;

bool registerPort(const char* name, const char* description, const char* bug, const char* caught_by, Runner run,
                  const char* unfused) {
  Contracts contracts{.deterministic = true, .batch_invariant = true, .accumulation = DType::F32};
  if (*unfused) {
    contracts.unfused_pipeline = unfused;
    contracts.bitwise_with_unfused = {"residual_out", "y"};
  }
  KernelInfo info{"allreduce_rmsnorm", name,        Backend::Host, {DType::F32, DType::F16, DType::BF16},
                  contracts,           description, bug,           caught_by};
  // rmsnorm's host forward implements every spec; the oracle does not model
  // rounding=llama after an allreduce.
  info.specs = SpecSupport{}
                   .with(kWeightDtype, {std::nullopt, DType::F32})
                   .with(kWeightOffset, {0.f, 1.f})
                   .with(kResidualDtype, {std::nullopt, DType::F32});
  return AllreduceRmsNormRegistry::add(AllreduceRmsNormKernel{withRowPaths(std::move(info), {.backward = false}),
                                                              noWorkspace, std::move(run), rmsnormDepths});
}

const bool registered =
    registerPort("host_unfused", "host port of cuda_unfused: allreduce, residual add, rmsnorm forward as three passes",
                 "", "", runUnfused, "") &&
    registerPort(
        "host_fused_oneshot", "host port of cuda_fused_oneshot", "", "",
        [](const AllreduceRmsNormArgs& a, const LaunchEnv& e) { runFusedOneshot(a, e, {}); }, "host_unfused") &&
    registerPort("host_fused_twostage", "host port of cuda_fused_twostage: owned rows, then copies from their owners",
                 "", "", runFusedTwostage, "host_unfused");

}  // namespace

bool registerMutant(const char* name, const char* description, const char* bug, const char* caught_by,
                    Defects defects) {
  return registerPort(
      name, description, bug, caught_by,
      [defects](const AllreduceRmsNormArgs& a, const LaunchEnv& e) { runFusedOneshot(a, e, defects); }, "host_unfused");
}

}  // namespace ulpcheck::allreduce_rmsnorm_host
