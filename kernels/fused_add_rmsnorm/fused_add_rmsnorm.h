// Fused residual add + RMSNorm on one GPU: the norm every inference stack
// runs before attention and the MLP (vLLM fused_add_rms_norm, FlashInfer
// fused_add_rmsnorm, quack rmsnorm(residual=...), Liger's fused add RMSNorm,
// TileGym's). Its spec, with T the activation dtype and R the residual's
// (res=fp32: quack's residual_dtype=fp32; else T):
//
//   h            = x + residual                     (exact; R's rounding below)
//   residual_out = round_R(h)
//   y            = round_T(RMSNorm(v) * (offset + w))   rmsnorm's forward spec
//
// where v, what is normalised, is residual_out (sum=rounded, the default:
// the unfused pipeline's, Liger's and TileGym's gemma modes), or round_fp32(h),
// the fp32 sum before its rounding to T (sum=fp32: FlashInfer's CUDA and
// CuTe kernels and quack normalise the unrounded fp32 sum, keeping T only
// for the stored residual_out; ../shared/research/fused-family-specs.md §1).
// Under res=fp32 the two coincide. It is allreduce_rmsnorm at one rank
// (kernels/allreduce_rmsnorm/allreduce_rmsnorm.h), and its oracle is that
// one's. rounding=llama (vLLM's, Liger's llama mode) is not modelled yet.
#pragma once

#include <cstddef>
#include <functional>

#include "core/accuracy.h"
#include "core/norm_spec.h"
#include "kernels/common/row_launch.h"
#include "kernels/registry.h"

namespace ulpcheck {

/// What the norm normalises: the rounded sum (residual_out), or the fp32 sum.
enum class NormedSum : uint8_t { Rounded = 0, Fp32 = 1 };
inline constexpr SpecKey<NormedSum> kNormedSum{"sum"};
/// Its descriptor: fused_add_rmsnorm_spec.cpp.
const SpecField& normedSumField();

struct FusedAddRmsNormArgs {
  RowShape shape;  // x, residual, residual_out and y are M x N with row stride ld; w is 1 x N
  const void* x = nullptr;
  const void* residual = nullptr;  // residualDtype(shape.dtype, shape.spec)
  const void* w = nullptr;         // shape.wdtype()
  void* residual_out = nullptr;    // residualDtype(shape.dtype, shape.spec)
  void* y = nullptr;
};

struct FusedAddRmsNormKernel {
  KernelInfo info;
  std::function<size_t(const RowShape&, const LaunchEnv&)> workspace_bytes;
  std::function<void(const FusedAddRmsNormArgs&, const LaunchEnv&)> forward;
  /// Depth of the norm's row reduction.
  std::function<ReductionDepths(const RowShape&, const LaunchEnv&)> depths;
};

using FusedAddRmsNormRegistry = KernelRegistry<FusedAddRmsNormKernel>;

}  // namespace ulpcheck
