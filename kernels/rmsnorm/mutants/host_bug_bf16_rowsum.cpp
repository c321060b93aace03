// Mutant: the backward's per-row sum c = mean(w dy xhat) accumulated in bf16.
// Reproduces the class of Liger-Kernel PR #950 (a reduction carried in bf16
// instead of fp32); must be caught by the accuracy property.
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_host::registerMutant(
    "host_bug_bf16_rowsum", "host port with the backward row sum accumulated in bf16",
    "reduction accumulated in bf16 instead of fp32 (Liger-Kernel PR #950 class)", "accuracy", {.rowsum_in_bf16 = true});
}  // namespace
}  // namespace ulpcheck
