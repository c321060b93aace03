// Mutant: cuda_rmsnorm_quant skips the store of the last row's last fp8
// element. Under overflow=nonfinite the poison (E4M3's NaN) is a legal
// value there, so memory safety runs the case again poisoned with -0
// (properties/rmsnorm_quant_op.cpp): under every overflow rule the element
// is seen unwritten.
#include "kernels/rmsnorm_quant/rmsnorm_quant_cuda.cuh"

namespace ulpcheck::rmsnorm_quant_cuda {
namespace {
const bool registered = registerVariant<cuda_defects::kFp8StoreSkipped>(
    "cuda_bug_skipped_fp8_store", "cuda_rmsnorm_quant leaving the last fp8 element unwritten",
    {"one fp8 store skipped (the last element of the last row)", "memory_safety"});
}  // namespace
}  // namespace ulpcheck::rmsnorm_quant_cuda
