// Device building blocks shared by the row-wise norm CUDA kernels (rmsnorm,
// layernorm, their mutants): 128-bit vector access, dtype conversion, block
// all-reduce, the fixed-order reduction of per-CTA column partials, and
// compile-time dispatch over dtype, vector width and vectors per thread.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/dtype.h"
#include "kernels/common/cuda_defects.h"
#include "kernels/common/row_launch.h"
#include "kernels/common/row_plan.h"

namespace ulpcheck::row_cuda {

using namespace row_plan;

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) VecT {
  T v[VEC];
};

template <typename T, int VEC>
__device__ __forceinline__ VecT<T, VEC> loadVec(const T* p) {
  if constexpr (sizeof(T) * VEC == 16) {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
    VecT<T, VEC> out;
    static_assert(sizeof(out) == sizeof(raw));
    memcpy(&out, &raw, sizeof raw);
    return out;
  } else {
    return *reinterpret_cast<const VecT<T, VEC>*>(p);
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void storeVec(T* p, const VecT<T, VEC>& v) {
  *reinterpret_cast<VecT<T, VEC>*>(p) = v;
}

/// VEC weights of type W (the activation type T, or float beside 16-bit
/// activations): T's one 128-bit load, or two of them for VEC = 8 floats,
/// or scalar loads on the scalar path. p is 16-byte aligned on the vector path.
template <typename W, int VEC>
struct WeightVec {
  W v[VEC];
};

template <typename W, int VEC>
__device__ __forceinline__ WeightVec<W, VEC> loadWeights(const W* p) {
  WeightVec<W, VEC> out;
  constexpr int kPer = 16 / int(sizeof(W));
  if constexpr (VEC >= kPer && VEC % kPer == 0) {
#pragma unroll
    for (int i = 0; i < VEC; i += kPer) {
      const VecT<W, kPer> chunk = loadVec<W, kPer>(p + i);
#pragma unroll
      for (int k = 0; k < kPer; ++k) out.v[i + k] = chunk.v[k];
    }
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) out.v[k] = p[k];
  }
  return out;
}

template <int VEC>
__device__ __forceinline__ void storeFloats(float* p, const float (&v)[VEC]) {
  if constexpr (VEC % 4 == 0) {
#pragma unroll
    for (int k = 0; k < VEC; k += 4)
      *reinterpret_cast<float4*>(p + k) = make_float4(v[k], v[k + 1], v[k + 2], v[k + 3]);
  } else {
#pragma unroll
    for (int k = 0; k < VEC; ++k) p[k] = v[k];
  }
}

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T fromFloat(float v);
template <>
__device__ __forceinline__ float fromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half fromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// Sum over the CTA, returned to every thread. Warp butterfly (every lane
/// ends with the same value: a + b == b + a), then each thread adds the warp
/// totals in warp order. Two shared slots alternate between calls, so the
/// slot written by call k+2 is only reused after call k+1's barrier.
/// D: cuda_defects bits (kReductionSlotReusedWithoutBarrier: one slot).
template <unsigned D = cuda_defects::kNone>
__device__ __forceinline__ float blockAllReduce(float v, float* red /* 2 * 32 */, int& parity) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
  float* slot = red + (D & cuda_defects::kReductionSlotReusedWithoutBarrier ? 0 : parity * 32);
  parity ^= 1;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  if (lane == 0) slot[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int i = 0; i < nwarps; ++i) total = __fadd_rn(total, slot[i]);
  return total;
}

template <typename T>
constexpr int maxRegisterElements() {
  return registerElements(int(sizeof(T)));
}

template <int V>
using IntC = std::integral_constant<int, V>;

/// Calls fn(dtype_tag) with a value of the storage type of `t`.
template <typename Fn>
void withStorageType(DType t, Fn&& fn) {
  switch (t) {
    case DType::F32: fn(float{}); return;
    case DType::F16: fn(__half{}); return;
    case DType::BF16: fn(__nv_bfloat16{}); return;
    case DType::E4M3:
    case DType::E5M2: break;
  }
  throw std::invalid_argument(std::string("the row-wise norm kernels take fp32, fp16 or bf16 activations, not ") +
                              dtypeName(t));
}

/// Calls fn(weight_tag) with a value of the weights' storage type: T's, or
/// float (fp32 weights beside 16-bit activations; the caller checked the
/// spec is one of these).
template <typename T, typename Fn>
void withWeightType(DType weights, Fn&& fn) {
  if (weights == DType::F32) fn(float{});
  else fn(T{});
}

/// Calls fn(IntC<VEC>, IntC<VPT>) for the plan; VPT 0 selects the path that
/// keeps nothing in registers across passes (rows wider than kMaxElements per
/// thread, which a kernel with more per-element state sets lower).
template <typename T, int kMaxElements = maxRegisterElements<T>(), typename Fn>
void withVecAndVpt(const RowPlan& p, Fn&& fn) {
  constexpr int kVec = 16 / sizeof(T);
  auto byVpt = [&](auto vec) {
    constexpr int V = decltype(vec)::value;
    constexpr int kMaxVpt = kMaxElements / V;
    if (p.vpt == 1) return fn(vec, IntC<1>{});
    if constexpr (kMaxVpt >= 2)
      if (p.vpt == 2) return fn(vec, IntC<2>{});
    if constexpr (kMaxVpt >= 4)
      if (p.vpt == 4) return fn(vec, IntC<4>{});
    if constexpr (kMaxVpt >= 8)
      if (p.vpt == 8) return fn(vec, IntC<8>{});
    if constexpr (kMaxVpt >= 16)
      if (p.vpt == 16) return fn(vec, IntC<16>{});
    return fn(vec, IntC<0>{});
  };
  if (p.vec == kVec) byVpt(IntC<kVec>{});
  else byVpt(IntC<1>{});
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

/// The plan of a launch: vectorised only when every pointer is 16-byte aligned.
inline RowPlan planFor(const RowShape& s, std::initializer_list<const void*> ptrs, int max_threads = kMaxThreads) {
  bool aligned = true;
  for (const void* p : ptrs) aligned &= aligned16(p);
  return planRow(s.dtype, s.N, s.ld, aligned, max_threads);
}

/// stats=T (core/norm_spec.h): the saved statistics rounded to the
/// activation dtype T, as a kernel that stores them in a T tensor does (the
/// forward's y used the fp32 values); they stay fp32 arrays in the ABI.
template <typename T>
__global__ void roundStatsKernel(float* __restrict__ stats, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) stats[i] = toFloat(fromFloat<T>(stats[i]));
}

/// Rounds a forward's saved statistics in place where the spec saves them in
/// the activation dtype; nothing otherwise.
inline void roundSavedStats(const RowShape& s, std::initializer_list<float*> stats, cudaStream_t stream) {
  if (!statsInActivationDtype(s.spec) || s.dtype == DType::F32) return;
  withStorageType(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (float* p : stats)
      if (p) roundStatsKernel<T><<<unsigned((s.M + 255) / 256), 256, 0, stream>>>(p, s.M);
  });
}

/// What the launch code of a variant with these defects addresses rows as:
/// the caller's shape, or rows packed at stride N (quack #88).
inline RowShape addressedShape(const RowShape& s, const cuda_defects::LaunchDefects& d) {
  RowShape out = s;
  if (d.ignore_row_stride) out.ld = s.N;
  return out;
}

/// Second stage of a column reduction: out[j] = sum over CTAs of
/// partial[c][j], in a fixed order: kDwGroups thread rows each sum the CTAs
/// c = g, g + G, ... serially, then thread row 0 adds the group sums in order
/// g = 0..G-1 (the depth dwColDepth(.., Separate) declares).
/// kBf16Sum (a mutant's, Liger PR #950) rounds every add to bf16.
template <typename T, bool kBf16Sum = false>
__global__ void __launch_bounds__(kDwColumnsPerBlock* kDwGroups)
    sumPartialsKernel(const float* __restrict__ partial, int64_t ctas, int64_t N, int64_t partial_ld,
                      T* __restrict__ out) {
  __shared__ float group_sum[kDwGroups][kDwColumnsPerBlock];
  const int lane = threadIdx.x % kDwColumnsPerBlock;
  const int group = threadIdx.x / kDwColumnsPerBlock;
  const int64_t col = int64_t(blockIdx.x) * kDwColumnsPerBlock + lane;
  auto add = [](float a, float b) {
    const float s = __fadd_rn(a, b);
    return kBf16Sum ? __bfloat162float(__float2bfloat16_rn(s)) : s;
  };
  float acc = 0.f;
  if (col < N)
    for (int64_t c = group; c < ctas; c += kDwGroups) acc = add(acc, partial[c * partial_ld + col]);
  group_sum[group][lane] = acc;
  __syncthreads();
  if (group == 0 && col < N) {
    float total = 0.f;
#pragma unroll
    for (int g = 0; g < kDwGroups; ++g) total = add(total, group_sum[g][lane]);
    out[col] = fromFloat<T>(total);
  }
}

template <typename T, bool kBf16Sum = false>
void launchSumPartials(const float* partial, int64_t ctas, int64_t N, int64_t partial_ld, T* out, cudaStream_t stream) {
  const unsigned blocks = unsigned((N + kDwColumnsPerBlock - 1) / kDwColumnsPerBlock);
  sumPartialsKernel<T, kBf16Sum>
      <<<blocks, kDwColumnsPerBlock * kDwGroups, 0, stream>>>(partial, ctas, N, partial_ld, out);
}

}  // namespace ulpcheck::row_cuda
