// The CUDA building blocks of the allreduce + residual + RMSNorm variants:
// the rank sum in fp32 (rank order, starting from x_0), the round trips
// through T, the fused row kernel (normalising with rmsnorm's own
// rmsnormRow), elementwise row kernels, and the launch helpers shared by the
// single-device (virtual ranks), peer-access and NCCL variants.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda_check.h"
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm_forward.cuh"

namespace ulpcheck::allreduce_rmsnorm_cuda {

using namespace row_cuda;
using rmsnorm_cuda::rmsnormRow;

/// The ranks' partials, passed by value (kernel parameter space).
template <typename T>
struct RankInputs {
  const T* x[kMaxRanks];
  int ranks;
};

template <typename T>
RankInputs<T> rankInputs(const AllreduceRmsNormArgs& a) {
  RankInputs<T> in{};
  in.ranks = a.ranks;
  for (int r = 0; r < a.ranks; ++r) in.x[r] = static_cast<const T*>(a.x[r]);
  return in;
}

/// acc = x_0 + x_1 + ... + x_{R-1}, added in fp32 in rank order. The sum
/// starts from x_0 rather than 0 so that -0 + -0 stays -0, as IEEE sums (and
/// NCCL) do.
template <typename T, int VEC>
__device__ __forceinline__ void rankSumFp32(const RankInputs<T>& in, int64_t offset, float (&acc)[VEC]) {
  const VecT<T, VEC> x0 = loadVec<T, VEC>(in.x[0] + offset);
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = toFloat(x0.v[k]);
  for (int r = 1; r < in.ranks; ++r) {
    const VecT<T, VEC> xr = loadVec<T, VEC>(in.x[r] + offset);
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc[k] = __fadd_rn(acc[k], toFloat(xr.v[k]));
  }
}

/// s = round_T(the fp32 rank sum).
template <typename T, int VEC>
__device__ __forceinline__ VecT<T, VEC> allreduceVec(const RankInputs<T>& in, int64_t offset) {
  float acc[VEC];
  rankSumFp32<T, VEC>(in, offset, acc);
  VecT<T, VEC> s;
#pragma unroll
  for (int k = 0; k < VEC; ++k) s.v[k] = fromFloat<T>(acc[k]);
  return s;
}

/// residual_out = round_T(s + residual): the round trip of s through T comes
/// first (aiter PR #2586 added the residual to the fp32 sum instead).
template <typename T, int VEC>
__device__ __forceinline__ VecT<T, VEC> residualAddVec(const VecT<T, VEC>& s, const VecT<T, VEC>& residual) {
  VecT<T, VEC> out;
#pragma unroll
  for (int k = 0; k < VEC; ++k) out.v[k] = fromFloat<T>(__fadd_rn(toFloat(s.v[k]), toFloat(residual.v[k])));
  return out;
}

/// residual_out at `offset` as the fused kernel forms it: the rank sum
/// rounded to T, plus the residual. The kNoRoundTripBeforeResidual mutant
/// adds the residual to the fp32 sum instead (aiter PR #2586).
template <typename T, int VEC, unsigned D>
__device__ __forceinline__ VecT<T, VEC> fusedResidualOut(const RankInputs<T>& in, int64_t offset,
                                                         const VecT<T, VEC>& residual) {
  if constexpr (D & cuda_defects::kNoRoundTripBeforeResidual) {
    float acc[VEC];
    rankSumFp32<T, VEC>(in, offset, acc);
    VecT<T, VEC> out;
#pragma unroll
    for (int k = 0; k < VEC; ++k) out.v[k] = fromFloat<T>(__fadd_rn(acc[k], toFloat(residual.v[k])));
    return out;
  } else {
    return residualAddVec<T, VEC>(allreduceVec<T, VEC>(in, offset), residual);
  }
}

/// The rows [row_begin, row_end) of one rank: allreduce, residual add and
/// RMSNorm fused. residual_out is written as it is formed; with VPT == 0 the
/// second pass reads it back (plain loads: it was written by this kernel).
/// The weights w are T or float (W), under the case's WeightSpec.
/// D: cuda_defects bits (kNoRoundTripBeforeResidual).
template <typename T, typename W, int VEC, int VPT, unsigned D>
__global__ void __launch_bounds__(kMaxThreads)
    fusedKernel(RankInputs<T> in, const T* __restrict__ residual, const W* __restrict__ w, T* __restrict__ residual_out,
                T* __restrict__ y, int64_t row_begin, int64_t row_end, int64_t N, int64_t ld, float eps, int64_t nvec,
                int tail, int vpt_dynamic, rmsnorm_cuda::WeightSpec spec) {
  __shared__ float red[2 * 32];
  int parity = 0;
  const int t = threadIdx.x;
  for (int64_t row = row_begin + blockIdx.x; row < row_end; row += gridDim.x) {
    const int64_t base = row * ld;
    T* ro = residual_out + base;
    auto form = [&](int64_t vi) {
      const VecT<T, VEC> out = fusedResidualOut<T, VEC, D>(in, base + vi * VEC,
                                                           loadVec<T, VEC>(residual + base + vi * VEC));
      storeVec<T, VEC>(ro + vi * VEC, out);
      return out;
    };
    auto reread = [&](int64_t vi) { return *reinterpret_cast<const VecT<T, VEC>*>(ro + vi * VEC); };
    float x_tail = 0.f;
    if (t < tail) {
      const int64_t col = nvec * VEC + t;
      const T v = fusedResidualOut<T, 1, D>(in, base + col, loadVec<T, 1>(residual + base + col)).v[0];
      ro[col] = v;
      x_tail = toFloat(v);
    }
    rmsnormRow<T, VEC, VPT>(form, reread, x_tail, w, y + base, nullptr, N, eps, nvec, tail, vpt_dynamic, red, parity,
                            spec);
  }
}

/// Elementwise over the M x N tensors of one rank, row by row: 128-bit
/// vectors, then the scalar tail.
template <typename T, int VEC, typename Op>
__global__ void rowwiseKernel(Op op, int64_t M, int64_t ld, int64_t nvec, int tail) {
  for (int64_t row = blockIdx.x; row < M; row += gridDim.x) {
    for (int64_t vi = threadIdx.x; vi < nvec; vi += blockDim.x) op.template apply<VEC>(row * ld + vi * VEC);
    if (threadIdx.x < tail) op.template apply<1>(row * ld + nvec * VEC + threadIdx.x);
  }
}

template <typename T>
struct AllreduceOp {  // s = round_T(sum_r x_r)
  RankInputs<T> in;
  T* s;
  template <int V>
  __device__ void apply(int64_t i) const {
    storeVec<T, V>(s + i, allreduceVec<T, V>(in, i));
  }
};

template <typename T>
struct ResidualAddOp {  // residual_out = round_T(s + residual)
  const T* s;
  const T* residual;
  T* residual_out;
  template <int V>
  __device__ void apply(int64_t i) const {
    storeVec<T, V>(residual_out + i, residualAddVec<T, V>(loadVec<T, V>(s + i), loadVec<T, V>(residual + i)));
  }
};

template <typename T>
struct CopyRowsOp {  // all-gather: this rank's copy of rows another rank owns
  const T* from_residual_out;
  const T* from_y;
  T* residual_out;
  T* y;
  template <int V>
  __device__ void apply(int64_t i) const {
    storeVec<T, V>(residual_out + i, *reinterpret_cast<const VecT<T, V>*>(from_residual_out + i));
    storeVec<T, V>(y + i, *reinterpret_cast<const VecT<T, V>*>(from_y + i));
  }
};

/// The row plan every kernel of every variant uses: the RMSNorm forward's,
/// vectorised only when every tensor of every rank is 16-byte aligned.
inline RowPlan planOf(const AllreduceRmsNormArgs& a) {
  bool aligned = true;
  for (int r = 0; r < a.ranks; ++r)
    for (const void* p :
         {a.x[r], a.residual[r], a.w[r], static_cast<const void*>(a.residual_out[r]), static_cast<const void*>(a.y[r])})
      aligned &= aligned16(p);
  return planRow(a.shape.dtype, a.shape.N, a.shape.ld, aligned);
}

template <typename T, typename Op>
void launchRowwise(const RowPlan& p, const Op& op, int64_t M, int64_t ld, const LaunchEnv& env, const char* what) {
  if (M <= 0) return;
  const unsigned grid = unsigned(std::min<int64_t>(M, int64_t(env.sm_count) * 4));
  if (p.vec == 16 / int(sizeof(T)))
    rowwiseKernel<T, 16 / sizeof(T)><<<grid, p.threads, 0, cudaStream_t(env.stream)>>>(op, M, ld, p.nvec, p.tail);
  else rowwiseKernel<T, 1><<<grid, p.threads, 0, cudaStream_t(env.stream)>>>(op, M, ld, p.nvec, p.tail);
  ULPCHECK_CUDA_LAUNCH(what);
}

/// Workspace of one rank in the unfused pipeline: s (M x ld in T), then the
/// rstd the RMSNorm forward saves, at a 256-byte boundary.
inline size_t unfusedRstdOffset(const RowShape& s) {
  return (size_t(s.M) * size_t(s.ld) * storageBytes(s.dtype) + 255) / 256 * 256;
}
inline size_t unfusedWorkspace(const RowShape& s, int) { return unfusedRstdOffset(s) + size_t(s.M) * sizeof(float); }
inline size_t noWorkspace(const RowShape&, int) { return 0; }

/// The launch's reading of the weights: in the case's weight dtype, or (the
/// vLLM #48324 mutant) always in the activation dtype, as FlashInfer's
/// allreduce_fusion does.
enum class GammaRead { AsDeclared, AsInputDtype };

/// Rows [begin, end) of rank r, fused; a mutant's kernel defects D.
template <unsigned D = cuda_defects::kNone>
void launchFused(const AllreduceRmsNormArgs& a, const RowPlan& p, int r, int64_t begin, int64_t end,
                 const LaunchEnv& env, GammaRead gamma = GammaRead::AsDeclared) {
  if (end <= begin) return;
  const RowShape& s = a.shape;
  const int64_t grid = std::min<int64_t>(end - begin, int64_t(env.sm_count) * (2048 / p.threads));
  withStorageType(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    withWeightType<T>(gamma == GammaRead::AsDeclared ? s.wdtype() : s.dtype, [&](auto wtag) {
      using W = decltype(wtag);
      withVecAndVpt<T>(p, [&](auto vec, auto vpt) {
        fusedKernel<T, W, vec(), vpt(), D><<<unsigned(grid), p.threads, 0, cudaStream_t(env.stream)>>>(
            rankInputs<T>(a), static_cast<const T*>(a.residual[r]), static_cast<const W*>(a.w[r]),
            static_cast<T*>(a.residual_out[r]), static_cast<T*>(a.y[r]), begin, end, s.N, s.ld, s.eps, p.nvec, p.tail,
            p.vpt, rmsnorm_cuda::weightSpecOf(s));
      });
    });
  });
  ULPCHECK_CUDA_LAUNCH("allreduce_rmsnorm fusedKernel");
}

/// Rank r owns rows [M r / R, M (r + 1) / R).
inline int64_t ownedBegin(int64_t M, int ranks, int r) { return M * r / ranks; }

/// Two-stage, stage 1 (reduce-scatter) of rank r: allreduce, residual add
/// and RMSNorm of the rows it owns, into its own outputs.
inline void reduceScatterStage(const AllreduceRmsNormArgs& a, const RowPlan& p, int r, const LaunchEnv& env) {
  launchFused(a, p, r, ownedBegin(a.shape.M, a.ranks, r), ownedBegin(a.shape.M, a.ranks, r + 1), env);
}

/// Two-stage, stage 2 (all-gather) of rank r, once every rank's stage 1 is
/// done: copies the rows the other ranks own from their outputs.
inline void allGatherStage(const AllreduceRmsNormArgs& a, const RowPlan& p, int r, const LaunchEnv& env) {
  const RowShape& s = a.shape;
  withStorageType(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int owner = 0; owner < a.ranks; ++owner) {
      if (owner == r) continue;
      const int64_t begin = ownedBegin(s.M, a.ranks, owner), offset = begin * s.ld;
      const CopyRowsOp<T> op{static_cast<const T*>(a.residual_out[owner]) + offset,
                             static_cast<const T*>(a.y[owner]) + offset, static_cast<T*>(a.residual_out[r]) + offset,
                             static_cast<T*>(a.y[r]) + offset};
      launchRowwise<T>(p, op, ownedBegin(s.M, a.ranks, owner + 1) - begin, s.ld, env, "all-gather copy kernel");
    }
  });
}

/// One-shot: each rank fuses every row itself, reading every peer's partial.
template <unsigned D = cuda_defects::kNone, GammaRead kGamma = GammaRead::AsDeclared>
void runFusedOneshot(const AllreduceRmsNormArgs& a, const LaunchEnv& env) {
  const RowPlan p = planOf(a);
  for (int r = 0; r < a.ranks; ++r) launchFused<D>(a, p, r, 0, a.shape.M, env, kGamma);
}

inline ReductionDepths rmsnormDepths(const RowShape& s, const LaunchEnv& env) {
  return reductionDepths(s, env, DwStrategy::Separate);
}

inline const std::vector<DType> kDTypes{DType::F32, DType::F16, DType::BF16};

/// The CUDA variants' code paths (their row kernels', no backward) and
/// specs: weights in fp32 or T, with an offset (the rounding=llama point
/// after an allreduce is not modelled by the oracle).
inline KernelInfo withCudaPaths(KernelInfo info) {
  info.specs = SpecSupport{}.with(kWeightDtype, {std::nullopt, DType::F32}).with(kWeightOffset, {0.f, 1.f});
  return withRowPaths(std::move(info), {true, 1, false, 0});
}

}  // namespace ulpcheck::allreduce_rmsnorm_cuda
