// The LayerNorm CUDA kernels, shared by cuda_twopass (layernorm_cuda.cu) and
// the LayerNorm CUDA mutants (cuda_bug_*.cu), which switch defects on.
//
// CUDA LayerNorm, written like production kernels: 128-bit vectorised loads
// and stores, fp32 accumulation, warp-shuffle plus shared-memory block
// reductions, the row kept in registers between passes when it fits.
//
// Forward statistics are two-pass: the mean first, then the sum of squared
// deviations from that mean. The one-pass E[x^2] - E[x]^2 loses every digit
// when |mean| >> std (it subtracts two numbers of size mean^2); the two-pass
// variance's error from the mean's rounding is second order (sum_j (x_j - m)
// is zero at the exact mean), which is what oracles/layernorm.cpp budgets.
//
// Backward: row-parallel dx with two block sums per row (sum a and
// sum a xhat, a = gamma dy), dgamma and dbeta as per-CTA fp32 partials summed
// by a second kernel in a fixed order (deterministic, batch invariant).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/cuda_check.h"
#include "kernels/common/row_cuda.cuh"
#include "kernels/layernorm/layernorm.h"
#include "kernels/layernorm/layernorm_plan.h"

namespace ulpcheck::layernorm_cuda {

using namespace row_cuda;
using namespace layernorm_plan;

// The backward holds x, dy and gamma vectors plus two fp32 accumulators per
// element (dgamma, dbeta): half of RMSNorm's register budget per element.
template <typename T>
constexpr int kBackwardRegisterElements = maxRegisterElements<T>() / 2;

/// gamma (or beta) at column offset `offset`, or `absent` in every lane
/// where the spec has no such parameter (a null pointer: affine=nobias, none).
template <typename W, int VEC>
__device__ __forceinline__ WeightVec<W, VEC> loadAffine(const W* p, int64_t offset, float absent) {
  if (p) return loadWeights<W, VEC>(p + offset);
  WeightVec<W, VEC> v;
#pragma unroll
  for (int k = 0; k < VEC; ++k) v.v[k] = fromFloat<W>(absent);
  return v;
}

template <typename W>
__device__ __forceinline__ float affineAt(const W* p, int64_t col, float absent) {
  return p ? toFloat(p[col]) : absent;
}

/// gamma and beta are T or float (W); null where the spec has none.
/// D: cuda_defects bits (kVarianceCountsMaskedLanes, kOnePassVariance).
template <typename T, typename W, int VEC, int VPT, unsigned D>
__global__ void __launch_bounds__(kMaxThreads)
    forwardKernel(const T* __restrict__ x, const W* __restrict__ gamma, const W* __restrict__ beta, T* __restrict__ y,
                  float* __restrict__ mean_out, float* __restrict__ rstd_out, int64_t M, int64_t N, int64_t ld,
                  float eps, int64_t nvec, int tail, int vpt_dynamic) {
  __shared__ float red[2 * 32];
  int parity = 0;
  const int t = threadIdx.x;
  const int64_t tail_col = nvec * VEC + t;
  constexpr int R = VPT > 0 ? VPT : 1;
  for (int64_t row = blockIdx.x; row < M; row += gridDim.x) {
    const T* xr = x + row * ld;
    VecT<T, VEC> xs[R];
    // Pass 1: the mean (and, in a one-pass mutant, the sum of squares).
    float sum = 0.f, sum_sq = 0.f;
#pragma unroll
    for (int v = 0; v < (VPT > 0 ? VPT : vpt_dynamic); ++v) {
      const int64_t vi = int64_t(v) * blockDim.x + t;
      if (vi >= nvec) continue;
      const VecT<T, VEC> xv = loadVec<T, VEC>(xr + vi * VEC);
      if constexpr (VPT > 0) xs[v] = xv;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        sum = __fadd_rn(sum, toFloat(xv.v[k]));
        if constexpr (D & cuda_defects::kOnePassVariance)
          sum_sq = __fmaf_rn(toFloat(xv.v[k]), toFloat(xv.v[k]), sum_sq);
      }
    }
    const float xt = t < tail ? toFloat(xr[tail_col]) : 0.f;
    if (t < tail) {
      sum = __fadd_rn(sum, xt);
      if constexpr (D & cuda_defects::kOnePassVariance) sum_sq = __fmaf_rn(xt, xt, sum_sq);
    }
    const float mean = __fdiv_rn(blockAllReduce(sum, red, parity), float(N));

    // Pass 2: the variance about that mean.
    float sq = 0.f;
#pragma unroll
    for (int v = 0; v < (VPT > 0 ? VPT : vpt_dynamic); ++v) {
      const int64_t vi = int64_t(v) * blockDim.x + t;
      if (vi >= nvec) continue;
      VecT<T, VEC> xv;
      if constexpr (VPT > 0) xv = xs[v];
      else xv = loadVec<T, VEC>(xr + vi * VEC);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float d = __fsub_rn(toFloat(xv.v[k]), mean);
        sq = __fmaf_rn(d, d, sq);
      }
    }
    if (t < tail) {
      const float d = __fsub_rn(xt, mean);
      sq = __fmaf_rn(d, d, sq);
    }
    if constexpr (D & cuda_defects::kVarianceCountsMaskedLanes) {
      // Liger #518: the tail read as one masked vector; its VEC - tail masked
      // lanes load 0 and each adds (0 - mean)^2.
      if (tail > 0 && t == 0)
        for (int k = tail; k < VEC; ++k) sq = __fmaf_rn(mean, mean, sq);
    }
    float var = __fdiv_rn(blockAllReduce(sq, red, parity), float(N));
    if constexpr (D & cuda_defects::kOnePassVariance)  // E[x^2] - E[x]^2: two numbers of size mean^2 subtracted
      var = __fsub_rn(__fdiv_rn(blockAllReduce(sum_sq, red, parity), float(N)), __fmul_rn(mean, mean));
    const float r = rsqrtf(__fadd_rn(var, eps));
    if (t == 0) {
      mean_out[row] = mean;
      rstd_out[row] = r;
    }

    // Pass 3: y = ((x - mean) rstd) gamma + beta, one rounding for the fma.
    T* yr = y + row * ld;
#pragma unroll
    for (int v = 0; v < (VPT > 0 ? VPT : vpt_dynamic); ++v) {
      const int64_t vi = int64_t(v) * blockDim.x + t;
      if (vi >= nvec) continue;
      VecT<T, VEC> xv;
      if constexpr (VPT > 0) xv = xs[v];
      else xv = loadVec<T, VEC>(xr + vi * VEC);
      const WeightVec<W, VEC> gv = loadAffine<W, VEC>(gamma, vi * VEC, 1.f);
      const WeightVec<W, VEC> bv = loadAffine<W, VEC>(beta, vi * VEC, 0.f);
      VecT<T, VEC> out;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float xhat = __fmul_rn(__fsub_rn(toFloat(xv.v[k]), mean), r);
        out.v[k] = fromFloat<T>(__fmaf_rn(xhat, toFloat(gv.v[k]), toFloat(bv.v[k])));
      }
      storeVec<T, VEC>(yr + vi * VEC, out);
    }
    if (t < tail) {
      const float xhat = __fmul_rn(__fsub_rn(xt, mean), r);
      yr[tail_col] = fromFloat<T>(__fmaf_rn(xhat, affineAt(gamma, tail_col, 1.f), affineAt(beta, tail_col, 0.f)));
    }
  }
}

/// Row-parallel dx; this CTA's dgamma and dbeta partial sums over its rows
/// kept in registers (VPT > 0) or in its own workspace row (VPT == 0).
/// gamma is T or float (W), null where the spec has none (gamma = 1).
/// D: cuda_defects bits (kReductionSlotReusedWithoutBarrier).
template <typename T, typename W, int VEC, int VPT, unsigned D>
__global__ void __launch_bounds__(kMaxThreads)
    backwardKernel(const T* __restrict__ x, const W* __restrict__ gamma, const T* __restrict__ dy,
                   const float* __restrict__ mean, const float* __restrict__ rstd, T* __restrict__ dx,
                   float* __restrict__ partial, int64_t M, int64_t N, int64_t ld, int64_t pld, int64_t nvec, int tail,
                   int vpt_dynamic) {
  __shared__ float red[2 * 32];
  int parity = 0;
  const int t = threadIdx.x;
  float* my_dgamma = partial + int64_t(blockIdx.x) * 2 * pld;
  float* my_dbeta = my_dgamma + pld;
  const int64_t tail_col = nvec * VEC + t;

  constexpr int R = VPT > 0 ? VPT : 1;
  WeightVec<W, VEC> gammas[R];
  float dgamma_acc[R][VEC], dbeta_acc[R][VEC];
  float dgamma_tail = 0.f, dbeta_tail = 0.f;
  const float gamma_tail = t < tail ? affineAt(gamma, tail_col, 1.f) : 0.f;
  if constexpr (VPT > 0) {
#pragma unroll
    for (int v = 0; v < VPT; ++v) {
      const int64_t vi = int64_t(v) * blockDim.x + t;
      if (vi < nvec) gammas[v] = loadAffine<W, VEC>(gamma, vi * VEC, 1.f);
#pragma unroll
      for (int k = 0; k < VEC; ++k) dgamma_acc[v][k] = dbeta_acc[v][k] = 0.f;
    }
  }
  bool first_row = true;

  for (int64_t row = blockIdx.x; row < M; row += gridDim.x) {
    const float mu = mean[row], r = rstd[row];
    const T* xr = x + row * ld;
    const T* gr = dy + row * ld;
    VecT<T, VEC> xs[R], gs[R];
    float sum_a = 0.f, sum_ax = 0.f;
#pragma unroll
    for (int v = 0; v < (VPT > 0 ? VPT : vpt_dynamic); ++v) {
      const int64_t vi = int64_t(v) * blockDim.x + t;
      if (vi >= nvec) continue;
      const VecT<T, VEC> xv = loadVec<T, VEC>(xr + vi * VEC);
      const VecT<T, VEC> gv = loadVec<T, VEC>(gr + vi * VEC);
      WeightVec<W, VEC> wv;
      if constexpr (VPT > 0) {
        xs[v] = xv;
        gs[v] = gv;
        wv = gammas[v];
      } else {
        wv = loadAffine<W, VEC>(gamma, vi * VEC, 1.f);
      }
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float xhat = __fmul_rn(__fsub_rn(toFloat(xv.v[k]), mu), r);
        const float a = __fmul_rn(toFloat(gv.v[k]), toFloat(wv.v[k]));
        sum_a = __fadd_rn(sum_a, a);
        sum_ax = __fmaf_rn(a, xhat, sum_ax);
      }
    }
    float xt = 0.f, gt = 0.f;
    if (t < tail) {
      xt = toFloat(xr[tail_col]);
      gt = toFloat(gr[tail_col]);
      const float xhat = __fmul_rn(__fsub_rn(xt, mu), r);
      const float a = __fmul_rn(gt, gamma_tail);
      sum_a = __fadd_rn(sum_a, a);
      sum_ax = __fmaf_rn(a, xhat, sum_ax);
    }
    const float c1 = __fdiv_rn(blockAllReduce<D>(sum_a, red, parity), float(N));
    const float c2 = __fdiv_rn(blockAllReduce<D>(sum_ax, red, parity), float(N));

    T* dxr = dx + row * ld;
#pragma unroll
    for (int v = 0; v < (VPT > 0 ? VPT : vpt_dynamic); ++v) {
      const int64_t vi = int64_t(v) * blockDim.x + t;
      if (vi >= nvec) continue;
      VecT<T, VEC> xv, gv;
      WeightVec<W, VEC> wv;
      if constexpr (VPT > 0) {
        xv = xs[v];
        gv = gs[v];
        wv = gammas[v];
      } else {
        xv = loadVec<T, VEC>(xr + vi * VEC);
        gv = loadVec<T, VEC>(gr + vi * VEC);
        wv = loadAffine<W, VEC>(gamma, vi * VEC, 1.f);
      }
      VecT<T, VEC> out;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float g = toFloat(gv.v[k]);
        const float xhat = __fmul_rn(__fsub_rn(toFloat(xv.v[k]), mu), r);
        const float a = __fmul_rn(g, toFloat(wv.v[k]));
        out.v[k] = fromFloat<T>(__fmul_rn(r, __fmaf_rn(-xhat, c2, __fsub_rn(a, c1))));
        if constexpr (VPT > 0) {
          dgamma_acc[v][k] = __fmaf_rn(g, xhat, dgamma_acc[v][k]);
          dbeta_acc[v][k] = __fadd_rn(dbeta_acc[v][k], g);
        } else {
          const int64_t col = vi * VEC + k;
          my_dgamma[col] = __fmaf_rn(g, xhat, first_row ? 0.f : my_dgamma[col]);
          my_dbeta[col] = __fadd_rn(first_row ? 0.f : my_dbeta[col], g);
        }
      }
      storeVec<T, VEC>(dxr + vi * VEC, out);
    }
    if (t < tail) {
      const float xhat = __fmul_rn(__fsub_rn(xt, mu), r);
      const float a = __fmul_rn(gt, gamma_tail);
      dxr[tail_col] = fromFloat<T>(__fmul_rn(r, __fmaf_rn(-xhat, c2, __fsub_rn(a, c1))));
      dgamma_tail = __fmaf_rn(gt, xhat, dgamma_tail);
      dbeta_tail = __fadd_rn(dbeta_tail, gt);
    }
    first_row = false;
  }

  if constexpr (VPT > 0) {
#pragma unroll
    for (int v = 0; v < VPT; ++v) {
      const int64_t vi = int64_t(v) * blockDim.x + t;
      if (vi < nvec) {
        storeFloats<VEC>(my_dgamma + vi * VEC, dgamma_acc[v]);
        storeFloats<VEC>(my_dbeta + vi * VEC, dbeta_acc[v]);
      }
    }
  }
  if (t < tail) {
    my_dgamma[tail_col] = dgamma_tail;
    my_dbeta[tail_col] = dbeta_tail;
  }
}

template <unsigned D = cuda_defects::kNone>
void forward(const LayerNormForwardArgs& f, const LaunchEnv& env) {
  const RowPlan p = planFor(f.shape, {f.x, f.gamma, f.beta, f.y});
  const auto& s = f.shape;
  const int64_t grid = std::min<int64_t>(s.M, int64_t(env.sm_count) * (2048 / p.threads));
  withStorageType(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    withWeightType<T>(s.wdtype(), [&](auto wtag) {
      using W = decltype(wtag);
      withVecAndVpt<T>(p, [&](auto vec, auto vpt) {
        forwardKernel<T, W, vec(), vpt(), D><<<unsigned(grid), p.threads, 0, cudaStream_t(env.stream)>>>(
            static_cast<const T*>(f.x), static_cast<const W*>(f.gamma), static_cast<const W*>(f.beta),
            static_cast<T*>(f.y), f.mean, f.rstd, s.M, s.N, s.ld, s.eps, p.nvec, p.tail, p.vpt);
      });
    });
  });
  ULPCHECK_CUDA_LAUNCH("layernorm forwardKernel");
  roundSavedStats(f.shape, {f.mean, f.rstd}, cudaStream_t(env.stream));
  ULPCHECK_CUDA_LAUNCH("layernorm roundStatsKernel");
}

/// The backward; a mutant's kernel defects D and launch `defects` switched on.
template <unsigned D = cuda_defects::kNone>
void backward(const LayerNormBackwardArgs& b, const LaunchEnv& env, const cuda_defects::LaunchDefects& defects) {
  const RowPlan p = planFor(b.shape, {b.x, b.gamma, b.dy, b.dx});
  const auto& s = b.shape;
  const int64_t ctas = backwardCtas(p, s.M, env.sm_count, env.ctas_override);
  const int64_t pld = partialLd(s.N);
  auto* partial = static_cast<float*>(b.workspace);
  const cudaStream_t stream = cudaStream_t(env.stream);
  withStorageType(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    withWeightType<T>(s.wdtype(), [&](auto wtag) {
      using W = decltype(wtag);
      withVecAndVpt<T, kBackwardRegisterElements<T>>(p, [&](auto vec, auto vpt) {
        backwardKernel<T, W, vec(), vpt(), D><<<unsigned(ctas), p.threads, 0, stream>>>(
            static_cast<const T*>(b.x), static_cast<const W*>(b.gamma), static_cast<const T*>(b.dy), b.mean, b.rstd,
            static_cast<T*>(b.dx), partial, s.M, s.N, s.ld, pld, p.nvec, p.tail, p.vpt);
      });
      ULPCHECK_CUDA_LAUNCH("layernorm backwardKernel");
      // torch-xpu-ops PR #4790: one shape regime's kernel wrote each sum to the other's output.
      const bool swapped = defects.swap_dgamma_dbeta_at_large_m && s.M >= 256;
      auto* dgamma = static_cast<W*>(swapped ? b.dbeta : b.dgamma);
      auto* dbeta = static_cast<W*>(swapped ? b.dgamma : b.dbeta);
      if (dgamma) {  // null where the spec has no such parameter (affine=nobias, none)
        launchSumPartials<W>(partial, ctas, s.N, workspaceLd(s.N), dgamma, stream);
        ULPCHECK_CUDA_LAUNCH("layernorm sumPartialsKernel (dgamma)");
      }
      if (dbeta) {
        launchSumPartials<W>(partial + pld, ctas, s.N, workspaceLd(s.N), dbeta, stream);
        ULPCHECK_CUDA_LAUNCH("layernorm sumPartialsKernel (dbeta)");
      }
    });
  });
}

// The correct kernels are compiled once, in layernorm_cuda.cu.
extern template void forward<cuda_defects::kNone>(const LayerNormForwardArgs&, const LaunchEnv&);
extern template void backward<cuda_defects::kNone>(const LayerNormBackwardArgs&, const LaunchEnv&,
                                                   const cuda_defects::LaunchDefects&);

/// Registers a CUDA LayerNorm variant: forward and backward with the kernel
/// defects D they implement, the backward with the mutant's launch defects
/// (none for a correct variant).
template <unsigned D = cuda_defects::kNone>
bool registerVariant(const char* name, const char* description, cuda_defects::MutantSpec mutant = {}) {
  constexpr unsigned kForwardDefects = D & (cuda_defects::kVarianceCountsMaskedLanes | cuda_defects::kOnePassVariance);
  constexpr unsigned kBackwardDefects = D & cuda_defects::kReductionSlotReusedWithoutBarrier;
  static_assert(D == (kForwardDefects | kBackwardDefects), "a defect bit the LayerNorm kernels do not implement");
  const cuda_defects::LaunchDefects launch = mutant.launch;
  // The backward holds half as many row elements in registers (kBackwardRegisterElements).
  const RowPathModel paths{true, 2, true, launch.swap_dgamma_dbeta_at_large_m ? 256 : 0};
  KernelInfo info{"layernorm",
                  name,
                  Backend::Cuda,
                  {DType::F32, DType::F16, DType::BF16},
                  Contracts{true, true, DType::F32},
                  description,
                  mutant.bug,
                  mutant.caught_by};
  // gamma, beta (and their gradients) in fp32 or T; without beta, without either.
  info.specs = SpecSupport{}
                   .with(kWeightDtype, {std::nullopt, DType::F32})
                   .with(kAffine, {Affine::Full, Affine::NoBias, Affine::None})
                   .with(kSavedStats, {SavedStats::Fp32, SavedStats::Activation});
  return LayerNormRegistry::add(LayerNormKernel{
      withRowPaths(std::move(info), paths), workspaceBytes, forward<kForwardDefects>,
      [launch](const LayerNormBackwardArgs& b, const LaunchEnv& e) { backward<kBackwardDefects>(b, e, launch); },
      depths});
}

}  // namespace ulpcheck::layernorm_cuda
