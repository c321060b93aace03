// A CUDA plugin whose kernels fault the way external GPU kernels do, each in
// one shape regime of a few percent of generated cases, for the fault
// isolation suite (tests/kernels/plugin/plugin_faults_gpu_test.cpp): the faults must
// become failing cases with repros while every other case is still judged.
// Outside its regime each variant is the example library's correct CUDA
// RMSNorm (examples/plugin).
#include <ulpcheck/plugin.h>

#include <cuda_runtime.h>

#include <string>

#include "../../examples/plugin/mylib_rmsnorm.h"

namespace {

thread_local std::string last_error;

/// An out-of-bounds store far past any allocation: a sticky
/// cudaErrorIllegalAddress that ends the CUDA context of the process.
__global__ void storeToIllegalAddress(float* nowhere) { nowhere[size_t(1) << 40] = 1.f; }

/// "Hangs": spins against a clock64 deadline, never forever (the GPU is
/// shared and must never need a reset). The coordinator kills the worker at
/// --case-timeout, which destroys its context and ends the kernel with it.
__global__ void spinUntil(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

mylib::Dtype dtypeOf(ulpcheck_dtype t) {
  return t == ULPCHECK_F32 ? mylib::Dtype::F32 : t == ULPCHECK_F16 ? mylib::Dtype::F16 : mylib::Dtype::BF16;
}

mylib::RmsNormShape shapeOf(const ulpcheck_tensor& x, float eps) {
  return mylib::RmsNormShape{dtypeOf(x.dtype), x.rows, x.cols, x.row_stride, eps};
}

int status(int code) {
  if (code) last_error = mylib::cudaErrorText(code);
  return code;
}

size_t workspace(const ulpcheck_shape* s, void*) {
  return mylib::rmsnormBackwardWorkspaceCuda({dtypeOf(s->dtype), s->rows, s->cols, s->row_stride, s->eps});
}

int forward(const ulpcheck_rmsnorm_forward_args* a, const ulpcheck_launch* l) {
  return status(mylib::rmsnormForwardCuda(shapeOf(a->x, a->eps), a->x.data, a->w.data, a->y.data,
                                          static_cast<float*>(a->rstd.data), l->stream));
}

int correctBackward(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch* l) {
  return status(mylib::rmsnormBackwardCuda(shapeOf(a->x, a->eps), a->x.data, a->w.data, a->dy.data,
                                           static_cast<const float*>(a->rstd.data), a->dx.data, a->dw.data,
                                           l->workspace, l->stream));
}

/// The regimes: N = 5 or 7 (mod 64), each about 3% of generated cases.
constexpr int64_t kIllegalAddressCols = 5, kSpinCols = 7;

int backwardIllegalAddress(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch* l) {
  if (a->x.cols % 64 == kIllegalAddressCols)
    storeToIllegalAddress<<<1, 1, 0, cudaStream_t(l->stream)>>>(static_cast<float*>(a->dx.data));
  return correctBackward(a, l);
}

int backwardSpins(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch* l) {
  if (a->x.cols % 64 == kSpinCols) {
    int device = 0, khz = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device);
    const long long two_minutes = 120LL * 1000 * (khz > 0 ? khz : 2000000);
    spinUntil<<<1, 1, 0, cudaStream_t(l->stream)>>>(two_minutes);
  }
  return correctBackward(a, l);
}

const char* lastError() { return last_error.c_str(); }

ulpcheck_variant variant(const char* name, const char* description, ulpcheck_rmsnorm_backward_fn backward) {
  ulpcheck_variant v{};
  v.op = "rmsnorm";
  v.name = name;
  v.description = description;
  v.backend = ULPCHECK_CUDA;
  v.dtypes = ULPCHECK_DTYPE_BIT(ULPCHECK_F32) | ULPCHECK_DTYPE_BIT(ULPCHECK_F16) | ULPCHECK_DTYPE_BIT(ULPCHECK_BF16);
  v.contracts = ULPCHECK_DETERMINISTIC | ULPCHECK_BATCH_INVARIANT;
  v.accumulation = ULPCHECK_F32;
  v.workspace_bytes = workspace;
  v.rmsnorm_forward = forward;
  v.rmsnorm_backward = backward;
  return v;
}

const ulpcheck_variant kVariants[] = {
    variant("gpu_rmsnorm_illegal_address_at_n5", "stores to an illegal address when N = 5 (mod 64)",
            backwardIllegalAddress),
    variant("gpu_rmsnorm_spins_at_n7", "spins for two minutes (clock64 deadline) when N = 7 (mod 64)", backwardSpins)};

const ulpcheck_plugin kPlugin{ULPCHECK_ABI_VERSION,
                              sizeof(ulpcheck_variant),
                              "ulpcheck faulty CUDA test plugin",
                              int32_t(sizeof kVariants / sizeof kVariants[0]),
                              kVariants,
                              lastError};

}  // namespace

extern "C" ULPCHECK_PLUGIN_EXPORT const ulpcheck_plugin* ulpcheck_plugin_v1(void) { return &kPlugin; }
