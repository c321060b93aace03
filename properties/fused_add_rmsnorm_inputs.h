// The inputs of a fused_add_rmsnorm case, as every run and the oracle
// generate them: x and the residual from the case's distribution on streams
// of their own (the residual in the spec's residual dtype), w around 1 as
// RMSNorm's; the backward's dy and dresidual_out (in the residual's dtype)
// as RMSNorm's dy, made only when a variant with a backward asks. Padding
// columns hold the dtype's NaN poison.
#pragma once

#include <optional>
#include <vector>

#include "core/buffer.h"
#include "core/case_spec.h"
#include "core/datagen.h"
#include "kernels/fused_add_rmsnorm/fused_add_rmsnorm.h"
#include "properties/rmsnorm_inputs.h"

namespace ulpcheck {

struct FusedAddRmsNormGradients {
  HostMatrix dy, dresidual_out;
};

struct FusedAddRmsNormInputData {
  HostMatrix x, residual, w;
  std::vector<int64_t> rows;  // the logical ids they were made at
  // Made on first use (gradients()): a forward-only variant's cases never need them.
  mutable std::optional<FusedAddRmsNormGradients> made_gradients;

  /// dy and dresidual_out of case `c` at the same rows.
  const FusedAddRmsNormGradients& gradients(const CaseSpec& c) const {
    if (!made_gradients) {
      const DType rt = residualDtype(c.dtype, c.spec);
      made_gradients = FusedAddRmsNormGradients{
          generateHost(rmsNormGradDist(c), c.dtype, c.seed, TensorStream::GradOut, rows, c.N, c.ld,
                       poisonBits(c.dtype)),
          generateHost(rmsNormGradDist(c), rt, c.seed, TensorStream::ResidualGrad, rows, c.N, c.ld, poisonBits(rt))};
    }
    return *made_gradients;
  }
};

/// Rows at the logical ids of `rows` (identityRows(c.M) for the case itself).
inline FusedAddRmsNormInputData generateFusedAddRmsNormInputs(const CaseSpec& c, const std::vector<int64_t>& rows) {
  const DType rt = residualDtype(c.dtype, c.spec), wt = weightDtype(c.dtype, c.spec);
  return FusedAddRmsNormInputData{
      generateHost(c.x, c.dtype, c.seed, TensorStream::X, rows, c.N, c.ld, poisonBits(c.dtype)),
      generateHost(c.x, rt, c.seed, TensorStream::Residual, rows, c.N, c.ld, poisonBits(rt)),
      generateHost(rmsNormWeightDist(c.spec), wt, c.seed, TensorStream::Weight, {0}, c.N, c.N, poisonBits(wt)), rows,
      std::nullopt};
}

}  // namespace ulpcheck
