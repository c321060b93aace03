// Mutant (vLLM #48324): the fused one-shot kernel reads the norm weight
// gamma in the activation dtype whatever dtype it is stored in, as
// FlashInfer's allreduce_fusion does. With the common training setup (fp32
// gamma beside bf16/fp16 activations) each gamma_j is made of half of an
// fp32 word, and y is garbage. Tests that build gamma in the activation
// dtype never see it; a case with wdtype=fp32 fails accuracy on its first
// element.
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm_cuda.cuh"

namespace ulpcheck::allreduce_rmsnorm_cuda {
namespace {
const bool registered = AllreduceRmsNormRegistry::add(AllreduceRmsNormKernel{
    withCudaPaths(KernelInfo{"allreduce_rmsnorm", "cuda_bug_fp32_gamma_as_input_dtype", Backend::Cuda, kDTypes,
                             Contracts{true, true, DType::F32, false, "cuda_unfused", {"residual_out", "y"}},
                             "cuda_fused_oneshot reading gamma in the activation dtype, whatever its dtype",
                             "fused allreduce + RMSNorm reads an fp32 gamma as the input dtype (vLLM #48324, "
                             "FlashInfer allreduce_fusion)",
                             "accuracy"}),
    noWorkspace, runFusedOneshot<cuda_defects::kNone, GammaRead::AsInputDtype>, rmsnormDepths});
}  // namespace
}  // namespace ulpcheck::allreduce_rmsnorm_cuda
