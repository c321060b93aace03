// Oracle of fused residual add + RMSNorm: allreduce_rmsnorm's oracle at one
// rank. Its rank sum of one partial is x itself (round_T(x) = x), so its
// residual_out = round_R(x + residual) and its y, the norm of residual_out,
// are this spec's with sum=rounded; with sum=fp32 (FlashInfer, quack) that
// oracle's norm reads round_fp32(x + residual) instead (norm_of_fp32_sum),
// residual_out staying round_R of the same sum.
#include "oracles/fused_add_rmsnorm.h"

#include <vector>

namespace ulpcheck {

AllreduceRmsNormReference fusedAddRmsNormReference(const FusedAddRmsNormInputs& in, const AccuracyContract& contract,
                                                   ThreadPool& pool, OracleMode mode) {
  const std::vector<HostMatrix> one_rank{in.x};
  return allreduceRmsNormReference(AllreduceRmsNormInputs{.x = one_rank,
                                                          .residual = in.residual,
                                                          .w = in.w,
                                                          .eps = in.eps,
                                                          .spec = in.spec,
                                                          .norm_of_fp32_sum = in.fp32_sum},
                                   contract, pool, mode);
}

}  // namespace ulpcheck
