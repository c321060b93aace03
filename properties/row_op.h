// Pieces every op adapter over a kernel registry shares: finding the variant
// a case names, listing the variants, the launch environment.
#pragma once

#include <vector>

#include <fmt/format.h>

#include "core/case_spec.h"
#include "kernels/common/row_launch.h"
#include "properties/op.h"

namespace ulpcheck {

/// The variant the case names, from the op's kernel registry; a clear error
/// (CaseParseError: the case is what is wrong) when there is none.
template <typename Registry>
const auto& registeredKernel(const CaseSpec& c) {
  const auto* k = Registry::find(c.kernel);
  if (!k) throw CaseParseError(fmt::format("{} has no kernel variant '{}'", c.op, c.kernel));
  return *k;
}

/// The KernelInfo of every variant in an op's registry (OpAdapter::kernels).
template <typename Registry>
std::vector<KernelInfo> registeredKernelInfos() {
  std::vector<KernelInfo> out;
  for (const auto& k : Registry::all()) out.push_back(k.info);
  return out;
}

inline LaunchEnv launchEnv(const CaseSpec& c, const ExecContext& ctx) {
  return LaunchEnv{ctx.sm_count, c.ctas, nullptr, ctx.perturb_schedule, ctx.call_timeout_s};
}

}  // namespace ulpcheck
