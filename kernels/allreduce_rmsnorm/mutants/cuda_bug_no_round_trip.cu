// Mutant (aiter PR #2586): the fused one-shot kernel adds the residual to the
// fp32 rank sum, skipping the round trip through the activation dtype that
// the unfused pipeline it replaces makes (allreduce output in T, then the
// residual add). residual_out, and so y, differ from cuda_unfused in the last
// bit wherever the sum is not representable in T.
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm_cuda.cuh"

namespace ulpcheck::allreduce_rmsnorm_cuda {
namespace {
const bool registered = AllreduceRmsNormRegistry::add(AllreduceRmsNormKernel{
    withCudaPaths(KernelInfo{"allreduce_rmsnorm", "cuda_bug_no_round_trip", Backend::Cuda, kDTypes,
                             Contracts{true, true, DType::F32, false, "cuda_unfused", {"residual_out", "y"}},
                             "cuda_fused_oneshot adding the residual to the unrounded fp32 rank sum",
                             "fused allreduce without the round trip to the activation dtype before the residual add "
                             "(aiter PR #2586)",
                             "fused_vs_unfused"}),
    noWorkspace, runFusedOneshot<cuda_defects::kNoRoundTripBeforeResidual>, rmsnormDepths});
}  // namespace
}  // namespace ulpcheck::allreduce_rmsnorm_cuda
