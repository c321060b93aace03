// LayerNorm forward and backward: the entry points every variant provides.
//
//   mean_i  = (1/N) sum_j x_ij                          saved in fp32 by the forward
//   var_i   = (1/N) sum_j (x_ij - mean_i)^2             (biased, as torch.nn.LayerNorm)
//   rstd_i  = 1 / sqrt(var_i + eps)                     saved in fp32 by the forward
//   xhat_ij = (x_ij - mean_i) rstd_i
//   y_ij    = xhat_ij gamma_j + beta_j
//   dx_ij   = rstd_i (a_ij - mean_j(a_ij) - xhat_ij mean_j(a_ij xhat_ij)),   a = gamma dy
//   dgamma_j = sum_i dy_ij xhat_ij,   dbeta_j = sum_i dy_ij
//
// x, dy, y, dx share the row stride ld (elements); gamma, beta, dgamma, dbeta
// are contiguous, in the spec's weight dtype (RowShape::wdtype()). Under
// affine=nobias beta and dbeta are null (beta = 0), under affine=none gamma
// and dgamma too (gamma = 1). The backward uses the mean and rstd its
// forward saved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/accuracy.h"
#include "kernels/common/row_launch.h"
#include "kernels/registry.h"

namespace ulpcheck {

/// LayerNorm's affine parameters: gamma and beta (torch.nn.LayerNorm's
/// default), gamma only (bias=False: y = xhat gamma, no dbeta), or neither
/// (elementwise_affine=False: y = xhat, no dgamma and no dbeta). A kernel is
/// given null pointers for the parameters and gradients the spec lacks.
enum class Affine : uint8_t { Full = 0, NoBias = 1, None = 2 };
inline constexpr SpecKey<Affine> kAffine{"affine"};
inline bool hasGamma(const Spec& s) { return kAffine(s) != Affine::None; }
inline bool hasBeta(const Spec& s) { return kAffine(s) == Affine::Full; }
/// Its descriptor: layernorm_spec.cpp.
const SpecField& affineField();

struct LayerNormForwardArgs {
  RowShape shape;
  const void* x;
  const void* gamma;
  const void* beta;
  void* y;
  float* mean;
  float* rstd;
};

struct LayerNormBackwardArgs {
  RowShape shape;
  const void* x;
  const void* gamma;
  const void* dy;
  const float* mean;  // as saved by the forward
  const float* rstd;  // as saved by the forward
  void* dx;
  void* dgamma;
  void* dbeta;
  void* workspace;  // workspace_bytes(shape, env) bytes, contents undefined on entry
};

struct LayerNormKernel {
  KernelInfo info;
  std::function<size_t(const RowShape&, const LaunchEnv&)> workspace_bytes;
  std::function<void(const LayerNormForwardArgs&, const LaunchEnv&)> forward;
  std::function<void(const LayerNormBackwardArgs&, const LaunchEnv&)> backward;
  /// The reduction depths of this launch, for the error budget.
  std::function<ReductionDepths(const RowShape&, const LaunchEnv&)> depths;
};

using LayerNormRegistry = KernelRegistry<LayerNormKernel>;

}  // namespace ulpcheck
