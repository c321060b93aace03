// CUDA RMSNorm, written the way production kernels are: 128-bit vectorised
// loads and stores, fp32 accumulation, warp-shuffle plus shared-memory block
// reductions. This file holds the forward (shared by every CUDA variant) and
// registers cuda_separate: dW through per-CTA fp32 partials summed by a second
// kernel in a fixed order (deterministic, batch invariant).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"
#include "kernels/rmsnorm/rmsnorm_forward.cuh"

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
    auto load = [&](int64_t vi) { return loadVec<T, VEC>(xr + vi * VEC); };
    const float x_tail = t < tail ? toFloat(xr[nvec * VEC + t]) : 0.f;
    rmsnormRow<T, VEC, VPT>(load, load, x_tail, w, y + row * ld, rstd + row, N, eps, nvec, tail, vpt_dynamic, red,
                            parity);
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
