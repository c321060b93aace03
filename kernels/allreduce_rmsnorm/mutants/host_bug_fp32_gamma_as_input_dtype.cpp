// Mutant (vLLM #48324): the fused kernel reads the norm weight gamma in the
// activation dtype whatever dtype it is stored in, as FlashInfer's
// allreduce_fusion does; an fp32 gamma beside bf16/fp16 activations (the
// common training setup) becomes halves of fp32 words. Only a case with
// wdtype=fp32 shows it; accuracy must catch it.
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = allreduce_rmsnorm_host::registerMutant(
    "host_bug_fp32_gamma_as_input_dtype", "fused one-shot host port reading gamma in the activation dtype",
    "fused allreduce + RMSNorm reads an fp32 gamma as the input dtype (vLLM #48324, FlashInfer allreduce_fusion)",
    "accuracy", {.gamma_as_input_dtype = true});
}  // namespace
}  // namespace ulpcheck
