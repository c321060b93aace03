// MPFR oracle of allreduce + residual add + RMSNorm (spec in
// kernels/allreduce_rmsnorm/allreduce_rmsnorm.h), with the budget derivation
// in allreduce_rmsnorm.cpp.
#pragma once

#include <memory>
#include <optional>
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
  // The dtype y is stored in: T, or fp32 where the op goes on from y
  // (fused_add_rmsnorm_quant quantizes the fp32 y to fp8).
  std::optional<DType> y_dtype;
};

struct AllreduceRmsNormReference {
  ReferenceTensor residual_out, y;
  // The spec's residual_out as values of its dtype, and what the norm read
  // (v: residual_out, or round_fp32(s + residual) under norm_of_fp32_sum;
  // the same matrix where they are equal), M x N: fused add's backward
  // takes its norm of them.
  std::shared_ptr<const HostMatrix> residual_out_values, normed;
  bool residual_out_exact = false;  // every residual_out budget is 0 (so its values are what a kernel must store)
};

/// Exact residual_out and y of the spec (every intermediate rounded to T as
/// the spec says), with budgets for a kernel that sums the ranks in fp32 in
/// any order and normalises as `contract` declares.
AllreduceRmsNormReference allreduceRmsNormReference(const AllreduceRmsNormInputs& in, const AccuracyContract& contract,
                                                    ThreadPool& pool, OracleMode mode);

/// The same, with residual_out and y streamed (ReferenceTensor::rows_from):
/// made again a block of rows at a time when judged, for a case whose
/// reference would not fit held whole. The matrices `in` refers to must
/// outlive the reference (an op's cached inputs), or in.x be
/// `*owned_partials`, which the rows keep. Held under OracleMode::Audit.
AllreduceRmsNormReference allreduceRmsNormReferenceStreamed(
    const AllreduceRmsNormInputs& in, const AccuracyContract& contract, ThreadPool& pool, OracleMode mode,
    std::shared_ptr<const std::vector<HostMatrix>> owned_partials = nullptr);

}  // namespace ulpcheck
