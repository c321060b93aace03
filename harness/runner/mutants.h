// The kill matrix: every mutant (a registered variant reproducing a real bug,
// KernelInfo::bug) run under the whole property suite with a time budget,
// recording which properties kill it, after how many generated cases and
// seconds, and the shrunk case that reproduces each kill; beside them, what
// each baseline checker (the tolerance tests of other projects, baselines.h)
// says of the same mutant. A mutant its declared property
// (KernelInfo::caught_by) does not kill is a hole in the harness, and fails
// the run; a baseline that misses it is the point of the table. The same run
// puts every correct variant of the backend (the controls) through the same
// properties and baselines for the same time: any failure there is a false
// alarm, and fails the run too.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/runner/baselines.h"
#include "harness/runner/campaign.h"

namespace ulpcheck {

struct KillMatrixOptions {
  Backend backend = Backend::Host;
  std::vector<std::string> mutants;  // empty: every mutant of the backend
  double seconds_per_mutant = 20;    // generation budget of each mutant's campaign
  int64_t max_cases = 1000000;
  uint64_t seed = 0;
  Tier tier = Tier::Default;
  double shrink_budget_s = 10;         // per kill
  bool stop_at_declared_kill = false;  // end a mutant's campaign once its declared property killed it (CI)
  bool controls = true;                // also run the correct variants, counting false alarms
  std::string cli;                     // the ulpcheck binary: each kill's repro command is run through it, as a
                                       // user would run it; empty: replayed in this process
  JsonlWriter* json = nullptr;
  std::function<void(const std::string&)> log;
};

/// What one property did to one mutant.
struct KillCell {
  bool applies = false;               // the property judged at least one case (not all skipped or inconclusive)
  std::optional<FailureRecord> kill;  // the first failure, shrunk
  bool replays = false;               // the shrunk case, run alone as `ulpcheck repro` does, fails again
  // The property's failures show on some runs only (Property::intermittent_
  // failures): a race's case fails again with some probability, so its replay
  // gets more tries and is reported, but a kill does not depend on it.
  bool intermittent = false;
};

struct MutantRow {
  KernelInfo mutant;
  std::map<std::string, KillCell> by_property;
  std::map<std::string, BaselineVerdict> by_baseline;  // what the conventional checks said
  int64_t cases_run = 0;
  double seconds = 0;
  std::string fatal_error;
  /// The declared property killed it.
  bool killedAsDeclared() const;
  /// The earliest kill by any property, if any.
  const FailureRecord* firstKill() const;
  /// Whether the kill by `property` must fail again when replayed alone.
  /// Not so for what follows from a replayed out-of-bounds write (a
  /// memory_safety kill): what such a write overwrites (another buffer of
  /// the run, a pooled block) depends on the memory layout of the process,
  /// so the accuracy or determinism failures it caused in a campaign need
  /// not show in a fresh process; the memory_safety kill itself must.
  bool mustReplay(const std::string& property) const;
};

/// A correct variant run beside the mutants: every failure is a false alarm.
struct ControlRow {
  KernelInfo variant;
  int64_t cases_run = 0;
  double seconds = 0;
  std::vector<FailureRecord> false_alarms;             // by properties
  std::map<std::string, BaselineVerdict> by_baseline;  // caught == a baseline's false alarm
  std::string fatal_error;
  int64_t falseAlarms() const;
};

struct KillMatrix {
  std::vector<std::string> properties;
  std::vector<std::string> baselines;
  std::vector<MutantRow> rows;
  std::vector<ControlRow> controls;
  // A GPU fault ends the process's CUDA context: once one (a mutant's or a
  // control's) is fatal, the variants after it are listed here, not run.
  std::vector<std::string> not_run;
  /// 0 when every mutant was killed by its declared property, every kill's
  /// shrunk case replays (intermittent ones aside), and no control raised a
  /// false alarm; 1 otherwise,
  /// 4 on a fatal error, 6 with no mutants.
  int exitCode() const;
  /// Median over mutants of the seconds to the first kill (killed mutants only).
  double medianSecondsToFirstKill() const;
};

KillMatrix runKillMatrix(const KillMatrixOptions& options, const ExecContext& exec);

/// The matrix as a fixed-width table, then one repro command per kill of a
/// mutant's declared property.
std::string formatKillMatrix(const KillMatrix& m);

/// `ulpcheck mutants` as the CLI parsed it.
struct MutantsRequest {
  KillMatrixOptions matrix;    // its json and log are the command's own
  bool cases_bounded = false;  // --cases-per-mutant: matrix.max_cases bounds each campaign
  bool in_process = false;     // --in-process: every variant in this process, none in a worker
  std::string json, html;      // the files to write (empty: none)
};

/// The kill matrix, printed and written to the request's files; its exit
/// code (KillMatrix::exitCode, or 4 for a file not written in full).
int runMutants(MutantsRequest request, const ExecContext& exec);

}  // namespace ulpcheck
