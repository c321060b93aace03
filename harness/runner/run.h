// A run (`ulpcheck run`): the campaign of each op it covers, in this process
// or split over worker processes (coordinator.h), each reported as it ends
// (its table, failures and summaries), then the run's report files (JSON
// lines, JUnit XML, HTML) and its exit code. The CLI parses the flags into a
// RunRequest; everything from there on is here.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/runner/campaign.h"
#include "harness/runner/coordinator.h"

namespace ulpcheck {

struct RunRequest {
  std::vector<std::string> ops;  // opsToRun
  // `--op all` (the default): an op with no variant on the run's backend
  // (rmsnorm_quant's host port only, on a GPU) is passed over, saying so.
  bool all_ops = false;
  // Every op's campaign options but its op, its seed and its time budget (set per op).
  CampaignOptions campaign;
  std::optional<uint64_t> seed;   // nullopt: a random seed per op, printed in its header
  double time_budget_s = 0;       // for the whole run: what is left is shared among the ops to go
  WorkerLayout layout;            // more than one worker: each op's campaign is split over them
  std::vector<std::string> args;  // the run's arguments: each worker gets them again
  bool quiet = false;             // no progress or log lines (warnings still said)
  bool to_coordinator = false;    // this process is a worker of a coordinated run (workers.h)
  std::string json, junit, html;  // the report files to write (empty: none)
};

/// "rmsnorm, layernorm, ...": the registered ops, for messages.
std::string opNames();

/// The ops a run covers: `op`, or with "all" every op (only the op of the
/// named kernels when `kernels` is not empty). Throws UsageError for an op
/// or kernel that does not exist, or kernels of several ops.
std::vector<std::string> opsToRun(const std::string& op, const std::vector<std::string>& kernels);

/// What each oracle path computed (`counts`, processOracleCounts' order:
/// fast, fell back, MPFR only, cases whose GPU judgment the audit compared
/// with the host's, elements streamed), as the run's `# oracle` line says it.
std::string formatOracleCounts(const std::array<int64_t, 5>& counts, const ExecContext& exec);

/// The run; its exit code (harness/runner/exit_codes.h): the most telling of
/// its ops' codes.
int runOps(const RunRequest& request, const ExecContext& exec);

}  // namespace ulpcheck
