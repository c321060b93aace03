#include "harness/runner/run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/memory_limit.h"
#include "harness/report/html.h"
#include "harness/report/junit.h"
#include "harness/report/progress.h"
#include "harness/report/table.h"
#include "harness/runner/corpus.h"
#include "harness/runner/exit_codes.h"
#include "harness/runner/workers.h"
#include "oracles/oracle_mode.h"
#include "properties/op.h"

namespace ulpcheck {

namespace {

/// What the ops of a run add up to, for its end.
struct RunTally {
  int worst = exit_code::kNothingRan;
  std::map<std::string, int> inapplicable;  // --property name -> ops it applies to nothing of
  std::array<int64_t, 5> oracle{};          // summed over workers
  std::array<double, size_t(Phase::kCount)> phases{};
  std::vector<std::pair<std::string, CampaignResult>> results;  // each op's, for --junit
};

/// Of two exit codes of a multi-op run, the one that says more: a fault or a
/// hang, then a failure, then a property that judged nothing (another op's
/// pass must not hide it), then a pass; "nothing ran" only if nothing did.
int severity(int code) {
  switch (code) {
    case exit_code::kRuntimeError: return 5;
    case exit_code::kHang: return 4;
    case exit_code::kPropertyFailed: return 3;
    case exit_code::kNothingJudged: return 2;
    case exit_code::kOk: return 1;
    default: return 0;  // kNothingRan
  }
}

int worse(int a, int b) { return severity(b) > severity(a) ? b : a; }

uint64_t randomSeed() { return std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32); }

/// The first line of an op's campaign.
void printCampaignHeader(const CampaignOptions& o, const ExecContext& exec, const std::string& workers) {
  const std::vector<std::string> kernels = o.kernels.empty() ? defaultKernels(o.op, exec.backend) : o.kernels;
  if (kernels.empty())
    throw UsageError(fmt::format("no {} kernel variant of '{}' is registered", backendName(exec.backend), o.op));
  const std::string cases = o.per_cell > 0
                                ? fmt::format("{} per kernel x property x dtype (at most {})", o.per_cell, o.cases)
                                : std::to_string(o.cases);
  fmt::print("# op {} | kernels {} | tier {} | cases {}{}{}{} | seed {:#x} | corpus {}\n", o.op,
             fmt::join(kernels, ","), tierName(o.tier), cases,
             o.time_budget_s > 0 ? fmt::format(" (time budget {:g} s)", o.time_budget_s) : "",
             o.shard_count > 1 ? fmt::format(" | shard {}/{}", o.shard_index + 1, o.shard_count) : "",
             !workers.empty()         ? workers
             : o.concurrent_cases > 1 ? fmt::format(" | {} cases at once", o.concurrent_cases)
                                      : "",
             o.seed, o.corpus_dir.empty() ? defaultCorpusDir() : o.corpus_dir);
  std::fflush(stdout);
}

/// The table, failures and summaries of an op's campaign; its exit code,
/// leaving out the --property names that apply to none of its kernels
/// (tallied: the run decides those over all its ops).
int reportCampaign(const std::string& op, const CampaignResult& r, JsonlWriter* json, RunTally& tally) {
  tally.results.emplace_back(op, r);
  fmt::print("\n{}{}", formatCampaignTable(r), formatCoverage(r));
  // The ones --keep-going recorded as found after a first, briefly.
  for (const FailureRecord& f : r.failures) fmt::print("\n{}", f.as_found ? formatFailureBriefly(f) : formatFailure(f));
  fmt::print("\n{}", formatJudgedSummary(r));
  // The failing cases, as the table's #wrong column sums them; a kernel's
  // faults past the first few are counted there but not recorded.
  int64_t failing = 0;
  for (const auto& [key, c] : r.cells) failing += c.failed;
  const int64_t recorded = int64_t(r.failures.size());
  fmt::print(
      "# {} generated cases{}{} + {} regression cases in {:.1f} s: {}\n", r.cases_run,
      r.topped_up_cases ? fmt::format(" ({} of them topping up cells short of judged cases: inconclusive or skipped)",
                                      r.topped_up_cases)
                        : "",
      r.stopped_by_time ? " (time budget reached)" : "", r.regression_cases, r.seconds,
      failing == 0 && recorded == 0 && r.fatal_error.empty() ? std::string("no failures")
      : failing == recorded                                  ? fmt::format("{} failures", failing)
                            : fmt::format("{} failing cases ({} recorded above; a kernel's faults past its first "
                                          "five are counted, not recorded)",
                                          failing, recorded));
  if (!r.fatal_error.empty()) fmt::print("# FATAL: {}\n", r.fatal_error);
  if (json) json->write(campaignSummaryJson(r));
  for (const auto& p : r.inapplicable_properties) ++tally.inapplicable[p];
  return r.exitCode(/*count_inapplicable_properties=*/false);
}

/// One op's campaign in this process: its exit code (as reportCampaign's).
/// A worker of a coordinated run sends its progress, log, records and
/// result to the coordinator instead of printing them.
int runOpHere(const RunRequest& run, CampaignOptions o, const ExecContext& exec, JsonlWriter* json, RunTally& tally) {
  o.json = json;
  if (run.to_coordinator) {
    reportToCoordinator(o);
    const CampaignResult r = runCampaign(o, exec);
    sendResultToCoordinator(o.op, r);
    return r.exitCode(/*count_inapplicable_properties=*/false);
  }
  ProgressReporter progress(o.op, !run.quiet && ProgressReporter::stderrIsTerminal());
  o.warn = [&progress](const std::string& line) {
    progress.clear();
    fmt::print(stderr, "ulpcheck: {}{}\n", workers::kWarning, line);
  };
  if (!run.quiet) {
    o.log = [&progress](const std::string& line) {
      progress.clear();
      fmt::print("# {}\n", line);
      std::fflush(stdout);
    };
    o.progress = [&progress](const CampaignProgress& p) { progress.update(p); };
  }
  printCampaignHeader(o, exec, "");
  const CampaignResult r = runCampaign(o, exec);
  progress.clear();
  return reportCampaign(o.op, r, json, tally);
}

/// One op's campaign split over worker processes (coordinator.h), reported
/// as one process's would be.
int runOpOnWorkers(const RunRequest& run, const CampaignOptions& o, const ExecContext& exec, JsonlWriter* json,
                   RunTally& tally) {
  CoordinatedCampaign c;
  c.options = o;
  c.args = run.args;
  c.layout = run.layout;
  c.json = json;
  const int n = run.layout.workers;
  const std::vector<std::string>& gpus = run.layout.gpus;
  printCampaignHeader(
      o, exec,
      gpus.empty() ? fmt::format(" | {} workers", n)
                   : fmt::format(" | {} workers on GPU{} {}", n, gpus.size() == 1 ? "" : "s", fmt::join(gpus, ",")));
  ProgressReporter progress(fmt::format("{} ({} workers)", o.op, n),
                            !run.quiet && ProgressReporter::stderrIsTerminal());
  c.log = [&](const std::string& worker, const std::string& line, bool warning) {
    if (run.quiet && !warning) return;
    progress.clear();
    fmt::print("# [{}] {}\n", worker, line);
    std::fflush(stdout);
  };
  c.progress = [&](const CampaignProgress& p) {
    if (!run.quiet) progress.update(p);
  };
  const CoordinatedResult r = runOnWorkers(c);
  progress.clear();
  for (size_t i = 0; i < tally.oracle.size(); ++i) tally.oracle[i] += r.oracle[i];
  for (size_t i = 0; i < tally.phases.size(); ++i) tally.phases[i] += r.phases[i];
  int code = reportCampaign(o.op, r.result, json, tally);
  for (int worker_code : r.codes)
    if (worker_code == exit_code::kHang) code = worse(code, worker_code);
  return code;
}

}  // namespace

std::string formatOracleCounts(const std::array<int64_t, 5>& counts, const ExecContext& exec) {
  return fmt::format(
      "oracle {}, judge {}: {} reference elements by the certified fast path, {} recomputed by MPFR "
      "(undecided there), {} by MPFR only (--oracle mpfr){}{}",
      oracleModeName(exec.oracle), judgeWhereName(exec.judge), counts[0], counts[1], counts[2],
      exec.oracle == OracleMode::Audit ? fmt::format("; {} cases judged on the host and the GPU alike", counts[3]) : "",
      counts[4] ? fmt::format("; {} of them streamed (the per-row tensors of cases whose reference held whole "
                              "would pass {}, $ULPCHECK_MAX_HELD_REFERENCE: made again a block of rows "
                              "at a time when judged)",
                              counts[4], formatBytes(exec.max_held_reference_bytes))
                : "");
}

namespace {

/// The run's closing lines: where its time went, and the --property names
/// that applied to nothing in any op (exit code 7).
void reportRunEnd(const RunRequest& run, const ExecContext& exec, double seconds, RunTally& tally) {
  if (run.layout.workers > 1) {
    fmt::print("\n# {} (summed over {} workers)\n", formatOracleCounts(tally.oracle, exec), run.layout.workers);
    fmt::print("# wall {:.1f} s; summed over the workers: {}\n", seconds, formatPhaseTimes(tally.phases, -1));
  } else {
    fmt::print("\n# {}\n", formatOracleCounts(processOracleCounts(), exec));
    if (const int at_once = run.campaign.concurrent_cases; at_once > 1)
      fmt::print("# wall {:.1f} s; summed over the {} cases checked at once: {}\n", seconds, at_once,
                 formatPhaseTimes(phaseSeconds(), -1));
    else fmt::print("# {}\n", formatPhaseTimes(phaseSeconds(), seconds));
  }
  for (const auto& [property, ops_without] : tally.inapplicable)
    if (size_t(ops_without) == run.ops.size()) {
      fmt::print("\n# NOTHING JUDGED: --property {} applies to no kernel selected in this run\n", property);
      tally.worst = worse(tally.worst, exit_code::kNothingJudged);
    }
}

/// The run's JSON lines: its --json file, or for a worker the coordinator;
/// with --html they are kept too, for the page (`kept`).
std::unique_ptr<JsonlWriter> runJsonLines(const RunRequest& run, std::vector<nlohmann::json>& kept) {
  std::unique_ptr<JsonlWriter> json;
  if (run.to_coordinator)
    json = std::make_unique<JsonlWriter>(
        [](const std::string& line) { workers::say(workers::kJson, nlohmann::json::parse(line)); });
  else json = openJsonLines(run.json);
  if (!run.html.empty() && !run.to_coordinator) {
    auto keep = [&kept](const nlohmann::json& r) { kept.push_back(r); };
    if (json) json->alsoKeep(keep);
    else json = JsonlWriter::keeping(keep);
  }
  return json;
}

}  // namespace

std::string opNames() {
  std::string names;
  for (const OpAdapter* op : opRegistry()) names += (names.empty() ? "" : ", ") + op->name();
  return names;
}

std::vector<std::string> opsToRun(const std::string& op, const std::vector<std::string>& kernels) {
  if (op != "all" && !findOp(op)) throw UsageError(fmt::format("--op {}: no such op (ops: {}, or all)", op, opNames()));
  if (op != "all") return {op};
  std::vector<std::string> ops;
  for (const OpAdapter* adapter : opRegistry()) {
    const auto variants = adapter->kernels();
    const bool names_one = std::any_of(variants.begin(), variants.end(), [&](const KernelInfo& k) {
      return std::find(kernels.begin(), kernels.end(), k.name) != kernels.end();
    });
    if (kernels.empty() || names_one) ops.push_back(adapter->name());
  }
  if (ops.empty()) throw UsageError(fmt::format("no op has a kernel variant named {}", fmt::join(kernels, ", ")));
  if (ops.size() > 1 && !kernels.empty())
    throw UsageError("the --kernel names belong to several ops: pick one with --op");
  return ops;
}

int runOps(const RunRequest& run, const ExecContext& exec) {
  std::vector<nlohmann::json> kept;  // the records, for --html
  const std::unique_ptr<JsonlWriter> json = runJsonLines(run, kept);
  const auto t0 = std::chrono::steady_clock::now();
  RunTally tally;
  for (size_t i = 0; i < run.ops.size(); ++i) {
    if (i && !run.to_coordinator) fmt::print("\n");
    CampaignOptions o = run.campaign;
    o.op = run.ops[i];
    if (run.all_ops && o.kernels.empty() && defaultKernels(o.op, exec.backend).empty()) {
      if (!run.to_coordinator)
        fmt::print("# op {}: no {} kernel variant is registered; passed over\n", o.op, backendName(exec.backend));
      continue;
    }
    o.seed = run.seed ? *run.seed : randomSeed();  // one seed for all of an op's workers
    if (run.time_budget_s > 0) {  // --time-budget is for the whole run: share what is left among the ops to go
      const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      o.time_budget_s = std::max(1.0, (run.time_budget_s - spent) / double(run.ops.size() - i));
    }
    const int code = run.layout.workers > 1 ? runOpOnWorkers(run, o, exec, json.get(), tally)
                                            : runOpHere(run, o, exec, json.get(), tally);
    tally.worst = worse(tally.worst, code);
    // A fault may have left the GPU unusable (a hang in this process ends it
    // at once; a kernel that hung in a worker was killed with its worker).
    if (code == exit_code::kRuntimeError) break;
  }
  if (run.to_coordinator) {
    sendStatsToCoordinator();
    return tally.worst;
  }
  if (!run.junit.empty()) {
    writeWholeFile(run.junit, junitXml(tally.results), "the JUnit XML");
    fmt::print("# JUnit XML: {}\n", run.junit);
  }
  if (!run.html.empty()) writeHtmlReport(run.html, kept, "ulpcheck run");
  if (sayJsonLinesError(json.get())) tally.worst = exit_code::kRuntimeError;
  if (tally.worst == exit_code::kRuntimeError || tally.worst == exit_code::kHang) return tally.worst;
  reportRunEnd(run, exec, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), tally);
  return tally.worst;
}

}  // namespace ulpcheck
