// CUDA allreduce + residual add + RMSNorm over R ranks whose buffers the
// kernels reach through pointers (virtual ranks on one device here; the same
// code reads peers through peer access across GPUs). Three variants:
//
//   cuda_unfused        allreduce kernel (fp32 sum in rank order, stored in T),
//                       residual-add kernel, then rmsnorm's forward kernel
//   cuda_fused_oneshot  one kernel per rank: each rank reads every peer's row,
//                       sums in fp32 in rank order, rounds to T, adds the
//                       residual, rounds to T, normalises
//   cuda_fused_twostage reduce-scatter (rank r finishes the rows it owns, as
//                       the one-shot kernel does) then all-gather (every rank
//                       copies the rows the others own)
//
// Every rank sums in the same order, so every rank holds the same bits, and
// the fused kernels normalise with rmsnormRow, the unfused pipeline's own
// forward: residual_out and y are bitwise those of the unfused pipeline.
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm_cuda.cuh"

namespace ulpcheck::allreduce_rmsnorm_cuda {

namespace {

void runUnfused(const AllreduceRmsNormArgs& a, const LaunchEnv& env) {
  const RowShape& s = a.shape;
  const RowPlan p = planOf(a);
  withStorageType(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int r = 0; r < a.ranks; ++r) {
      auto* sum = static_cast<T*>(a.workspace[r]);
      auto* rstd = reinterpret_cast<float*>(static_cast<char*>(a.workspace[r]) + unfusedRstdOffset(s));
      launchRowwise<T>(p, AllreduceOp<T>{rankInputs<T>(a), sum}, s.M, s.ld, env, "allreduce kernel");
      launchRowwise<T>(p,
                       ResidualAddOp<T>{sum, static_cast<const T*>(a.residual[r]), static_cast<T*>(a.residual_out[r])},
                       s.M, s.ld, env, "residual-add kernel");
      rmsnorm_cuda::forward(RmsNormForwardArgs{s, a.residual_out[r], a.w[r], a.y[r], rstd}, env);
    }
  });
}

void runFusedTwostage(const AllreduceRmsNormArgs& a, const LaunchEnv& env) {
  const RowPlan p = planOf(a);
  for (int r = 0; r < a.ranks; ++r) reduceScatterStage(a, p, r, env);
  // One stream: every rank's first stage is done before any second stage.
  for (int r = 0; r < a.ranks; ++r) allGatherStage(a, p, r, env);
}

const bool registered =
    AllreduceRmsNormRegistry::add(AllreduceRmsNormKernel{
        withCudaPaths(KernelInfo{
            "allreduce_rmsnorm", "cuda_unfused", Backend::Cuda, kDTypes, Contracts{true, true, DType::F32},
            "allreduce kernel (fp32 in rank order, stored in T), residual-add kernel, rmsnorm forward kernel", "", ""}),
        unfusedWorkspace, runUnfused, rmsnormDepths}) &&
    AllreduceRmsNormRegistry::add(AllreduceRmsNormKernel{
        withCudaPaths(
            KernelInfo{"allreduce_rmsnorm", "cuda_fused_oneshot", Backend::Cuda, kDTypes,
                       Contracts{true, true, DType::F32, false, "cuda_unfused", {"residual_out", "y"}},
                       "one kernel per rank: reads every peer's row, fp32 sum in rank order, round to T, residual add, "
                       "round to T, RMSNorm",
                       "", ""}),
        noWorkspace, runFusedOneshot<>, rmsnormDepths}) &&
    AllreduceRmsNormRegistry::add(AllreduceRmsNormKernel{
        withCudaPaths(
            KernelInfo{"allreduce_rmsnorm", "cuda_fused_twostage", Backend::Cuda, kDTypes,
                       Contracts{true, true, DType::F32, false, "cuda_unfused", {"residual_out", "y"}},
                       "reduce-scatter (each rank fuses allreduce, residual add and RMSNorm on the rows it owns), then "
                       "all-gather of the finished rows",
                       "", ""}),
        noWorkspace, runFusedTwostage, rmsnormDepths});

}  // namespace
}  // namespace ulpcheck::allreduce_rmsnorm_cuda
