#include <algorithm>

#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm_plan.h"

namespace ulpcheck::rmsnorm_plan {

WorkspaceLayout workspaceLayout(const RowShape& s, const LaunchEnv& env) {
  const int64_t ctas = maxBackwardCtas(s, env);
  auto align256 = [](size_t b) { return (b + 255) / 256 * 256; };
  WorkspaceLayout l;
  l.ticket_offset = align256(size_t(ctas) * size_t(partialLd(s.N)) * sizeof(float));
  l.dw_fp32_offset = l.ticket_offset + 256;
  l.bytes = l.dw_fp32_offset + size_t(partialLd(s.N)) * sizeof(float);
  return l;
}

size_t workspaceBytes(const RowShape& s, const LaunchEnv& env) { return workspaceLayout(s, env).bytes; }

}  // namespace ulpcheck::rmsnorm_plan
