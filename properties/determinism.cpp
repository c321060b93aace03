// Property: repeated runs of the same case give identical bits in every
// output. A variant whose contract declares it nondeterministic gets the
// observation reported as expected instead of failing.
//
// On the GPU the repeats from the second on always run beside a schedule-perturbing load
// (schedule_noise.h), even without --perturb-schedule: back-to-back runs on an
// idle GPU repeat one CTA schedule and an idle memory system, and hide
// arrival-order sums, shared-memory races and missing fences alike (the
// cuda_bug_missing_threadfence and cuda_bug_missing_syncthreads mutants
// survive unperturbed repeats).
#include <algorithm>

#include <fmt/format.h>

#include "harness/core/datagen.h"
#include "harness/core/schedule_noise.h"
#include "properties/bitwise.h"
#include "properties/property.h"

namespace ulpcheck {

namespace {

constexpr int kFirstPerturbed = 2;  // repeats from this one on run beside the load
constexpr int kMinGpuRepeats = 5;   // on the GPU: one idle repeat, at least four perturbed ones

Outcome checkDeterminism(CaseContext& ctx) {
  const RunResult& base = ctx.baseRun();
  // Says whether the runs met different CTA schedules on purpose, so a pass
  // is read for what it is.
  const bool gpu = ScheduleNoise::applies(true, ctx.kernel().backend);
  const char* conditions = !gpu                        ? ""
                           : ctx.exec().perturb_schedule ? " (schedule perturbed)"
                                                         : " (runs from 2 on schedule perturbed)";
  Outcome o;
  const int repeats = std::max(ctx.exec().determinism_repeats, gpu ? kMinGpuRepeats : 1);
  for (int k = 1; k <= repeats; ++k) {
    const BitwiseDiff d = compareBitwise(base, ctx.run(identityRows(ctx.spec().M), k >= kFirstPerturbed));
    if (!d.differing) continue;
    Finding f = *d.first;
    f.note = fmt::format("run 0 vs run {}: {}", k, f.note);
    f.inputs = ctx.op().describeInputs(ctx.spec(), f.tensor, f.row, f.col);
    o.findings.push_back(f);
    o.verdict = ctx.kernel().contracts.deterministic ? Verdict::Fail : Verdict::Expected;
    o.summary = fmt::format("run {} differs from run 0 in {} elements{}; first {}[{},{}] {}{}", k, d.differing,
                            conditions, f.tensor, f.row, f.col, f.note,
                            o.verdict == Verdict::Expected ? " (contract: nondeterministic)" : "");
    return o;
  }
  o.summary = fmt::format("{} runs bitwise identical{}", repeats + 1, conditions);
  return o;
}

const bool registered = registerProperty(
    {"determinism", "repeated runs of a case produce bitwise identical outputs", checkDeterminism,
     /*intermittent_failures=*/true});

}  // namespace
}  // namespace ulpcheck
