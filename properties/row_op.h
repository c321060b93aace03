// Pieces every op adapter over a kernel registry shares: finding the variant
// a case names, listing the variants, the launch environment, running it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/case_spec.h"
#include "core/device.h"
#include "core/schedule_noise.h"
#include "kernels/common/row_launch.h"
#include "properties/op.h"
#include "properties/run_buffers.h"

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

/// Runs a variant's calls (`launch`) on the buffers of `buf` as every op
/// runs one: beside the schedule-perturbing load where the context asks
/// (an in-process variant's; a worker perturbs its own), started after the
/// inputs are in place so the load overlaps the launch, timed to the
/// synchronisation, which waits for the load too (perturbed timings include
/// it; `what` names the calls in an unchecked launch's message), then the
/// outputs collected.
template <typename Launch>
RunResult runVariant(const KernelInfo& k, const ExecContext& ctx, RunBuffers& buf, const char* what, Launch&& launch) {
  ScheduleNoise noise(ctx.perturb_schedule && !k.remote, k.backend, ctx.sm_count);
  const auto t0 = std::chrono::steady_clock::now();
  launch();
  const std::string unchecked = k.backend == Backend::Cuda ? synchronizeVariant(what) : "";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  RunResult r = buf.collect(ctx.repeats);
  r.memory.unchecked_launch = unchecked;
  r.seconds = seconds;
  return r;
}

}  // namespace ulpcheck
