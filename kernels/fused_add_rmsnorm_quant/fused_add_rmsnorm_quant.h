// Fused residual add + RMSNorm with its output quantized to FP8: the
// inference norm before an FP8 GEMM (FlashInfer's fused_add_rmsnorm_quant,
// vLLM's fused_add_rms_norm_static_fp8_quant). Forward only. Its spec, with
// T the activation dtype and R the residual's:
//
//   residual_out = round_R(x + residual)          fused_add_rmsnorm's
//   y            = RMSNorm(v) * (offset + w)      its norm, as an fp32 value,
//                                                 of v = residual_out
//                                                 (sum=rounded) or of the
//                                                 fp32 sum (sum=fp32:
//                                                 FlashInfer's)
//   y_q, scale   = rmsnorm_quant's chain on y      (kernels/rmsnorm_quant/
//                                                 rmsnorm_quant.h: the same
//                                                 fields and values)
//
// x is not written (FlashInfer writes residual_out into `residual` and y_q
// into `out`). The oracle is fused_add_rmsnorm's at an fp32 y followed by
// rmsnorm_quant's quantizedReference.
#pragma once

#include <functional>

#include "core/accuracy.h"
#include "kernels/fused_add_rmsnorm/fused_add_rmsnorm.h"
#include "kernels/registry.h"
#include "kernels/rmsnorm_quant/rmsnorm_quant.h"

namespace ulpcheck {

struct FusedAddRmsNormQuantArgs {
  RowShape shape;  // x, residual, residual_out and y_q are M x N with row stride ld; w is 1 x N
  const void* x = nullptr;
  const void* residual = nullptr;       // residualDtype(shape.dtype, shape.spec)
  const void* w = nullptr;              // shape.wdtype()
  const float* static_scale = nullptr;  // quant=static: one fp32 value
  void* residual_out = nullptr;         // residualDtype(shape.dtype, shape.spec)
  void* y = nullptr;                    // quantDtype(shape.spec), a byte an element
  float* scale = nullptr;               // quant=token or group: M x scaleGroups fp32 values, row-major
};

struct FusedAddRmsNormQuantKernel {
  KernelInfo info;
  std::function<void(const FusedAddRmsNormQuantArgs&, const LaunchEnv&)> forward;
  /// Depths of the norm's row reduction.
  std::function<ReductionDepths(const RowShape&, const LaunchEnv&)> depths;
};

using FusedAddRmsNormQuantRegistry = KernelRegistry<FusedAddRmsNormQuantKernel>;

}  // namespace ulpcheck
