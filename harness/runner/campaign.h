// Runs properties over generated cases: replays the regression corpus first,
// then generates cases with RapidCheck, checks every selected property on
// each, shrinks failures to a minimal case, saves them to the corpus and
// streams every result as JSON lines.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness/report/jsonl.h"
#include "properties/generators.h"
#include "properties/property.h"

namespace ulpcheck {

/// Where a campaign stands, for progress bars: cases done of those it will
/// run (regression replays included), failures so far, seconds spent.
struct CampaignProgress {
  int64_t done = 0, total = 0, failures = 0;
  double seconds = 0, time_budget_s = 0;
};

struct CampaignOptions {
  std::string op = "rmsnorm";
  std::vector<std::string> kernels;     // empty: every correct (non-mutant) variant of the backend
  std::vector<std::string> properties;  // empty: all
  std::vector<DType> dtypes;            // empty: all
  int64_t cases = 2000;                 // generated cases; with per_cell, the most it may take
  // > 0: the campaign is the shortest prefix of the seed's cases (at most
  // `cases`) in which every applicable (kernel, property, dtype) cell has this
  // many cases; how many of them were judged conclusively is reported.
  int64_t per_cell = 0;
  // Runs only the cases (and regression replays) whose index is shard_index
  // modulo shard_count: n shards of one campaign are disjoint and together
  // are the whole (a plan is made from the seed alone, so every shard
  // computes the same one).
  int shard_index = 0, shard_count = 1;
  uint64_t seed = 0;
  double time_budget_s = 0;             // 0: no limit; generation stops once spent
  double shrink_budget_s = 60;          // per failure
  double case_timeout_s = 300;          // a case running longer is a hang (exit code 5)
  Tier tier = Tier::Default;
  bool shrink = true;
  bool replay_corpus = true;
  bool save_failures = true;
  std::string corpus_dir;               // empty: the repository's corpora/
  // Cases checked at once, each on its own thread and CUDA stream (its
  // variant's GPU work beside the others', its oracle and judging on its own
  // core); results are committed in the sequence's order, so they are those
  // of one case at a time. Some cases run alone (a plugin's or a Python
  // variant, ranks on several GPUs, nightly sizes: CaseGate in campaign.cpp).
  int concurrent_cases = 1;
  std::string stop_after_failure_of;    // a property: stop generating once it has failed (kill-matrix tests)
  JsonlWriter* json = nullptr;
  std::function<void(const std::string&)> log;  // progress lines; may be empty
  // What must be said even where progress lines are not (--quiet): a corpus
  // that could not be written, say. Empty: said as a log line.
  std::function<void(const std::string&)> warn;
  std::function<void(const CampaignProgress&)> progress;  // after every case; may be empty
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
  std::string kind;          // "generated" or "regression"
  std::string property;
  CaseSpec original, shrunk;
  Outcome outcome;           // of the shrunk case
  int shrink_steps = 0;
  int64_t case_index = -1;   // 0-based index of the generated case that failed
  double seconds_to_detect = 0;
  std::string corpus_file;   // where it was saved, or the regression file
  bool perturb_schedule = false;  // found under a schedule-perturbing load, so its repro needs one too
  int repeats = 1;                // runs its repro needs (a regression case's `# repeat:`)
  double case_timeout_s = 0;      // a fault: the kernel's time limit its repro needs (a hang), 0: the default
  // Shrinking ran until no smaller case failed the same way (false: its
  // budget ran out first, or the case was not shrunk).
  bool shrink_finished = false;
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
  std::map<std::tuple<std::string, std::string, std::string>, CellStats> cells;  // (kernel, property, dtype)
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
  std::string fatal_error;   // a sticky GPU fault or similar ended the campaign early
  /// The (kernel, property) pairs that apply and judged no case.
  std::vector<std::pair<std::string, std::string>> unjudged() const;
  /// With a per-cell target: the applicable cells (every selected kernel x
  /// property x dtype, a case of which could apply) judged fewer times than
  /// the target, with their counts. A cell whose property failed for its
  /// kernel (other than by a fault) is decided: it is never below target.
  std::vector<std::pair<std::tuple<std::string, std::string, std::string>, int64_t>> belowTarget() const;
  /// The (kernel, property) pairs a failure (not a fault) has decided.
  std::set<std::pair<std::string, std::string>> decidedByFailure() const;
  // Every applicable (kernel, property, dtype) cell, judged or not.
  std::set<std::tuple<std::string, std::string, std::string>> applicable_cells;
  // A shard's share of each cell's per-cell target (its part of the plan's
  // cases of the cell, in proportion; the shares add up to the target).
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> cell_targets;
  /// 4 fatal, 5 a kernel in a worker hung (killed, its case failed), 1 a
  /// failure, 7 a cell below its plan's target (not cut by the time budget)
  /// or an applicable pair judged nothing (or, unless
  /// a multi-op run decides that across its ops, a named property applies to
  /// nothing selected), 6 nothing ran, 0 otherwise.
  int exitCode(bool count_inapplicable_properties = true) const;
};

/// The kernels a campaign runs by default on this backend.
std::vector<std::string> defaultKernels(const std::string& op, Backend backend);

CampaignResult runCampaign(const CampaignOptions& options, const ExecContext& exec);

/// What one property said over the repeats of one case.
struct ReplayResult {
  std::string property;
  Outcome outcome;  // of the first failing repeat, else of the last
  int runs = 0, failed = 0;
  bool applies = true;  // false: named, but does not apply to the case's kernel or the case (not run)
  int hung = 0;  // of the failed runs: the kernel hung (any of them, not only the first kept)
};

/// Runs the given properties (empty: all) on one case, as `ulpcheck repro`
/// does, `repeats` times: each repeat runs the kernel afresh (the oracle is
/// computed once), since a race fails on some runs only. Once the kernel
/// faults in a repeat, that repeat's later properties are not run. `done`
/// (may be empty) gets each property's result as soon as it is final.
std::vector<ReplayResult> runCase(const CaseSpec& spec, const std::vector<std::string>& properties,
                                  const ExecContext& exec, int repeats = 1,
                                  const std::function<void(const ReplayResult&)>& done = {});

/// The program repro commands name: the ulpcheck binary that runs, so a
/// printed command works where it is pasted. The CLI sets it (`ulpcheck` when
/// that is the binary found on PATH, else the binary's absolute path); by
/// default "ulpcheck".
void setCliProgram(std::string program);
const std::string& cliProgram();

/// The arguments of `ulpcheck` that reproduce a case (`repro '<case>' ...`;
/// run under schedule perturbation when it was found under one; `repeats` > 1
/// adds --repeat for failures that show on some runs only).
std::string reproArgs(const CaseSpec& spec, const std::string& property, bool perturb_schedule = false,
                      int repeats = 1, double case_timeout_s = 0);
/// The command that reproduces a case: cliProgram() and reproArgs.
std::string reproCommand(const CaseSpec& spec, const std::string& property, bool perturb_schedule = false,
                         int repeats = 1, double case_timeout_s = 0);
/// The command that reproduces a failure.
std::string reproCommand(const FailureRecord& f);

}  // namespace ulpcheck
