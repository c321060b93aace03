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

#include "harness/runner/campaign_result.h"
#include "harness/runner/jsonl.h"
#include "harness/runner/record.h"
#include "harness/runner/run_case.h"
#include "properties/generators.h"
#include "properties/property.h"

namespace ulpcheck {

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
  double time_budget_s = 0;     // 0: no limit; generation stops once spent
  double shrink_budget_s = 60;  // per failure
  double case_timeout_s = 300;  // a case running longer is a hang (exit code 5)
  Tier tier = Tier::Default;
  bool shrink = true;
  bool replay_corpus = true;
  bool save_failures = true;
  std::string corpus_dir;  // empty: the repository's corpora/
  // Cases checked at once, each on its own thread and CUDA stream (its
  // variant's GPU work beside the others', its oracle and judging on its own
  // core); results are committed in the sequence's order, so they are those
  // of one case at a time. Some cases run alone (a plugin's or a Python
  // variant, ranks on several GPUs, nightly sizes: CaseGate in run_case.h).
  int concurrent_cases = 1;
  std::string stop_after_failure_of;  // a property: stop generating once it has failed (kill-matrix tests)
  // Go on checking a (kernel, property) after its first failure: every
  // failing case is recorded, the first shrunk and saved to the corpus, the
  // others as found, so one known defect (a library's flushed subnormals)
  // does not stop its property from judging the rest. Off: a failed
  // (kernel, property) is checked no more.
  bool keep_going = false;
  JsonlWriter* json = nullptr;
  std::function<void(const std::string&)> log;  // progress lines; may be empty
  // What must be said even where progress lines are not (--quiet): a corpus
  // that could not be written, say. Empty: said as a log line.
  std::function<void(const std::string&)> warn;
  std::function<void(const CampaignProgress&)> progress;  // after every case; may be empty
};

/// The kernels a campaign runs by default on this backend.
std::vector<std::string> defaultKernels(const std::string& op, Backend backend);

CampaignResult runCampaign(const CampaignOptions& options, const ExecContext& exec);

}  // namespace ulpcheck
