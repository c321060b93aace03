// "mylib": a stand-in for a user's own norm-kernel library (what the example
// plugin puts under ulpcheck). Its API knows nothing of ulpcheck.
//
//   rstd_i = 1 / sqrt(mean_j x_ij^2 + eps),  y = x rstd w,
//   dx = rstd (w dy - xhat c),  c_i = mean_j(w_j dy_ij xhat_ij),  dw_j = sum_i dy_ij xhat_ij
#pragma once

#include <cstddef>
#include <cstdint>

namespace mylib {

enum class Dtype { F32, F16, BF16 };

struct RmsNormShape {
  Dtype dtype;
  int64_t rows, cols, stride;  // stride: elements between rows
  float eps;
};

// Host implementation: fp32 math, one pass per row, dW accumulated row by row.
// sum_dw_in_bf16 reproduces a known defect class (Liger-Kernel PR #950): the
// dW accumulator rounded to bf16 after every row.
void rmsnormForwardHost(const RmsNormShape& s, const void* x, const void* w, void* y, float* rstd);
void rmsnormBackwardHost(const RmsNormShape& s, const void* x, const void* w, const void* dy, const float* rstd,
                         void* dx, void* dw, bool sum_dw_in_bf16 = false);

// CUDA implementation (when the library is built with CUDA): one 256-thread
// block per row, fp32 block reductions, dW from per-block partials summed by
// a second kernel in block order. Returns a cudaError_t as int.
size_t rmsnormBackwardWorkspaceCuda(const RmsNormShape& s);
int rmsnormForwardCuda(const RmsNormShape& s, const void* x, const void* w, void* y, float* rstd, void* stream);
// sum_partials_in_bf16 reproduces the same defect class on the GPU: the
// per-block dW partials (fp32) summed with a bf16 running total.
int rmsnormBackwardCuda(const RmsNormShape& s, const void* x, const void* w, const void* dy, const float* rstd,
                        void* dx, void* dw, void* workspace, void* stream, bool sum_partials_in_bf16 = false);
const char* cudaErrorText(int code);

}  // namespace mylib
