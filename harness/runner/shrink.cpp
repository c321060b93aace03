#include "harness/runner/shrink.h"

#include <chrono>

namespace ulpcheck {

Shrunk shrinkFailure(const rc::Shrinkable<CaseSpec>& found, const Outcome& failure, double budget_s,
                     const CandidateCheck& check) {
  const auto t0 = std::chrono::steady_clock::now();
  auto spent = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  Shrunk out{found.value(), failure, 0, false, 0};
  rc::Shrinkable<CaseSpec> current = found;
  bool out_of_budget = false;
  for (bool improved = true; improved && !out_of_budget;) {
    improved = false;
    for (auto seq = current.shrinks(); auto next = seq.next();) {
      if ((out_of_budget = spent() >= budget_s)) break;
      const CaseSpec candidate = next->value();
      try {
        validateCase(candidate);
      } catch (const CaseParseError&) {
        continue;
      }
      std::optional<Outcome> oc = check(candidate);
      if (oc && oc->verdict == Verdict::Fail && oc->fault == out.outcome.fault && oc->hang == out.outcome.hang) {
        current = *next;
        out.spec = candidate;
        out.outcome = std::move(*oc);
        ++out.steps;
        improved = true;
        break;
      }
    }
  }
  out.finished = !out_of_budget;
  out.seconds = spent();
  return out;
}

}  // namespace ulpcheck
