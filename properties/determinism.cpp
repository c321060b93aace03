// Property: repeated runs of the same case give identical bits in every
// output. A variant whose contract declares it nondeterministic gets the
// observation reported as expected instead of failing.
#include <fmt/format.h>

#include "harness/core/datagen.h"
#include "harness/core/schedule_noise.h"
#include "properties/bitwise.h"
#include "properties/property.h"

namespace ulpcheck {

namespace {

constexpr int kRepeats = 3;  // runs compared with the base run

Outcome checkDeterminism(CaseContext& ctx) {
  const RunResult& base = ctx.baseRun();
  // Says whether the runs met different CTA schedules on purpose, so a pass
  // is read for what it is.
  const char* conditions =
      ScheduleNoise::applies(ctx.exec().perturb_schedule, ctx.kernel().backend) ? " (schedule perturbed)" : "";
  Outcome o;
  for (int k = 1; k <= kRepeats; ++k) {
    const BitwiseDiff d = compareBitwise(base, ctx.run(identityRows(ctx.spec().M)));
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
  o.summary = fmt::format("{} runs bitwise identical{}", kRepeats + 1, conditions);
  return o;
}

const bool registered = registerProperty(
    {"determinism", "repeated runs of a case produce bitwise identical outputs", checkDeterminism});

}  // namespace
}  // namespace ulpcheck
