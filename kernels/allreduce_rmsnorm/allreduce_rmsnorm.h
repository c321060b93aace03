// Allreduce + residual add + RMSNorm, the tensor-parallel epilogue of a
// transformer layer, fused or not. Its spec is what the unfused pipeline
// computes, with every intermediate stored in the activation dtype T:
//
//   s            = round_T(sum_r x_r)             the allreduce result, stored in T
//   residual_out = round_T(s + residual)
//   y            = round_T(RMSNorm(residual_out) * w)   (kernels/rmsnorm/rmsnorm.h's forward)
//
// Under res=fp32 (kResidualDtype) the residual and residual_out
// are fp32: residual_out = round_fp32(s + residual), and y normalises that
// fp32 value (quack's rmsnorm(residual=..., residual_dtype=torch.float32):
// the residual stream kept in fp32 beside 16-bit activations). With R = 1
// this is the fused residual add + RMSNorm of one GPU.
//
// Each of the R ranks holds its own partial x_r (distinct values: identical
// per-rank inputs make the sum exact and hide a missing rounding, aiter PR
// #2586), the same residual and w, and gets residual_out and y; every rank
// must hold identical bits. Variants differ in how they get there: an
// unfused pipeline (allreduce kernel, residual-add kernel, RMSNorm forward),
// a fused one-stage kernel (each rank reads every peer's row, reduces in fp32
// in rank order, rounds to T, adds, normalises), a fused two-stage kernel
// (reduce-scatter: each rank finishes the rows it owns; all-gather).
//
// Ranks are either virtual (R buffers on one device or on the host, so the
// properties run everywhere) or real (KernelInfo::one_rank_per_gpu: rank r's
// buffers on GPU r, peers read through peer access or NCCL). A plugin's or a
// Python variant (the multi-rank door) runs each rank in a worker process of
// its own, as a tensor-parallel job does: rank r on GPU r, or on the host.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>

#include "core/accuracy.h"
#include "core/norm_spec.h"
#include "kernels/common/row_launch.h"
#include "kernels/registry.h"

namespace ulpcheck {

inline constexpr int kMaxRanks = 8;

/// Per-rank pointers; entries [0, ranks) are used.
template <typename P>
using PerRank = P[kMaxRanks];

struct AllreduceRmsNormArgs {
  RowShape shape;  // every per-rank tensor is M x N with row stride ld; w is 1 x N
  int ranks = 2;
  PerRank<const void *> x{};         // rank r's partial sum
  PerRank<const void *> residual{};  // identical on every rank
  PerRank<const void *> w{};         // identical on every rank
  PerRank<void *> residual_out{};    // residual and residual_out: residualDtype(shape.dtype, shape.spec)
  PerRank<void *> y{};
  PerRank<void *> workspace{};  // workspace_bytes(shape, ranks) each, contents undefined on entry
  PerRank<int> device{};        // the GPU each rank's buffers live on (all 0 for virtual ranks)
  // A door variant's communication buffers (AllreduceRmsNormKernel::
  // comm_bytes): rank r's on its device, zero when first allocated, then
  // the variant's own from call to call (flags, staged partials).
  PerRank<void *> comm{};
  size_t comm_bytes = 0;
};

/// One rank's share of a call, as a rank's worker process runs it (a
/// plugin's multi-rank variant, kernels/allreduce_rmsnorm/
/// allreduce_rmsnorm_door.cpp): its own tensors, and every rank's
/// communication buffer mapped into this process.
struct AllreduceRmsNormRankArgs {
  RowShape shape;
  const void *x = nullptr, *residual = nullptr, *w = nullptr;
  void *residual_out = nullptr, *y = nullptr, *workspace = nullptr;
  PerRank<void *> comm{};
  size_t comm_bytes = 0;
};

struct AllreduceRmsNormKernel {
  KernelInfo info;
  std::function<size_t(const RowShape &, int ranks)> workspace_bytes;
  /// Runs every rank (stream of LaunchEnv for all of them) and returns when
  /// the work is queued.
  std::function<void(const AllreduceRmsNormArgs &, const LaunchEnv &)> run;
  /// Depth of the row reduction of the RMSNorm (the allreduce is a serial
  /// chain over ranks, depth R - 1, which the oracle knows).
  std::function<ReductionDepths(const RowShape &, const LaunchEnv &)> depths;
  /// The communication buffer each rank needs (a door variant's; null:
  /// none), allocated once per variant and rank and kept across calls.
  std::function<size_t(const RowShape &, int ranks)> comm_bytes;
  /// A plugin's variant in a rank's worker: runs rank env.rank of
  /// env.ranks and returns when its work is queued.
  std::function<void(const AllreduceRmsNormRankArgs &, const LaunchEnv &)> run_rank;
};

using AllreduceRmsNormRegistry = KernelRegistry<AllreduceRmsNormKernel>;

}  // namespace ulpcheck
