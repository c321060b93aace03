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
// one's. rounding=llama (vLLM's fused_add_rms_norm, Liger's llama mode):
// y = round_T(round_T(v rstd) (offset + w)), v the rounded residual_out in T
// (res=T, sum=rounded only), rmsnorm's Llama spec at v.
//
// The backward, where a variant has one (training kernels: Liger's, quack's;
// an inference kernel has none), given dy (y's gradient) and dresidual_out
// (the gradient reaching residual_out along the residual stream):
//
//   g            = dresidual_out + dnorm(dy)           one fp32 sum, then
//   dx           = round_T(g),  dresidual = round_R(g)  (x + residual: equal gradients)
//   dw           = sum_i dy_ij vhat_ij                  rmsnorm's
//
// where dnorm is rmsnorm's dx (kernels/rmsnorm/rmsnorm.h) at the x-hat of
// the saved residual_out, vhat = residual_out rstd, rstd that of what the
// forward normalised (under sum=fp32 and res=T, quack's: the fp32 sum's rstd
// beside the rounded residual_out it saves, fused-family-specs.md §5). quack
// PR #53 fixed a backward computing dnorm(dy + dresidual_out) instead.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

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

/// The backward's inputs are the forward's plus the two gradients: a
/// variant recomputes (or keeps from its forward) what it saves.
struct FusedAddRmsNormBackwardArgs {
  RowShape shape;
  const void* x = nullptr;
  const void* residual = nullptr;       // residualDtype(shape.dtype, shape.spec)
  const void* w = nullptr;              // shape.wdtype()
  const void* dy = nullptr;             // M x N
  const void* dresidual_out = nullptr;  // M x N in the residual's dtype
  void* dx = nullptr;                   // M x N
  void* dresidual = nullptr;            // M x N in the residual's dtype
  void* dw = nullptr;                   // 1 x N in the weight dtype
  void* workspace = nullptr;            // workspace_bytes(shape, env) bytes, contents undefined on entry
};

/// The outputs of the backward: a variant without one leaves them out
/// (KernelInfo::unprovided_outputs), and the op calls its forward only.
inline const std::vector<std::string>& fusedAddRmsNormBackwardOutputs() {
  static const std::vector<std::string> outputs{"dx", "dresidual", "dw"};
  return outputs;
}

struct FusedAddRmsNormKernel {
  KernelInfo info;
  std::function<size_t(const RowShape&, const LaunchEnv&)> workspace_bytes;
  std::function<void(const FusedAddRmsNormArgs&, const LaunchEnv&)> forward;
  /// Empty where the variant has no backward.
  std::function<void(const FusedAddRmsNormBackwardArgs&, const LaunchEnv&)> backward;
  /// Depths of the norm's row reductions and of dw's column sum.
  std::function<ReductionDepths(const RowShape&, const LaunchEnv&)> depths;
};

using FusedAddRmsNormRegistry = KernelRegistry<FusedAddRmsNormKernel>;

}  // namespace ulpcheck
