// Property: repeated runs of the same case give identical bits in every
// output. A variant whose contract declares it nondeterministic gets the
// observation reported as expected instead of failing, but its contract
// allows other bits, not other values: every repeat of such a variant is
// judged against the oracle like the base run (a race in an atomic kernel
// shows in some repeats only; ulpcheck's own cuda_atomic had one).
//
// On the GPU the repeats from the second on always run beside a schedule-perturbing load
// (schedule_noise.h), even without --perturb-schedule: back-to-back runs on an
// idle GPU repeat one CTA schedule and an idle memory system, and hide
// arrival-order sums, shared-memory races and missing fences alike (the
// cuda_bug_missing_threadfence and cuda_bug_missing_syncthreads mutants
// survive unperturbed repeats).
#include <algorithm>

#include <fmt/format.h>

#include "core/datagen.h"
#include "core/schedule_noise.h"
#include "properties/accuracy.h"
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
  const char* conditions = !gpu                          ? ""
                           : ctx.exec().perturb_schedule ? " (schedule perturbed)"
                                                         : " (runs from 2 on schedule perturbed)";
  Outcome o;
  const bool deterministic = ctx.kernel().contracts.deterministic;
  const int repeats = std::max(ctx.exec().determinism_repeats, gpu ? kMinGpuRepeats : 1);
  const auto describe = [&](const std::string& tensor, int64_t row, int64_t col) {
    return ctx.op().describeInputs(ctx.spec(), tensor, row, col);
  };
  int differing_runs = 0;
  const auto wrong = [&](int k, const std::string& differs, const Outcome& judged) {
    o.verdict = Verdict::Fail;
    o.findings = judged.findings;
    o.summary = fmt::format("run {} differs from run 0 in {}{}, as the contract allows, but is wrong: {}", k, differs,
                            conditions, judged.summary);
    return o;
  };
  for (int k = 1; k <= repeats; ++k) {
    // A nondeterministic variant's repeats after the first that differs, on
    // a case the GPU judges: each runs and is judged where it is, compared by
    // its outputs' digests, nothing downloaded or uploaded (the first went
    // the whole way below and named its first differing element).
    if (!deterministic && differing_runs > 0 && preferGpuJudge(ctx.spec(), ctx.exec())) {
      ExecContext exec = ctx.exec();
      exec.perturb_schedule |= k >= kFirstPerturbed;
      OutputDigests digests;
      if (const std::optional<Outcome> judged = ctx.op().accuracyOnGpu(ctx.spec(), exec, nullptr, &digests)) {
        std::vector<std::string> differing;
        for (const auto& [name, digest] : digests)
          if (const OutputTensor* b = base.find(name); !b || b->digest != digest) differing.push_back(name);
        if (differing.empty()) continue;
        if (judged->verdict == Verdict::Fail) return wrong(k, fmt::format("{}", fmt::join(differing, ", ")), *judged);
        ++differing_runs;
        continue;
      }
    }
    // Outputs bitwise the base run's stay on the device (digests compared).
    const RunResult repeat = ctx.run(identityRows(ctx.spec().M), k >= kFirstPerturbed, &base);
    const BitwiseDiff d = compareBitwise(base, repeat);
    if (!d.differing) continue;
    Finding f = *d.first;
    f.note = fmt::format("run 0 vs run {}: {}", k, f.note);
    f.inputs = describe(f.tensor, f.row, f.col);
    if (deterministic) {
      o.findings.push_back(f);
      o.verdict = Verdict::Fail;
      o.summary = fmt::format("{}run {} differs from run 0 in {} elements{}; first {}[{},{}] {}", ctx.coldBaseRunNote(),
                              k, d.differing, conditions, f.tensor, f.row, f.col, f.note);
      return o;
    }
    // Other bits are allowed; other values are not. The outputs left on the
    // device are the base run's bits.
    RunResult whole = repeat;
    for (OutputTensor& t : whole.outputs)
      if (!t.downloaded)
        if (const OutputTensor* same = base.find(t.name)) t = *same;
    const Outcome judged = judgeRunAccuracy(ctx, whole);
    if (judged.verdict == Verdict::Fail) return wrong(k, fmt::format("{} elements", d.differing), judged);
    if (!differing_runs++) {
      o.findings.push_back(f);
      o.verdict = Verdict::Expected;
      o.summary = fmt::format("run {} differs from run 0 in {} elements{}; first {}[{},{}] {} (contract: "
                              "nondeterministic)",
                              k, d.differing, conditions, f.tensor, f.row, f.col, f.note);
    }
  }
  if (differing_runs)
    o.summary += fmt::format("; {} of {} repeats differ, each within its accuracy budget", differing_runs, repeats);
  else o.summary = fmt::format("{} runs bitwise identical{}", repeats + 1, conditions);
  return o;
}

const bool registered = registerProperty({"determinism", "repeated runs of a case produce bitwise identical outputs",
                                          checkDeterminism,
                                          /*intermittent_failures=*/true});

}  // namespace
}  // namespace ulpcheck
