// The CUDA RMSNorm + FP8 quantization (rmsnorm_quant.h's spec), fused as
// the inference kernels are (vLLM's rms_norm_*_quant, FlashInfer's
// rmsnorm_quant): one CTA a row (grid-stride), RMSNorm's own first pass and
// reduction (rmsnorm_forward.cuh: rowRstd, so its depths are rmsnorm's),
// then y recomputed from the row kept in registers (or re-read) for each
// later pass rather than held in a scratch buffer:
//
//   static scale     one pass: y -> p -> fp8;
//   per token/group  per window of up to kWindowGroups groups: each thread
//                    folds the |v| of its columns into its group's shared
//                    slot (atomicMax on the bits: |v| >= 0 orders as its
//                    bits, and a max is the same whatever the order), a
//                    barrier, then every element is scaled by its group's
//                    max, and the owner of a group's first column stores
//                    the group's scale.
//
// A group of 64 or 128 columns is a whole number of vectors (VEC divides
// 64), so a vector never straddles two groups. The fp8 conversion is CUDA's
// (cuda_fp8.h: cvt.rn.satfinite on sm_89+ under overflow=satfinite, its
// round-to-nearest-even software path with NaN / Inf past the range
// otherwise).
#pragma once

#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.h"
#include "core/fp8.h"
#include "kernels/rmsnorm/rmsnorm_forward.cuh"
#include "kernels/rmsnorm_quant/rmsnorm_quant.h"

namespace ulpcheck::rmsnorm_quant_cuda {

using namespace row_cuda;
using rmsnorm_cuda::WeightSpec;

/// Groups whose maxima one pass gathers in shared memory; a row with more
/// (N > 16384 at 64 columns a group) is taken in windows of this many.
constexpr int kWindowGroups = 256;

/// The spec's quantization chain, as the kernel reads it.
struct QuantChain {
  bool scaled_in_t = false;
  ScaleInverse inverse = ScaleInverse::Exact;
  __nv_fp8_interpretation_t format = __NV_E4M3;
  __nv_saturation_t saturation = __NV_SATFINITE;
  int64_t group = 0;   // columns a computed scale covers; 0 under quant=static
  int64_t groups = 0;  // computed scales a row has
  float fmax = 448.f, min_scale = 0.f;
};

inline QuantChain quantChainOf(const RowShape& s) {
  QuantChain q;
  q.scaled_in_t = kScaledInT(s.spec);
  q.inverse = kScaleInverse(s.spec);
  const Fp8Format f = kFp8Format(s.spec);
  q.format = f == Fp8Format::E5M2 ? __NV_E5M2 : __NV_E4M3;
  q.saturation = kFp8Overflow(s.spec) == Fp8Overflow::Saturate ? __NV_SATFINITE : __NV_NOSAT;
  q.group = scaleGroupColumns(s.spec, s.N);
  q.groups = scaleGroups(s.spec, s.N);
  q.fmax = float(fp8MaxFinite(f));
  q.min_scale = minTokenScale(f);
  return q;
}

/// The multiplier of inverse=exact (fl(1/s)) or inverse=approx (rcp.approx,
/// within an ulp of 1/s).
__device__ __forceinline__ float reciprocal(float s, ScaleInverse inverse) {
  if (inverse != ScaleInverse::Approx) return __frcp_rn(s);
  float m;
  asm("rcp.approx.f32 %0, %1;" : "=f"(m) : "f"(s));
  return m;
}

__device__ __forceinline__ __nv_fp8_storage_t quantized(float v, float s, float inverse, const QuantChain& q) {
  const float p = q.inverse == ScaleInverse::Divide ? __fdiv_rn(v, s) : __fmul_rn(v, inverse);
  return __nv_cvt_float_to_fp8(p, q.saturation, q.format);
}

/// D: cuda_defects bits (kGroupMaxReadWithoutBarrier, kFp8StoreSkipped).
template <typename T, typename W, int VEC, int VPT, unsigned D>
__global__ void __launch_bounds__(kMaxThreads)
    quantKernel(const T* __restrict__ x, const W* __restrict__ w, const float* __restrict__ static_scale,
                __nv_fp8_storage_t* __restrict__ y, float* __restrict__ scale, int64_t M, int64_t N, int64_t ld,
                float eps, int64_t nvec, int tail, int vpt_dynamic, WeightSpec spec, QuantChain q) {
  __shared__ float red[2 * 32];
  __shared__ unsigned group_max[kWindowGroups];
  int parity = 0;
  const int t = threadIdx.x;
  for (int64_t row = blockIdx.x; row < M; row += gridDim.x) {
    const T* xr = x + row * ld;
    auto load = [&](int64_t vi) { return loadVec<T, VEC>(xr + vi * VEC); };
    const float x_tail = t < tail ? toFloat(xr[nvec * VEC + t]) : 0.f;
    VecT<T, VEC> xs[VPT > 0 ? VPT : 1];
    const float r = rmsnorm_cuda::rowRstd<T, VEC, VPT>(load, xs, x_tail, N, eps, nvec, tail, vpt_dynamic, red, parity);
    // The value the spec scales: y, or y rounded to T (scaled=T).
    auto scaled = [&](float xe, W we) {
      const float v = rmsnorm_cuda::normalized<T>(xe, r, we, spec);
      return q.scaled_in_t ? toFloat(fromFloat<T>(v)) : v;
    };
    // fn(col, v) over this thread's columns in [begin, end), a whole number of vectors.
    auto visit = [&](int64_t begin, int64_t end, auto&& fn) {
#pragma unroll
      for (int v = 0; v < (VPT > 0 ? VPT : vpt_dynamic); ++v) {
        const int64_t vi = int64_t(v) * blockDim.x + t;
        const int64_t c0 = vi * VEC;
        if (vi >= nvec || c0 < begin || c0 >= end) continue;
        VecT<T, VEC> xv;
        if constexpr (VPT > 0) xv = xs[v];
        else xv = load(vi);
        const WeightVec<W, VEC> wv = loadWeights<W, VEC>(w + c0);
#pragma unroll
        for (int k = 0; k < VEC; ++k) fn(c0 + k, scaled(toFloat(xv.v[k]), wv.v[k]));
      }
      const int64_t col = nvec * VEC + t;
      if (t < tail && col >= begin && col < end) fn(col, scaled(x_tail, w[col]));
    };
    auto store = [&](int64_t col, __nv_fp8_storage_t code) {
      if constexpr (D & cuda_defects::kFp8StoreSkipped)
        if (row == M - 1 && col == N - 1) return;
      y[row * ld + col] = code;
    };
    if (!q.group) {
      const float s = *static_scale, inverse = reciprocal(s, q.inverse);
      visit(0, N, [&](int64_t col, float v) { store(col, quantized(v, s, inverse, q)); });
      continue;
    }
    for (int64_t g0 = 0; g0 < q.groups; g0 += kWindowGroups) {
      const int64_t g1 = g0 + kWindowGroups < q.groups ? g0 + kWindowGroups : q.groups;
      const int64_t begin = g0 * q.group, end = g1 * q.group < N ? g1 * q.group : N;
      for (int64_t i = t; i < g1 - g0; i += blockDim.x) group_max[i] = 0u;
      __syncthreads();
      // This thread's running max of the group it is in, folded into the
      // group's slot when it moves on: fmaxf passes over a NaN, as the
      // spec's max does.
      int64_t current = -1;
      float running = 0.f;
      visit(begin, end, [&](int64_t col, float v) {
        const int64_t g = col / q.group;
        if (g != current) {
          if (current >= 0) atomicMax(&group_max[current - g0], __float_as_uint(running));
          current = g;
          running = 0.f;
        }
        running = fmaxf(running, fabsf(v));
      });
      if (current >= 0) atomicMax(&group_max[current - g0], __float_as_uint(running));
      if constexpr (!(D & cuda_defects::kGroupMaxReadWithoutBarrier)) __syncthreads();
      visit(begin, end, [&](int64_t col, float v) {
        const int64_t g = col / q.group;
        const float s = fmaxf(__fdiv_rn(__uint_as_float(group_max[g - g0]), q.fmax), q.min_scale);
        if (col % q.group == 0) scale[row * q.groups + g] = s;
        store(col, quantized(v, s, reciprocal(s, q.inverse), q));
      });
      __syncthreads();  // every read of the slots before the next window's (or row's) reset
    }
  }
}

template <unsigned D>
void forward(const RmsNormQuantArgs& a, const LaunchEnv& env) {
  const RowShape& s = a.shape;
  const RowPlan p = planFor(s, {a.x, a.w});
  const int64_t grid = std::min<int64_t>(s.M, int64_t(env.sm_count) * (2048 / p.threads));
  const QuantChain q = quantChainOf(s);
  withStorageType(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    withWeightType<T>(s.wdtype(), [&](auto wtag) {
      using W = decltype(wtag);
      withVecAndVpt<T>(p, [&](auto vec, auto vpt) {
        quantKernel<T, W, vec(), vpt(), D><<<unsigned(grid), p.threads, 0, cudaStream_t(env.stream)>>>(
            static_cast<const T*>(a.x), static_cast<const W*>(a.w), a.static_scale,
            static_cast<__nv_fp8_storage_t*>(a.y), a.scale, s.M, s.N, s.ld, s.eps, p.nvec, p.tail, p.vpt,
            rmsnorm_cuda::weightSpecOf(s), q);
      });
    });
  });
  ULPCHECK_CUDA_LAUNCH("rmsnorm_quant quantKernel");
}

/// Registers the kernel with defects D as a variant; a mutant declares the
/// bug it reproduces and the property that must catch it.
template <unsigned D = cuda_defects::kNone>
bool registerVariant(const char* name, const char* description, cuda_defects::MutantSpec mutant = {}) {
  KernelInfo info{"rmsnorm_quant",
                  name,
                  Backend::Cuda,
                  {DType::F32, DType::F16, DType::BF16},
                  Contracts{true, true, DType::F32},
                  description,
                  mutant.bug,
                  mutant.caught_by};
  info.specs = SpecSupport{}.with(kWeightDtype, {std::nullopt, DType::F32}).with(kWeightOffset, {0.f, 1.f});
  withEveryQuantChoice(info.specs);
  return RmsNormQuantRegistry::add(RmsNormQuantKernel{
      std::move(info), [](const RmsNormQuantArgs& a, const LaunchEnv& e) { forward<D>(a, e); },
      [](const RowShape& s, const LaunchEnv& e) { return reductionDepths(s, e, DwStrategy::Separate); }});
}

}  // namespace ulpcheck::rmsnorm_quant_cuda
