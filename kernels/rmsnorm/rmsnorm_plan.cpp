#include <algorithm>

#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm_plan.h"

namespace ulpcheck::rmsnorm_plan {

// The plan a launch uses depends on whether its pointers are 16-byte aligned;
// both functions take the larger of the two possibilities.

WorkspaceLayout workspaceLayout(const RmsNormShape& s, const LaunchEnv& env) {
  int64_t ctas = 1;
  for (bool aligned : {false, true})
    ctas = std::max(ctas, backwardCtas(planRow(s.dtype, s.N, s.ld, aligned), s.M, env.sm_count, env.ctas_override));
  auto align256 = [](size_t b) { return (b + 255) / 256 * 256; };
  WorkspaceLayout l;
  l.ticket_offset = align256(size_t(ctas) * size_t(partialLd(s.N)) * sizeof(float));
  l.dw_fp32_offset = l.ticket_offset + 256;
  l.bytes = l.dw_fp32_offset + size_t(partialLd(s.N)) * sizeof(float);
  return l;
}

size_t workspaceBytes(const RmsNormShape& s, const LaunchEnv& env) { return workspaceLayout(s, env).bytes; }

ReductionDepths depths(const RmsNormShape& s, const LaunchEnv& env, DwStrategy strategy) {
  ReductionDepths d;
  for (bool aligned : {false, true}) {
    const RowPlan p = planRow(s.dtype, s.N, s.ld, aligned);
    d.row = std::max(d.row, rowDepth(p));
    d.col = std::max(d.col, dwColDepth(s.M, backwardCtas(p, s.M, env.sm_count, env.ctas_override), strategy));
  }
  return d;
}

}  // namespace ulpcheck::rmsnorm_plan
