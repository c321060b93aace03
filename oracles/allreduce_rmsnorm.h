// MPFR oracle of allreduce + residual add + RMSNorm (spec in
// kernels/allreduce_rmsnorm/allreduce_rmsnorm.h), with the budget derivation
// in allreduce_rmsnorm.cpp.
#pragma once

#include <vector>

#include "core/accuracy.h"
#include "core/datagen.h"
#include "core/norm_spec.h"
#include "core/parallel.h"
#include "oracles/oracle_mode.h"
#include "oracles/reference.h"

namespace ulpcheck {

struct AllreduceRmsNormInputs {
  const std::vector<HostMatrix>& x;  // one M x N partial per rank, row stride ld
  const HostMatrix& residual;        // M x N, row stride ld, in the spec's residual dtype
  const HostMatrix& w;               // 1 x N, in the spec's weight dtype
  float eps;
  Spec spec;  // weight offset (rounding=llama is not modelled here)
  // The norm reads round_fp32(s + residual), the sum before its rounding to
  // the residual's dtype, not residual_out (fused_add_rmsnorm's sum=fp32:
  // FlashInfer's and quack's order).
  bool norm_of_fp32_sum = false;
  // The partials are added in T one rank at a time, in rank order, each add
  // rounded to T (acc=T, kernels/allreduce_rmsnorm/allreduce_rmsnorm_spec.h),
  // rather than summed exactly and rounded once. The same spec for R <= 2.
  bool sum_in_activation_dtype = false;
};

struct AllreduceRmsNormReference {
  ReferenceTensor residual_out, y;
};

/// Exact residual_out and y of the spec (every intermediate rounded to T as
/// the spec says), with budgets for a kernel that sums the ranks in fp32 in
/// any order and normalises as `contract` declares.
AllreduceRmsNormReference allreduceRmsNormReference(const AllreduceRmsNormInputs& in, const AccuracyContract& contract,
                                                    ThreadPool& pool, OracleMode mode);

}  // namespace ulpcheck
