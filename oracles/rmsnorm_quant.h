// Oracle of RMSNorm with its output quantized to FP8 (spec in
// kernels/rmsnorm_quant/rmsnorm_quant.h): rmsnorm's oracle gives each
// element's fp32 y within its budget, and oracles/fp8_quant.h the fp8
// values, exactly, a kernel whose y lies there may store, and the fp32
// values of a per-token scale. quantizedReference is that second step for
// any norm whose oracle gives an fp32 y (fused add + RMSNorm's too).
#pragma once

#include <optional>

#include "core/accuracy.h"
#include "core/datagen.h"
#include "core/parallel.h"
#include "core/spec.h"
#include "oracles/fp8_quant.h"
#include "oracles/oracle_mode.h"
#include "oracles/reference.h"

namespace ulpcheck {

/// How a norm's fp32 y becomes fp8 (kernels/rmsnorm_quant/rmsnorm_quant.h):
/// the chain, and the scale, given or computed per row or group of columns.
struct QuantizedOutput {
  fp8_quant::QuantSpec quant;
  // quant=token or group: how each scale is made, over groups of
  // `group_columns` columns of a row (N per token; the last group shorter
  // where it does not divide N); none: the static scale.
  std::optional<fp8_quant::PerTokenScale> per_token;
  int64_t group_columns = 0;
  float static_scale = 1;
};

struct RmsNormQuantInputs {
  const HostMatrix& x;  // M x N, row stride ld
  const HostMatrix& w;  // 1 x N, in the spec's weight dtype
  float eps;
  Spec spec;  // the norm's fields (its weight offset)
  QuantizedOutput output;
};

struct QuantizedReference {
  // y: M x N in the spec's fp8 dtype. Its exact value is y / s of the exact
  // y and scale (clamped to the format's range where the spec saturates);
  // its admissible values (ReferenceTensor::admissible) what the spec's
  // chain stores from any y and scale within their budgets; its budget the
  // distance to the farther of the fp32 values the conversion may read,
  // plus half an fp8 ulp.
  ReferenceTensor y;
  // quant=token or group: M x groups fp32, each the exact max(amax / fmax,
  // min_scale) of its group and the fp32 values a kernel may store; empty
  // under quant=static.
  ReferenceTensor scale;
};

/// y_q and the scales from a norm's fp32 y: its exact values and budgets
/// (an M x N reference held whole, the norm's oracle at an fp32 output).
QuantizedReference quantizedReference(const ReferenceTensor& y, const QuantizedOutput& out, ThreadPool& pool);

/// rmsnorm's oracle at an fp32 output, then quantizedReference.
QuantizedReference rmsnormQuantReference(const RmsNormQuantInputs& in, const AccuracyContract& contract,
                                         ThreadPool& pool, OracleMode mode);

}  // namespace ulpcheck
