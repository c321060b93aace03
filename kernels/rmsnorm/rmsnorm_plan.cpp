#include <algorithm>

#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm_plan.h"

namespace ulpcheck::rmsnorm_plan {

// The plan a launch uses depends on whether its pointers are 16-byte aligned;
// both functions take the larger of the two possibilities.

size_t workspaceBytes(const RmsNormShape& s, const LaunchEnv& env) {
  int64_t ctas = 1;
  for (bool aligned : {false, true})
    ctas = std::max(ctas, backwardCtas(planRow(s.dtype, s.N, s.ld, aligned), s.M, env.sm_count, env.ctas_override));
  return size_t(ctas) * size_t(partialLd(s.N)) * sizeof(float);
}

ReductionDepths depths(const RmsNormShape& s, const LaunchEnv& env) {
  ReductionDepths d;
  for (bool aligned : {false, true}) {
    const RowPlan p = planRow(s.dtype, s.N, s.ld, aligned);
    d.row = std::max(d.row, rowDepth(p));
    d.col = std::max(d.col, dwColDepth(s.M, backwardCtas(p, s.M, env.sm_count, env.ctas_override)));
  }
  return d;
}

}  // namespace ulpcheck::rmsnorm_plan
