// allreduce_rmsnorm's own spec field: the dtype its ranks' partials are
// summed in (kRankSum, allreduce_rmsnorm_spec.h).
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm_spec.h"

namespace ulpcheck {

const SpecField& rankSumField() {
  // Draw slot 8: after the residual's dtype (6) and fused_add_rmsnorm's sum
  // (7). In a case string acc=fp32 (the default) or, in a bf16 case,
  // acc=bf16; declared allreduce_acc="activation".
  static const SpecField field = fp32OrActivationField("acc", "the dtype the ranks' partials are summed in", 8,
                                                       "allreduce_acc", "sums the ranks' partials");
  return field;
}

}  // namespace ulpcheck
