// What a campaign found: each cell's figures, its failures (shrunk), what it
// judged of what it planned, and the exit code all that makes.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/case_spec.h"
#include "harness/runner/plan.h"
#include "properties/error_distribution.h"
#include "properties/property.h"

namespace ulpcheck {

/// Where a campaign stands, for progress bars: cases done of those it will
/// run (regression replays included), failures so far, seconds spent.
struct CampaignProgress {
  int64_t done = 0, total = 0, failures = 0;
  double seconds = 0, time_budget_s = 0;
};

/// Figures of one (kernel, property, dtype) cell.
struct CellStats {
  int64_t cases = 0, passed = 0, failed = 0, expected = 0, skipped = 0, inconclusive = 0;
  double max_ulp = 0, max_ratio = 0;
  double seconds = 0;
  // Per output tensor, the errors of every judged element of the cell's
  // cases (accuracy only; empty for bitwise properties).
  std::map<std::string, ErrorDistribution> errors;
  // Of the failed cases, those where the kernel itself did not run to the
  // end (crashed, hung, returned an error): failures that judged no value.
  int64_t faulted = 0;
  int64_t hung = 0;  // of the faulted: the kernel did not return within its time limit (exit code 5)
  int64_t judged() const { return passed + failed + expected; }
  /// Every tensor's errors together.
  ErrorDistribution allErrors() const {
    ErrorDistribution all;
    for (const auto& [tensor, d] : errors) all.merge(d);
    return all;
  }
};

struct FailureRecord {
  std::string kind;  // "generated" or "regression"
  std::string property;
  CaseSpec original, shrunk;
  Outcome outcome;  // of the shrunk case
  int shrink_steps = 0;
  int64_t case_index = -1;  // 0-based index of the generated case that failed
  double seconds_to_detect = 0;
  std::string corpus_file;        // where it was saved, or the regression file
  bool perturb_schedule = false;  // found under a schedule-perturbing load, so its repro needs one too
  int repeats = 1;                // runs its repro needs (a regression case's `# repeat:`)
  double case_timeout_s = 0;      // a fault: the kernel's time limit its repro needs (a hang), 0: the default
  // Shrinking ran until no smaller case failed the same way (false: its
  // budget ran out first, or the case was not shrunk).
  bool shrink_finished = false;
  // A later failure of a (kernel, property) under --keep-going: recorded as
  // found (not shrunk, not saved), and reported in three lines.
  bool as_found = false;
};

struct CampaignResult {
  std::string op;
  uint64_t seed = 0;  // the seed its cases were drawn from
  int64_t cases_run = 0, regression_cases = 0;
  // The generated cases the campaign set out to run (its plan), and, with
  // CampaignOptions::per_cell, the target and whether the plan reached it
  // (false: `cases` ran out first).
  int64_t planned_cases = 0, per_cell = 0;
  int64_t topped_up_cases = 0;  // run after the plan, for cells whose cases were not all judged
  bool plan_reached_target = true;
  int shard_index = 0, shard_count = 1;
  std::map<CellKey, CellStats> cells;  // (kernel, property, dtype)
  // Every (kernel, property) the selection makes applicable (Property::
  // appliesTo), with the cases it judged: 0 means it could have passed
  // without looking (exit code 7).
  std::map<std::pair<std::string, std::string>, int64_t> judged;
  // Properties named by the options that apply to no selected kernel.
  std::vector<std::string> inapplicable_properties;
  std::vector<FailureRecord> failures;
  // Coverage: kernel -> each code path it declares -> cases that took it
  // (KernelInfo::code_paths); a path at 0 was never reached.
  std::map<std::string, std::map<std::string, int64_t>> paths;
  bool stopped_by_time = false;
  double seconds = 0;
  std::string fatal_error;  // a sticky GPU fault or similar ended the campaign early
  /// The (kernel, property) pairs that apply and judged no case.
  std::vector<std::pair<std::string, std::string>> unjudged() const;
  /// With a per-cell target: the applicable cells (every selected kernel x
  /// property x dtype, a case of which could apply) judged fewer times than
  /// the target, with their counts. A cell whose property failed for its
  /// kernel (other than by a fault) is decided: it is never below target.
  std::vector<std::pair<CellKey, int64_t>> belowTarget() const;
  /// The (kernel, property) pairs a failure (not a fault) has decided.
  std::set<std::pair<std::string, std::string>> decidedByFailure() const;
  // Every applicable (kernel, property, dtype) cell, judged or not.
  std::set<CellKey> applicable_cells;
  // A shard's share of each cell's per-cell target (its part of the plan's
  // cases of the cell, in proportion; the shares add up to the target).
  std::map<CellKey, int64_t> cell_targets;
  /// 4 fatal, 5 a kernel in a worker hung (killed, its case failed), 1 a
  /// failure, 7 a cell below its plan's target (not cut by the time budget)
  /// or an applicable pair judged nothing (or, unless
  /// a multi-op run decides that across its ops, a named property applies to
  /// nothing selected), 6 nothing ran, 0 otherwise.
  int exitCode(bool count_inapplicable_properties = true) const;
};

}  // namespace ulpcheck
