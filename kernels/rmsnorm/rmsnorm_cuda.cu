// CUDA RMSNorm, written the way production kernels are: 128-bit vectorised
// loads and stores, fp32 accumulation, warp-shuffle plus shared-memory block
// reductions. This file holds the forward (shared by every CUDA variant) and
// registers cuda_separate: dW through per-CTA fp32 partials summed by a second
// kernel in a fixed order (deterministic, batch invariant).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {

namespace {
// ---------------------------------------------------------------------------
// Forward: one row per CTA iteration (grid-stride over rows). With VPT > 0 the
// row stays in registers between the two passes; VPT == 0 re-reads it.
template <typename T, int VEC, int VPT>
__global__ void __launch_bounds__(kMaxThreads)
    forwardKernel(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, float* __restrict__ rstd,
                  int64_t M, int64_t N, int64_t ld, float eps, int64_t nvec, int tail, int vpt_dynamic) {
  __shared__ float red[2 * 32];
  int parity = 0;
  const int t = threadIdx.x;
  for (int64_t row = blockIdx.x; row < M; row += gridDim.x) {
    const T* xr = x + row * ld;
    VecT<T, VEC> xs[VPT > 0 ? VPT : 1];
    float acc = 0.f;
#pragma unroll
    for (int v = 0; v < (VPT > 0 ? VPT : vpt_dynamic); ++v) {
      const int64_t vi = int64_t(v) * blockDim.x + t;
      if (vi >= nvec) continue;
      VecT<T, VEC> xv = loadVec<T, VEC>(xr + vi * VEC);
      if constexpr (VPT > 0) xs[v] = xv;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float xf = toFloat(xv.v[k]);
        acc = __fmaf_rn(xf, xf, acc);
      }
    }
    const float xt = t < tail ? toFloat(xr[nvec * VEC + t]) : 0.f;
    if (t < tail) acc = __fmaf_rn(xt, xt, acc);
    const float sum_sq = blockAllReduce(acc, red, parity);
    const float r = rsqrtf(__fdiv_rn(sum_sq, float(N)) + eps);
    if (t == 0) rstd[row] = r;
    T* yr = y + row * ld;
#pragma unroll
    for (int v = 0; v < (VPT > 0 ? VPT : vpt_dynamic); ++v) {
      const int64_t vi = int64_t(v) * blockDim.x + t;
      if (vi >= nvec) continue;
      VecT<T, VEC> xv;
      if constexpr (VPT > 0) xv = xs[v];
      else xv = loadVec<T, VEC>(xr + vi * VEC);
      const VecT<T, VEC> wv = loadVec<T, VEC>(w + vi * VEC);
      VecT<T, VEC> out;
#pragma unroll
      for (int k = 0; k < VEC; ++k) out.v[k] = fromFloat<T>(__fmul_rn(__fmul_rn(toFloat(xv.v[k]), r), toFloat(wv.v[k])));
      storeVec<T, VEC>(yr + vi * VEC, out);
    }
    if (t < tail) {
      const int64_t col = nvec * VEC + t;
      yr[col] = fromFloat<T>(__fmul_rn(__fmul_rn(xt, r), toFloat(w[col])));
    }
  }
}

}  // namespace

void forward(const RmsNormForwardArgs& f, const LaunchEnv& env) {
  const RowPlan p = planFor(f.shape, {f.x, f.w, f.y});
  const auto& s = f.shape;
  const int64_t grid = std::min<int64_t>(s.M, int64_t(env.sm_count) * (2048 / p.threads));
  withStorageType(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    withVecAndVpt<T>(p, [&](auto vec, auto vpt) {
      forwardKernel<T, vec(), vpt()><<<unsigned(grid), p.threads, 0, cudaStream_t(env.stream)>>>(
          static_cast<const T*>(f.x), static_cast<const T*>(f.w), static_cast<T*>(f.y), f.rstd, s.M, s.N, s.ld, s.eps,
          p.nvec, p.tail, p.vpt);
    });
  });
  ULPCHECK_CUDA_LAUNCH("rmsnorm forwardKernel");
}

namespace {
const bool registered = registerVariant<DwStrategy::Separate>(
    "cuda_separate",
    "128-bit loads, fp32 accumulation, block all-reduce; dW via per-CTA fp32 partials and a separate fixed-order "
    "reduction kernel",
    Contracts{true, true, DType::F32});
}  // namespace

}  // namespace ulpcheck::rmsnorm_cuda
