// Oracle of fused residual add + RMSNorm + FP8 quantization (spec in
// kernels/fused_add_rmsnorm_quant/fused_add_rmsnorm_quant.h):
// fused_add_rmsnorm's oracle at an fp32 y gives residual_out (exact) and
// each element's fp32 y within its budget; rmsnorm_quant's
// quantizedReference the fp8 values and scales a kernel may store from them.
#pragma once

#include "core/accuracy.h"
#include "core/parallel.h"
#include "oracles/fused_add_rmsnorm.h"
#include "oracles/oracle_mode.h"
#include "oracles/reference.h"
#include "oracles/rmsnorm_quant.h"

namespace ulpcheck {

struct FusedAddRmsNormQuantReference {
  ReferenceTensor residual_out;
  QuantizedReference quantized;  // y_q, and the scales under quant=token or group
};

/// `in.y_dtype` is set to fp32 here, whatever it held.
FusedAddRmsNormQuantReference fusedAddRmsNormQuantReference(FusedAddRmsNormInputs in, const QuantizedOutput& out,
                                                            const AccuracyContract& contract, ThreadPool& pool,
                                                            OracleMode mode);

}  // namespace ulpcheck
