// The RMSNorm forward of one row, shared by rmsnorm's forward kernel and by
// the fused allreduce + residual + RMSNorm kernels, so that a fused kernel
// rounds exactly as the unfused pipeline's RMSNorm does (same thread <->
// column ownership, same accumulation order, same block reduction).
#pragma once

#include "kernels/common/row_cuda.cuh"
#include "kernels/rmsnorm/rmsnorm.h"

namespace ulpcheck::rmsnorm_cuda {

using namespace row_cuda;

/// Normalises one row. The caller provides the row's input: load(vi) returns
/// vector vi for the first pass (VPT > 0 keeps it in registers), reload(vi)
/// returns it again for the second pass when VPT == 0, and x_tail is this
/// thread's tail element (column nvec * VEC + threadIdx.x, 0 when it has
/// none). Writes y and, when rstd is not null, thread 0 stores rstd.
template <typename T, int VEC, int VPT, typename Load, typename Reload>
__device__ __forceinline__ void rmsnormRow(Load&& load, Reload&& reload, float x_tail, const T* __restrict__ w,
                                           T* __restrict__ yr, float* rstd, int64_t N, float eps, int64_t nvec,
                                           int tail, int vpt_dynamic, float* red, int& parity) {
  const int t = threadIdx.x;
  VecT<T, VEC> xs[VPT > 0 ? VPT : 1];
  float acc = 0.f;
#pragma unroll
  for (int v = 0; v < (VPT > 0 ? VPT : vpt_dynamic); ++v) {
    const int64_t vi = int64_t(v) * blockDim.x + t;
    if (vi >= nvec) continue;
    const VecT<T, VEC> xv = load(vi);
    if constexpr (VPT > 0) xs[v] = xv;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const float xf = toFloat(xv.v[k]);
      acc = __fmaf_rn(xf, xf, acc);
    }
  }
  if (t < tail) acc = __fmaf_rn(x_tail, x_tail, acc);
  const float sum_sq = blockAllReduce(acc, red, parity);
  const float r = rsqrtf(__fdiv_rn(sum_sq, float(N)) + eps);
  if (rstd && t == 0) *rstd = r;
#pragma unroll
  for (int v = 0; v < (VPT > 0 ? VPT : vpt_dynamic); ++v) {
    const int64_t vi = int64_t(v) * blockDim.x + t;
    if (vi >= nvec) continue;
    VecT<T, VEC> xv;
    if constexpr (VPT > 0) xv = xs[v];
    else xv = reload(vi);
    const VecT<T, VEC> wv = loadVec<T, VEC>(w + vi * VEC);
    VecT<T, VEC> out;
#pragma unroll
    for (int k = 0; k < VEC; ++k) out.v[k] = fromFloat<T>(__fmul_rn(__fmul_rn(toFloat(xv.v[k]), r), toFloat(wv.v[k])));
    storeVec<T, VEC>(yr + vi * VEC, out);
  }
  if (t < tail) {
    const int64_t col = nvec * VEC + t;
    yr[col] = fromFloat<T>(__fmul_rn(__fmul_rn(x_tail, r), toFloat(w[col])));
  }
}

/// The forward every RMSNorm CUDA variant shares (rmsnorm_cuda.cu), also the
/// last stage of the unfused allreduce + residual + RMSNorm pipeline.
void forward(const RmsNormForwardArgs& f, const LaunchEnv& env);

}  // namespace ulpcheck::rmsnorm_cuda
