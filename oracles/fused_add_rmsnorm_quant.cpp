// Oracle of fused add + RMSNorm + FP8 quantization: the fused add's y at
// fp32 (its budget covers the norm's roundings, and under sum=rounded the
// residual_out it normalises is exact in the spec), then the chain.
#include "oracles/fused_add_rmsnorm_quant.h"

#include <utility>

namespace ulpcheck {

FusedAddRmsNormQuantReference fusedAddRmsNormQuantReference(FusedAddRmsNormInputs in, const QuantizedOutput& out,
                                                            const AccuracyContract& contract, ThreadPool& pool,
                                                            OracleMode mode) {
  in.y_dtype = DType::F32;
  AllreduceRmsNormReference norm = fusedAddRmsNormReference(in, contract, pool, mode);
  return {std::move(norm.residual_out), quantizedReference(norm.y, out, pool)};
}

}  // namespace ulpcheck
