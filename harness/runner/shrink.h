// The shrink stage: from a failing generated case, RapidCheck's shrinks
// (smaller M and N, plainer values) taken while they fail the same way, to a
// case a person can read.
#pragma once

#include <functional>
#include <optional>

#include <rapidcheck.h>

#include "core/case_spec.h"
#include "properties/property.h"

namespace ulpcheck {

struct Shrunk {
  CaseSpec spec;
  Outcome outcome;        // of `spec`
  int steps = 0;          // shrinks taken
  bool finished = false;  // no smaller case failed the same way (false: the budget ran out first)
  double seconds = 0;
};

/// Checks a candidate: its outcome, or nullopt where it cannot be one (a
/// dtype or layout its kernel does not take).
using CandidateCheck = std::function<std::optional<Outcome>(const CaseSpec&)>;

/// Shrinks `found`, which failed with `failure`, within `budget_s` seconds:
/// a candidate replaces it when it fails the same way (a fault as a fault, a
/// hang as a hang: exit code 5 is the hang's). Invalid candidates are passed by.
Shrunk shrinkFailure(const rc::Shrinkable<CaseSpec>& found, const Outcome& failure, double budget_s,
                     const CandidateCheck& check);

}  // namespace ulpcheck
