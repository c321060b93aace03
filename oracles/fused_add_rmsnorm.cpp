// Oracle of fused residual add + RMSNorm: allreduce_rmsnorm's oracle at one
// rank. Its rank sum of one partial is x itself (round_T(x) = x), so its
// residual_out = round_R(x + residual) and its y, the norm of residual_out,
// are this spec's with sum=rounded; with sum=fp32 (FlashInfer, quack) that
// oracle's norm reads round_fp32(x + residual) instead (norm_of_fp32_sum),
// residual_out staying round_R of the same sum.
#include "oracles/fused_add_rmsnorm.h"

#include <memory>
#include <stdexcept>
#include <vector>

#include "oracles/rmsnorm.h"

namespace ulpcheck {

AllreduceRmsNormReference fusedAddRmsNormReference(const FusedAddRmsNormInputs& in, const AccuracyContract& contract,
                                                   ThreadPool& pool, OracleMode mode, bool stream) {
  // One rank: its partial is x (a copy; the streamed rows keep it).
  auto one_rank = std::make_shared<const std::vector<HostMatrix>>(std::vector<HostMatrix>{in.x});
  const AllreduceRmsNormInputs inputs{.x = *one_rank,
                                      .residual = in.residual,
                                      .w = in.w,
                                      .eps = in.eps,
                                      .spec = in.spec,
                                      .norm_of_fp32_sum = in.fp32_sum,
                                      .y_dtype = in.y_dtype};
  return stream ? allreduceRmsNormReferenceStreamed(inputs, contract, pool, mode, one_rank)
                : allreduceRmsNormReference(inputs, contract, pool, mode);
}

FusedAddRmsNormBackwardReference fusedAddRmsNormBackwardReference(const FusedAddRmsNormInputs& in, const HostMatrix& dy,
                                                                  const HostMatrix& dresidual_out,
                                                                  const AllreduceRmsNormReference& forward,
                                                                  const AccuracyContract& contract, ThreadPool& pool,
                                                                  OracleMode mode, bool stream) {
  const DType T = in.x.dtype, R = in.residual.dtype;
  // At one rank residual_out is exact in the spec (budget 0): the saved
  // residual_out a correct kernel's backward reads is this one.
  if (!forward.residual_out_exact) throw std::logic_error("fused add backward oracle: residual_out is not exact");
  // quack's sum=fp32 under res=T: rstd of the fp32 sum beside the rounded
  // residual_out it saves, which is what the forward's norm read
  // (round_fp32(x + residual), `normed`).
  const bool rstd_of_fp32_sum = in.fp32_sum && R != DType::F32;
  const RmsNormInputs norm{.x = *forward.residual_out_values,
                           .w = in.w,
                           .dy = dy,
                           .eps = in.eps,
                           .spec = in.spec,
                           .y_dtype = T,
                           .dx_addend = &dresidual_out,
                           .dresidual_dtype = R,
                           .rstd_of = rstd_of_fp32_sum ? forward.normed.get() : nullptr};
  // A residual_out that overflowed (fp16 x + residual past 65504: inf in the
  // spec) makes the spec's backward non-finite there (x-hat of inf): any
  // non-finite result is its value, a finite one is wrong (the RMSNorm
  // oracle admits it for any backward with dx_addend).
  RmsNormReference ref = stream ? rmsnormReferenceStreamed(norm, contract, pool, mode,
                                                           {forward.residual_out_values, forward.normed})
                                : rmsnormReference(norm, contract, pool, mode);
  return {std::move(ref.dx), std::move(ref.dresidual), std::move(ref.dw)};
}

}  // namespace ulpcheck
