// Oracle of fused residual add + RMSNorm (spec in
// kernels/fused_add_rmsnorm/fused_add_rmsnorm.h): allreduce_rmsnorm's at one
// rank, whose derivation and budget (oracles/allreduce_rmsnorm.cpp) hold as
// they are.
#pragma once

#include <optional>

#include "core/accuracy.h"
#include "core/datagen.h"
#include "core/parallel.h"
#include "oracles/allreduce_rmsnorm.h"
#include "oracles/oracle_mode.h"

namespace ulpcheck {

struct FusedAddRmsNormInputs {
  const HostMatrix& x;         // M x N, row stride ld
  const HostMatrix& residual;  // M x N, row stride ld, in the spec's residual dtype
  const HostMatrix& w;         // 1 x N, in the spec's weight dtype
  float eps;
  Spec spec;
  bool fp32_sum = false;         // the spec's sum=fp32: y normalises the fp32 sum, not residual_out
  std::optional<DType> y_dtype;  // y's dtype: the activations' unless given (fp32 before a quantization)
};

/// Exact residual_out and y of the spec, with their budgets; `stream`: made
/// again a block of rows at a time when judged (allreduceRmsNormReferenceStreamed).
AllreduceRmsNormReference fusedAddRmsNormReference(const FusedAddRmsNormInputs& in, const AccuracyContract& contract,
                                                   ThreadPool& pool, OracleMode mode, bool stream = false);

struct FusedAddRmsNormBackwardReference {
  ReferenceTensor dx, dresidual, dw;
};

/// Exact dx, dresidual and dw of the backward's spec
/// (kernels/fused_add_rmsnorm/fused_add_rmsnorm.h), with their budgets:
/// rmsnorm's oracle at the spec's residual_out (`forward`'s, exact at one
/// rank) with dresidual_out added to its dx; `stream`: dx and dresidual
/// made again a block of rows at a time when judged (rmsnormReferenceStreamed;
/// dy and dresidual_out must outlive them, as an op's cached inputs do).
FusedAddRmsNormBackwardReference fusedAddRmsNormBackwardReference(const FusedAddRmsNormInputs& in, const HostMatrix& dy,
                                                                  const HostMatrix& dresidual_out,
                                                                  const AllreduceRmsNormReference& forward,
                                                                  const AccuracyContract& contract, ThreadPool& pool,
                                                                  OracleMode mode, bool stream = false);

}  // namespace ulpcheck
