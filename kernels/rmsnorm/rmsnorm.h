// RMSNorm forward and backward: the entry points every variant provides.
//
//   rstd_i = 1 / sqrt(mean_j(x_ij^2) + eps)          saved in fp32 by the forward
//   y_ij   = x_ij * rstd_i * w_j
//   dx_ij  = rstd_i * (w_j dy_ij - xhat_ij * c_i),   xhat = x * rstd,  c_i = mean_j(w_j dy_ij xhat_ij)
//   dw_j   = sum_i dy_ij * xhat_ij
// and, under the spec's bias (quack): y_ij += b_j, db_j = sum_i dy_ij.
//
// x, dy, y, dx share the row stride ld (elements); w and dw are contiguous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "core/accuracy.h"
#include "kernels/common/row_launch.h"
#include "kernels/registry.h"

namespace ulpcheck {

/// RMSNorm's bias (bias=yes): y = xhat (offset + w) + b, b and db in the
/// weight dtype (quack's rmsnorm(bias=), whose db is the sum of dy over rows
/// rounded to the weight's dtype). Its descriptor: rmsnorm_spec.cpp.
inline constexpr SpecKey<bool> kRmsBias{"bias"};
const SpecField& rmsBiasField();

struct RmsNormForwardArgs {
  RowShape shape;
  const void* x;
  const void* w;
  void* y;
  float* rstd;
  const void* b = nullptr;  // 1 x N in the weight dtype under the spec's bias (kRmsBias)
  // x's dtype where it is not y's (allreduce_rmsnorm normalising an fp32
  // residual_out under res=fp32); a variant that cannot read it refuses.
  std::optional<DType> x_dtype;
};

struct RmsNormBackwardArgs {
  RowShape shape;
  const void* x;
  const void* w;
  const void* dy;
  const float* rstd;  // as saved by the forward
  void* dx;
  void* dw;
  void* workspace;     // workspace_bytes(shape, env) bytes, contents undefined on entry
  void* db = nullptr;  // 1 x N in the weight dtype under the spec's bias (kRmsBias)
};

struct RmsNormKernel {
  KernelInfo info;
  std::function<size_t(const RowShape&, const LaunchEnv&)> workspace_bytes;
  std::function<void(const RmsNormForwardArgs&, const LaunchEnv&)> forward;
  /// Empty for a variant without one (an inference kernel through the
  /// Python door, backward=None): dx, dw and db are then unprovided outputs.
  std::function<void(const RmsNormBackwardArgs&, const LaunchEnv&)> backward;
  /// The reduction depths of this launch, for the error budget.
  std::function<ReductionDepths(const RowShape&, const LaunchEnv&)> depths;
};

using RmsNormRegistry = KernelRegistry<RmsNormKernel>;

}  // namespace ulpcheck
