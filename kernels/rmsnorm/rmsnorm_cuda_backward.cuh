// The RMSNorm CUDA backward, shared by the variants that differ only in how
// they finish dW (rmsnorm_cuda*.cu each register one strategy): row-parallel
// dx with 128-bit loads and fp32 accumulation, per-CTA dW partial sums, then
// the strategy's epilogue.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "core/cuda_check.h"
#include "kernels/common/row_cuda.cuh"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm_forward.cuh"
#include "kernels/rmsnorm/rmsnorm_plan.h"

namespace ulpcheck::rmsnorm_cuda {

using namespace rmsnorm_plan;
using namespace row_cuda;

// ---------------------------------------------------------------------------
// Backward, row-parallel dx; dW partial sums over this CTA's rows kept in
// registers (VPT > 0) or in this CTA's own workspace row (VPT == 0, very
// wide rows). The epilogue depends on the dW strategy S:
//   Separate:  write partial[blockIdx.x][:]; a second kernel sums them.
//   LastBlock: write the partial, __threadfence, take a ticket; the last CTA
//              to arrive sums all partials in CTA order (quack PR #109).
//   Atomic:    atomicAdd the partial into an fp32 dW (arrival order).
// D: cuda_defects bits (kNoFenceBeforeTicket drops LastBlock's fences,
// kLastBlockDropsPartialOnLargeGrid one of its partials; kAtomicEpilogue-
// ReadsPeersPartials makes Atomic's workspace path add partials other
// threads wrote, with no barrier; kLlamaXhatUnrounded and
// kOffsetInActivationDtype as in the forward). Weights and dW are W: T, or
// float beside 16-bit activations; dx uses offset + w, and dW sums dy times
// what the forward's weight multiplied (x-hat rounded to T under llama, where
// each dW term is a product in T: accumulateDw).
template <typename T, typename W, int VEC, int VPT, DwStrategy S, unsigned D>
__global__ void __launch_bounds__(kMaxThreads)
    backwardKernel(const T* __restrict__ x, const W* __restrict__ w, const T* __restrict__ dy,
                   const float* __restrict__ rstd, T* __restrict__ dx, W* __restrict__ dw, float* __restrict__ partial,
                   unsigned* __restrict__ ticket, float* __restrict__ dw_fp32, int64_t M, int64_t N, int64_t ld,
                   int64_t partial_ld, int64_t nvec, int tail, int vpt_dynamic, WeightSpec spec) {
  __shared__ float red[2 * 32];
  int parity = 0;
  const int t = threadIdx.x;
  float* my_partial = partial + int64_t(blockIdx.x) * partial_ld;
  const int64_t tail_col = nvec * VEC + t;

  constexpr int R = VPT > 0 ? VPT : 1;
  WeightVec<W, VEC> ws[R];
  float dw_acc[R][VEC];
  float dw_tail = 0.f;
  const float w_tail = t < tail ? effectiveWeight<T, D>(w[tail_col], spec) : 0.f;
  if constexpr (VPT > 0) {
#pragma unroll
    for (int v = 0; v < VPT; ++v) {
      const int64_t vi = int64_t(v) * blockDim.x + t;
      if (vi < nvec) ws[v] = loadWeights<W, VEC>(w + vi * VEC);
#pragma unroll
      for (int k = 0; k < VEC; ++k) dw_acc[v][k] = 0.f;
    }
  }
  bool first_row = true;

  for (int64_t row = blockIdx.x; row < M; row += gridDim.x) {
    const float r = rstd[row];
    const T* xr = x + row * ld;
    const T* gr = dy + row * ld;
    VecT<T, VEC> xs[R], gs[R];
    float acc = 0.f;
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
        wv = ws[v];
      } else {
        wv = loadWeights<W, VEC>(w + vi * VEC);
      }
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float xhat = __fmul_rn(toFloat(xv.v[k]), r);
        const float a = __fmul_rn(toFloat(gv.v[k]), effectiveWeight<T, D>(wv.v[k], spec));
        acc = __fmaf_rn(a, xhat, acc);
      }
    }
    float xt = 0.f, gt = 0.f;
    if (t < tail) {
      xt = toFloat(xr[tail_col]);
      gt = toFloat(gr[tail_col]);
      acc = __fmaf_rn(__fmul_rn(gt, w_tail), __fmul_rn(xt, r), acc);
    }
    const float c = __fdiv_rn(blockAllReduce(acc, red, parity), float(N));

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
        wv = ws[v];
      } else {
        xv = loadVec<T, VEC>(xr + vi * VEC);
        gv = loadVec<T, VEC>(gr + vi * VEC);
        wv = loadWeights<W, VEC>(w + vi * VEC);
      }
      VecT<T, VEC> out;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float g = toFloat(gv.v[k]);
        const float xhat = __fmul_rn(toFloat(xv.v[k]), r);
        const float a = __fmul_rn(g, effectiveWeight<T, D>(wv.v[k], spec));
        out.v[k] = fromFloat<T>(__fmul_rn(r, __fmaf_rn(-xhat, c, a)));
        if constexpr (VPT > 0) {
          dw_acc[v][k] = accumulateDw<T, D>(dw_acc[v][k], g, xhat, spec);
        } else {
          float* p = my_partial + vi * VEC + k;
          *p = accumulateDw<T, D>(first_row ? 0.f : *p, g, xhat, spec);
        }
      }
      storeVec<T, VEC>(dxr + vi * VEC, out);
    }
    if (t < tail) {
      const float xhat = __fmul_rn(xt, r);
      dxr[tail_col] = fromFloat<T>(__fmul_rn(r, __fmaf_rn(-xhat, c, __fmul_rn(gt, w_tail))));
      dw_tail = accumulateDw<T, D>(dw_tail, gt, xhat, spec);
    }
    first_row = false;
  }

  if constexpr (S == DwStrategy::Atomic) {
    if constexpr (VPT > 0) {
#pragma unroll
      for (int v = 0; v < VPT; ++v) {
        const int64_t vi = int64_t(v) * blockDim.x + t;
        if (vi < nvec)
#pragma unroll
          for (int k = 0; k < VEC; ++k) atomicAdd(dw_fp32 + vi * VEC + k, dw_acc[v][k]);
      }
    } else if constexpr (D & cuda_defects::kAtomicEpilogueReadsPeersPartials) {
      for (int64_t col = int64_t(t); col < nvec * VEC; col += blockDim.x) atomicAdd(dw_fp32 + col, my_partial[col]);
    } else {
      // Each thread adds the workspace columns it accumulated itself. Columns
      // strided by thread (col = t, t + threads, ...) belong to other warps,
      // whose last row's stores nothing orders before these loads: ulpcheck's
      // default campaign caught the strided loop summing partials that lacked
      // the last row (dW off by 1e5 budgets, 1 run in 3).
      for (int v = 0; v < vpt_dynamic; ++v) {
        const int64_t vi = int64_t(v) * blockDim.x + t;
        if (vi >= nvec) break;
#pragma unroll
        for (int k = 0; k < VEC; ++k) atomicAdd(dw_fp32 + vi * VEC + k, my_partial[vi * VEC + k]);
      }
    }
    if (t < tail) atomicAdd(dw_fp32 + tail_col, dw_tail);
    return;
  }

  if constexpr (VPT > 0) {
#pragma unroll
    for (int v = 0; v < VPT; ++v) {
      const int64_t vi = int64_t(v) * blockDim.x + t;
      if (vi < nvec) storeFloats<VEC>(my_partial + vi * VEC, dw_acc[v]);
    }
  }
  if (t < tail) my_partial[tail_col] = dw_tail;

  if constexpr (S == DwStrategy::LastBlock) {
    // Publish this CTA's partials device-wide before announcing them: without
    // the fence the last CTA may read stale partials (memory ordering).
    if constexpr (!(D & cuda_defects::kNoFenceBeforeTicket)) __threadfence();
    __syncthreads();
    __shared__ bool is_last;
    if (t == 0) is_last = atomicAdd(ticket, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!is_last) return;
    if constexpr (!(D & cuda_defects::kNoFenceBeforeTicket)) __threadfence();
    const int64_t partials = (D & cuda_defects::kLastBlockDropsPartialOnLargeGrid) && gridDim.x > 1024 ? gridDim.x - 1
                                                                                                       : gridDim.x;
    for (int64_t col = t; col < N; col += blockDim.x) {
      float total = 0.f;
      for (int64_t c = 0; c < partials; ++c) total = __fadd_rn(total, __ldcg(partial + c * partial_ld + col));
      dw[col] = fromFloat<W>(total);
    }
    if (t == 0) *ticket = 0u;  // ready for the next launch
  }
}

/// Atomic strategy: the fp32 dW accumulated by atomics, rounded to T.
template <typename T>
__global__ void dwRoundKernel(const float* __restrict__ dw_fp32, int64_t N, T* __restrict__ dw) {
  for (int64_t col = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; col < N; col += int64_t(gridDim.x) * blockDim.x)
    dw[col] = fromFloat<T>(dw_fp32[col]);
}

// ---------------------------------------------------------------------------
// Host side: plan, dispatch on dtype, vector width and vectors per thread.

/// The workspace a variant with these defects asks for (PyTorch PR #192016:
/// sized with N where M belongs).
inline WorkspaceLayout variantWorkspaceLayout(const RowShape& s, const LaunchEnv& env,
                                              const cuda_defects::LaunchDefects& defects) {
  RowShape sized = addressedShape(s, defects);
  if (defects.scratch_sized_by_n) sized.M = s.N;
  return workspaceLayout(sized, env);
}

/// Paddle PR #74055's launch code checked nothing.
inline void checkLaunch(const cuda_defects::LaunchDefects& defects, const char* what) {
  if (!defects.unchecked_launch) ULPCHECK_CUDA_LAUNCH(what);
}

/// The backward with dW strategy S: row-parallel kernel, then whatever S
/// needs to finish dW; a mutant's defects D and `defects` switched on.
template <DwStrategy S, unsigned D = cuda_defects::kNone>
void launchBackward(const RmsNormBackwardArgs& b, const LaunchEnv& env, const cuda_defects::LaunchDefects& defects) {
  if (b.db) throw std::invalid_argument("the RMSNorm CUDA backward does not implement a bias");  // not declared
  const auto s = addressedShape(b.shape, defects);
  // The correct plan caps the CTA at the kernel's launch bound; Paddle PR
  // #74055's sized it from the row alone.
  const RowPlan p = planFor(s, {b.x, b.w, b.dy, b.dx}, defects.unchecked_launch ? 1 << 20 : kMaxThreads);
  const int64_t ctas = backwardCtas(p, s.M, env.sm_count, env.ctas_override);
  const WorkspaceLayout layout = variantWorkspaceLayout(s, env, defects);
  auto* base = static_cast<char*>(b.workspace);
  auto* partial = reinterpret_cast<float*>(base);
  auto* ticket = reinterpret_cast<unsigned*>(base + layout.ticket_offset);
  auto* dw_fp32 = reinterpret_cast<float*>(base + layout.dw_fp32_offset);
  const cudaStream_t stream = cudaStream_t(env.stream);
  // The workspace holds garbage on entry: zero what the epilogue accumulates into.
  if constexpr (S == DwStrategy::LastBlock) ULPCHECK_CUDA(cudaMemsetAsync(ticket, 0, sizeof(unsigned), stream));
  if constexpr (S == DwStrategy::Atomic)
    ULPCHECK_CUDA(cudaMemsetAsync(dw_fp32, 0, size_t(s.N) * sizeof(float), stream));
  withStorageType(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    withWeightType<T>(s.wdtype(), [&](auto wtag) {
      using W = decltype(wtag);
      withVecAndVpt<T>(p, [&](auto vec, auto vpt) {
        backwardKernel<T, W, vec(), vpt(), S, D><<<unsigned(ctas), p.threads, 0, stream>>>(
            static_cast<const T*>(b.x), static_cast<const W*>(b.w), static_cast<const T*>(b.dy), b.rstd,
            static_cast<T*>(b.dx), static_cast<W*>(b.dw), partial, ticket, dw_fp32, s.M, s.N, s.ld, partialLd(s.N),
            p.nvec, p.tail, p.vpt, weightSpecOf(s));
      });
      checkLaunch(defects, "rmsnorm backwardKernel");
      if constexpr (S == DwStrategy::Separate) {
        if (defects.dw_bf16_at_large_m && s.M >= cuda_defects::kLargeMPath)
          launchSumPartials<W, true>(partial, ctas, s.N, partialLd(s.N), static_cast<W*>(b.dw), stream);
        else launchSumPartials<W>(partial, ctas, s.N, partialLd(s.N), static_cast<W*>(b.dw), stream);
        checkLaunch(defects, "rmsnorm sumPartialsKernel");
      } else if constexpr (S == DwStrategy::Atomic) {
        dwRoundKernel<W><<<unsigned(std::min<int64_t>((s.N + 255) / 256, 1024)), 256, 0, stream>>>(
            dw_fp32, s.N, static_cast<W*>(b.dw));
        checkLaunch(defects, "rmsnorm dwRoundKernel");
      }
    });
  });
}

// The correct backwards are compiled once each, in the variant's own file.
extern template void launchBackward<DwStrategy::Separate, cuda_defects::kNone>(const RmsNormBackwardArgs&,
                                                                               const LaunchEnv&,
                                                                               const cuda_defects::LaunchDefects&);
extern template void launchBackward<DwStrategy::LastBlock, cuda_defects::kNone>(const RmsNormBackwardArgs&,
                                                                                const LaunchEnv&,
                                                                                const cuda_defects::LaunchDefects&);
extern template void launchBackward<DwStrategy::Atomic, cuda_defects::kNone>(const RmsNormBackwardArgs&,
                                                                             const LaunchEnv&,
                                                                             const cuda_defects::LaunchDefects&);

/// Registers a CUDA variant: the shared forward and this dW strategy's
/// backward, with the strategy's reduction depths. A mutant passes its
/// kernel defects as D (forward and backward take the bits they know) and
/// the rest in `mutant`.
template <DwStrategy S, unsigned D = cuda_defects::kNone>
bool registerVariant(const char* name, const char* description, Contracts contracts,
                     cuda_defects::MutantSpec mutant = {}) {
  // The spec defects are in both passes.
  constexpr unsigned kSpecDefects = D & (cuda_defects::kLlamaXhatUnrounded | cuda_defects::kOffsetInActivationDtype);
  constexpr unsigned kForwardDefects =
      D & (cuda_defects::kXSquaredInFp16 | cuda_defects::kRstdInBf16 | cuda_defects::kYStoredTruncated) | kSpecDefects;
  constexpr unsigned kBackwardDefects = D & (cuda_defects::kNoFenceBeforeTicket |
                                             cuda_defects::kAtomicEpilogueReadsPeersPartials |
                                             cuda_defects::kLastBlockDropsPartialOnLargeGrid) |
                                        kSpecDefects;
  static_assert(D == (kForwardDefects | kBackwardDefects), "a defect bit the RMSNorm kernels do not implement");
  const cuda_defects::LaunchDefects launch = mutant.launch;
  const RowPathModel paths{true, 1, true, launch.dw_bf16_at_large_m ? cuda_defects::kLargeMPath : 0};
  KernelInfo info = withRowPaths(KernelInfo{"rmsnorm",
                                            name,
                                            Backend::Cuda,
                                            {DType::F32, DType::F16, DType::BF16},
                                            contracts,
                                            description,
                                            mutant.bug,
                                            mutant.caught_by},
                                 paths);
  info.specs = SpecSupport{}
                   .with(kWeightDtype, {std::nullopt, DType::F32})
                   .with(kRounding, {Rounding::Plain, Rounding::Llama})
                   .with(kWeightOffset, {0.f, 1.f})
                   .with(kSavedStats, {SavedStats::Fp32, SavedStats::Activation});
  return RmsNormRegistry::add(RmsNormKernel{
      std::move(info),
      [launch](const RowShape& s, const LaunchEnv& e) { return variantWorkspaceLayout(s, e, launch).bytes; },
      [launch](const RmsNormForwardArgs& f, const LaunchEnv& e) { forward<kForwardDefects>(f, e, launch); },
      [launch](const RmsNormBackwardArgs& b, const LaunchEnv& e) { launchBackward<S, kBackwardDefects>(b, e, launch); },
      [launch](const RowShape& s, const LaunchEnv& e) {
        ReductionDepths d = reductionDepths(s, e, S);
        // Smaller CTAs give longer per-thread chains: budget the chains it has.
        if (launch.threads_from_m) d.row = std::max(d.row, reductionDepths(s, e, S, 256).row);
        return d;
      }});
}

}  // namespace ulpcheck::rmsnorm_cuda
