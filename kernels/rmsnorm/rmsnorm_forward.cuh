// The RMSNorm forward of one row, shared by rmsnorm's forward kernel and by
// the fused allreduce + residual + RMSNorm kernels, so that a fused kernel
// rounds exactly as the unfused pipeline's RMSNorm does (same thread <->
// column ownership, same accumulation order, same block reduction).
#pragma once

#include <type_traits>

#include <algorithm>
#include <stdexcept>

#include "core/cuda_check.h"
#include "kernels/common/row_cuda.cuh"
#include "kernels/rmsnorm/rmsnorm.h"

namespace ulpcheck::rmsnorm_cuda {

using namespace row_cuda;

/// acc + x^2 with one rounding; the kXSquaredInFp16 mutant rounds x^2 to
/// fp16 first (PyTorch #133085).
template <unsigned D>
__device__ __forceinline__ float accumulateSquare(float x, float acc) {
  if constexpr (D & cuda_defects::kXSquaredInFp16)
    return __fadd_rn(acc, __half2float(__float2half_rn(__fmul_rn(x, x))));
  return __fmaf_rn(x, x, acc);
}

/// The spec's weight handling (core/norm_spec.h): offset + w formed
/// in fp32, and x-hat rounded to the activation dtype before the weight
/// multiplies it under rounding=llama.
struct WeightSpec {
  float offset = 0.f;
  bool llama = false;
};

inline WeightSpec weightSpecOf(const RowShape& s) {
  return WeightSpec{kWeightOffset(s.spec), kRounding(s.spec) == Rounding::Llama};
}

/// offset + w in fp32; kOffsetInActivationDtype rounds it to T.
template <typename T, unsigned D, typename W>
__device__ __forceinline__ float effectiveWeight(W w, const WeightSpec& spec) {
  if (spec.offset == 0.f) return toFloat(w);
  const float e = __fadd_rn(spec.offset, toFloat(w));
  if constexpr (D & cuda_defects::kOffsetInActivationDtype) return toFloat(fromFloat<T>(e));
  return e;
}

/// What the weight multiplies: x-hat, rounded to T under rounding=llama
/// (kLlamaXhatUnrounded: never).
template <typename T, unsigned D>
__device__ __forceinline__ float weightedXhat(float xhat, const WeightSpec& spec) {
  if constexpr (D & cuda_defects::kLlamaXhatUnrounded) return xhat;
  return spec.llama ? toFloat(fromFloat<T>(xhat)) : xhat;
}

/// Llama's dW term dy round_T(x-hat) (Liger's casting_mode="llama"): a
/// product of two activation-dtype values, formed in T (a product of two
/// 16-bit values is exact in fp32, so rounding it once is the correctly
/// rounded T product), then added to the fp32 accumulator; elsewhere an fma.
template <typename T, unsigned D>
__device__ __forceinline__ float accumulateDw(float acc, float g, float xhat, const WeightSpec& spec) {
  const float weighted = weightedXhat<T, D>(xhat, spec);
  if constexpr (!std::is_same_v<T, float>)
    if (spec.llama) return __fadd_rn(acc, toFloat(fromFloat<T>(__fmul_rn(g, weighted))));
  return __fmaf_rn(g, weighted, acc);
}

/// y converted to T: rounded to nearest, or under kYStoredTruncated
/// truncated toward zero (aiter #5151).
template <typename T, unsigned D>
__device__ __forceinline__ T yFromFloat(float v) {
  if constexpr ((D & cuda_defects::kYStoredTruncated) != 0 && std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rz(v);
  else if constexpr ((D & cuda_defects::kYStoredTruncated) != 0 && std::is_same_v<T, __half>) return __float2half_rz(v);
  else return fromFloat<T>(v);
}

/// The row's first pass: x^2 summed along this thread's chain (its vectors,
/// then its tail element), the block all-reduce, and rstd =
/// rsqrt(fl(sum / N) + eps). load(vi) returns vector vi; VPT > 0 keeps the
/// thread's vectors in xs for the caller's later passes. Every kernel that
/// normalises a row as RMSNorm does calls it, so they share one reduction
/// order and the depths row_plan::reductionDepths declares.
template <typename T, int VEC, int VPT, unsigned D = cuda_defects::kNone, typename Load>
__device__ __forceinline__ float rowRstd(Load&& load, VecT<T, VEC> (&xs)[VPT > 0 ? VPT : 1], float x_tail, int64_t N,
                                         float eps, int64_t nvec, int tail, int vpt_dynamic, float* red, int& parity) {
  const int t = threadIdx.x;
  float acc = 0.f;
#pragma unroll
  for (int v = 0; v < (VPT > 0 ? VPT : vpt_dynamic); ++v) {
    const int64_t vi = int64_t(v) * blockDim.x + t;
    if (vi >= nvec) continue;
    const VecT<T, VEC> xv = load(vi);
    if constexpr (VPT > 0) xs[v] = xv;
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc = accumulateSquare<D>(toFloat(xv.v[k]), acc);
  }
  if (t < tail) acc = accumulateSquare<D>(x_tail, acc);
  const float sum_sq = blockAllReduce(acc, red, parity);
  float r = rsqrtf(__fdiv_rn(sum_sq, float(N)) + eps);
  if constexpr (D & cuda_defects::kRstdInBf16) r = __bfloat162float(__float2bfloat16_rn(r));
  return r;
}

/// One element of y in fp32: x r (rounded to T first under rounding=llama)
/// times offset + w.
template <typename T, unsigned D = cuda_defects::kNone, typename W>
__device__ __forceinline__ float normalized(float x, float r, W w, const WeightSpec& spec) {
  return __fmul_rn(weightedXhat<T, D>(__fmul_rn(x, r), spec), effectiveWeight<T, D>(w, spec));
}

/// Normalises one row. The caller provides the row's input: load(vi) returns
/// vector vi for the first pass (VPT > 0 keeps it in registers), reload(vi)
/// returns it again for the second pass when VPT == 0, and x_tail is this
/// thread's tail element (column nvec * VEC + threadIdx.x, 0 when it has
/// none). Writes y and, when rstd is not null, thread 0 stores rstd. The
/// weights w are T or float (W).
/// D: cuda_defects bits (kXSquaredInFp16, kRstdInBf16, kLlamaXhatUnrounded,
/// kOffsetInActivationDtype, kYStoredTruncated).
template <typename T, int VEC, int VPT, unsigned D = cuda_defects::kNone, typename Load, typename Reload, typename W>
__device__ __forceinline__ void rmsnormRow(Load&& load, Reload&& reload, float x_tail, const W* __restrict__ w,
                                           T* __restrict__ yr, float* rstd, int64_t N, float eps, int64_t nvec,
                                           int tail, int vpt_dynamic, float* red, int& parity, WeightSpec spec = {}) {
  const int t = threadIdx.x;
  VecT<T, VEC> xs[VPT > 0 ? VPT : 1];
  const float r = rowRstd<T, VEC, VPT, D>(load, xs, x_tail, N, eps, nvec, tail, vpt_dynamic, red, parity);
  if (rstd && t == 0) *rstd = r;
#pragma unroll
  for (int v = 0; v < (VPT > 0 ? VPT : vpt_dynamic); ++v) {
    const int64_t vi = int64_t(v) * blockDim.x + t;
    if (vi >= nvec) continue;
    VecT<T, VEC> xv;
    if constexpr (VPT > 0) xv = xs[v];
    else xv = reload(vi);
    const WeightVec<W, VEC> wv = loadWeights<W, VEC>(w + vi * VEC);
    VecT<T, VEC> out;
#pragma unroll
    for (int k = 0; k < VEC; ++k) out.v[k] = yFromFloat<T, D>(normalized<T, D>(toFloat(xv.v[k]), r, wv.v[k], spec));
    storeVec<T, VEC>(yr + vi * VEC, out);
  }
  if (t < tail) {
    const int64_t col = nvec * VEC + t;
    yr[col] = yFromFloat<T, D>(normalized<T, D>(x_tail, r, w[col], spec));
  }
}

// ---------------------------------------------------------------------------
// Forward: one row per CTA iteration (grid-stride over rows). With VPT > 0 the
// row stays in registers between the two passes; VPT == 0 re-reads it.
template <typename T, typename W, int VEC, int VPT, unsigned D>
__global__ void __launch_bounds__(kMaxThreads)
    forwardKernel(const T* __restrict__ x, const W* __restrict__ w, T* __restrict__ y, float* __restrict__ rstd,
                  int64_t M, int64_t N, int64_t ld, float eps, int64_t nvec, int tail, int vpt_dynamic,
                  WeightSpec spec) {
  __shared__ float red[2 * 32];
  int parity = 0;
  const int t = threadIdx.x;
  for (int64_t row = blockIdx.x; row < M; row += gridDim.x) {
    const T* xr = x + row * ld;
    auto load = [&](int64_t vi) { return loadVec<T, VEC>(xr + vi * VEC); };
    const float x_tail = t < tail ? toFloat(xr[nvec * VEC + t]) : 0.f;
    rmsnormRow<T, VEC, VPT, D>(load, load, x_tail, w, y + row * ld, rstd + row, N, eps, nvec, tail, vpt_dynamic, red,
                               parity, spec);
  }
}

/// The forward every RMSNorm CUDA variant shares, also the last stage of the
/// unfused allreduce + residual + RMSNorm pipeline; a mutant's defects D and
/// `defects` switched on.
template <unsigned D = cuda_defects::kNone>
void forward(const RmsNormForwardArgs& f, const LaunchEnv& env, const cuda_defects::LaunchDefects& defects = {}) {
  // The CUDA variants do not declare them (SpecSupport): such a case never reaches here.
  if (f.b || f.x_dtype)
    throw std::invalid_argument("the RMSNorm CUDA forward implements neither a bias nor an x of y's dtype");
  const RowShape s = addressedShape(f.shape, defects);
  // vLLM #48271's launch: at most 256 threads per CTA once the batch has 256 rows.
  const int max_threads = defects.threads_from_m && s.M >= 256 ? 256 : kMaxThreads;
  const RowPlan p = planFor(s, {f.x, f.w, f.y}, max_threads);
  const int64_t grid = std::min<int64_t>(s.M, int64_t(env.sm_count) * (2048 / p.threads));
  withStorageType(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    withWeightType<T>(s.wdtype(), [&](auto wtag) {
      using W = decltype(wtag);
      withVecAndVpt<T>(p, [&](auto vec, auto vpt) {
        forwardKernel<T, W, vec(), vpt(), D><<<unsigned(grid), p.threads, 0, cudaStream_t(env.stream)>>>(
            static_cast<const T*>(f.x), static_cast<const W*>(f.w), static_cast<T*>(f.y), f.rstd, s.M, s.N, s.ld, s.eps,
            p.nvec, p.tail, p.vpt, weightSpecOf(s));
      });
    });
  });
  ULPCHECK_CUDA_LAUNCH("rmsnorm forwardKernel");
  roundSavedStats(s, {f.rstd}, cudaStream_t(env.stream));
  ULPCHECK_CUDA_LAUNCH("rmsnorm roundStatsKernel");
}

// The correct forward is compiled once, in rmsnorm_cuda.cu.
extern template void forward<cuda_defects::kNone>(const RmsNormForwardArgs&, const LaunchEnv&,
                                                  const cuda_defects::LaunchDefects&);

}  // namespace ulpcheck::rmsnorm_cuda
