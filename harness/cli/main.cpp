// ulpcheck: property-based verification of GPU numerical kernels against an
// MPFR oracle. Subcommands: list, run, repro.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <string_view>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/ctest_gpus.h"
#include "core/device.h"
#include "core/memory_limit.h"
#include "core/parallel.h"
#include "harness/report/html.h"
#include "harness/report/junit.h"
#include "harness/report/progress.h"
#include "harness/report/table.h"
#include "harness/runner/campaign.h"
#include "harness/runner/coordinator.h"
#include "harness/runner/corpus.h"
#include "harness/runner/exit_codes.h"
#include "harness/runner/mutants.h"
#include "harness/runner/workers.h"
#include "kernels/plugin/plugin_loader.h"
#include "kernels/plugin/remote.h"
#include "oracles/oracle_mode.h"

using namespace ulpcheck;

namespace {

struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

int64_t parseCount(const char* option, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno == ERANGE || v < 0)
    throw UsageError(fmt::format("{}: '{}' is not a count >= 0 (or auto)", option, text));
  return v;
}

/// "--shard i/n" (1-based, as CI matrices number their jobs) to (i - 1, n).
std::pair<int, int> parseShard(const std::string& text) {
  if (text.empty()) return {0, 1};
  int i = 0, n = 0;
  char slash = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c", &i, &slash, &n, &extra) != 3 || slash != '/' || n < 1 || i < 1 || i > n)
    throw UsageError(fmt::format("--shard: '{}' is not i/n with 1 <= i <= n (e.g. 2/4)", text));
  return {i - 1, n};
}

uint64_t parseSeed(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 0);
  if (text.empty() || *end || errno == ERANGE || text[0] == '-')
    throw UsageError(fmt::format("--seed: '{}' is not an unsigned 64-bit integer (decimal or 0x hex)", text));
  return v;
}

std::vector<DType> parseDTypes(const std::vector<std::string>& names) {
  std::vector<DType> out;
  for (const auto& n : names) {
    const auto t = parseDType(n);
    if (!t) throw UsageError(fmt::format("--dtype: '{}' is not one of fp32, fp16, bf16", n));
    out.push_back(*t);
  }
  return out;
}

Tier parseTier(const std::string& name) {
  for (Tier t : {Tier::Smoke, Tier::Default, Tier::Nightly})
    if (name == tierName(t)) return t;
  throw UsageError(fmt::format("--tier: '{}' is not one of smoke, default, nightly", name));
}

/// Where cases run: `auto` picks the GPU when one is usable.
/// The run's oracle and judge: --oracle and --judge, else $ULPCHECK_ORACLE
/// and $ULPCHECK_JUDGE (read here, at the edge, and nowhere else).
OracleSettings oracleSettings(std::string oracle, std::string judge) {
  OracleSettings s;
  const char* env_oracle = std::getenv("ULPCHECK_ORACLE");
  const char* env_judge = std::getenv("ULPCHECK_JUDGE");
  const std::string oracle_from = oracle.empty() ? "ULPCHECK_ORACLE=" : "--oracle ";
  const std::string judge_from = judge.empty() ? "ULPCHECK_JUDGE=" : "--judge ";
  if (oracle.empty() && env_oracle) oracle = env_oracle;
  if (judge.empty() && env_judge) judge = env_judge;
  if (!oracle.empty()) {
    const auto mode = parseOracleMode(oracle);
    if (!mode) throw UsageError(fmt::format("{}'{}' is not one of fast, mpfr, audit", oracle_from, oracle));
    s.mode = *mode;
  }
  if (!judge.empty()) {
    const auto where = parseJudgeWhere(judge);
    if (!where) throw UsageError(fmt::format("{}'{}' is not one of auto, host, gpu", judge_from, judge));
    s.judge = *where;
  }
  return s;
}

ExecContext execContext(const std::string& backend, bool perturb_schedule, const OracleSettings& oracle,
                        bool quiet = false) {
  const DeviceInfo& dev = queryDevice();
  ExecContext ctx;
  ctx.pool = &ThreadPool::shared();
  ctx.oracle = oracle.mode;
  ctx.judge = oracle.judge;
  if (backend == "cuda" || (backend == "auto" && dev.available)) {
    if (!dev.available) throw UsageError(fmt::format("the cuda backend needs a GPU: {}", dev.reason));
    ctx.backend = Backend::Cuda;
    ctx.sm_count = dev.sm_count;
    if (!quiet)
      fmt::print("# backend: cuda — {} (sm_{}{}, {} SMs, {:.1f} GiB); oracle on {} host threads\n", dev.name,
                 dev.cc_major, dev.cc_minor, dev.sm_count, dev.total_bytes / 1073741824.0, ctx.pool->size());
  } else if (backend == "host" || backend == "auto") {
    ctx.backend = Backend::Host;
    if (!quiet)
      fmt::print("# backend: host port on the CPU ({}); oracle on {} host threads\n",
                 dev.available ? "chosen with --backend host" : dev.reason, ctx.pool->size());
  } else {
    throw UsageError(fmt::format("--backend: '{}' is not one of auto, host, cuda", backend));
  }
  ctx.perturb_schedule = perturb_schedule;
  if (perturb_schedule && !quiet)
    fmt::print("# schedule perturbation: {}\n",
               ctx.backend == Backend::Cuda ? "every run launches beside a random load on another stream"
                                            : "has no effect on the host backend (host ports run in program order)");
  return ctx;
}

int cmdList() {
  fmt::print("ops:\n");
  for (const OpAdapter* op : opRegistry()) fmt::print("  {}\n", op->name());
  fmt::print("\nkernel variants:\n");
  fmt::print("  {:<17} {:<29} {:<5} {:<15} {:<13} {:<6} {}\n", "op", "variant", "back", "dtypes", "deterministic",
             "b-inv", "description");
  for (const KernelInfo& k : kernelCatalog()) {
    std::string dtypes;
    for (DType t : k.dtypes) dtypes += std::string(dtypes.empty() ? "" : ",") + dtypeName(t);
    fmt::print("  {:<17} {:<29} {:<5} {:<15} {:<13} {:<6} {}\n", k.op, k.name, backendName(k.backend), dtypes,
               k.contracts.deterministic ? "yes" : "no", k.contracts.batch_invariant ? "yes" : "no", k.description);
    if (k.contracts.column_reduction_ftz)
      fmt::print("  {:<17} {:<29} contract: its dW reduction flushes subnormals to zero\n", "", "");
    if (k.isMutant()) fmt::print("  {:<17} {:<29} reproduces: {}; must be caught by: {}\n", "", "", k.bug, k.caught_by);
    if (k.origin != "built-in") fmt::print("  {:<17} {:<29} from {}\n", "", "", k.origin);
    if (const auto& p = k.preconditions; p.contiguous_rows || p.aligned_rows || p.max_cols)
      fmt::print("  {:<17} {:<29} preconditions:{}{}{}\n", "", "", p.contiguous_rows ? " contiguous rows" : "",
                 p.aligned_rows ? " 16-byte aligned rows" : "", p.max_cols ? fmt::format(" N <= {}", p.max_cols) : "");
  }
  fmt::print("\nproperties:\n");
  for (const Property& p : propertyRegistry()) fmt::print("  {:<18} {}\n", p.name, p.description);
  const DeviceInfo& dev = queryDevice();
  fmt::print("\ndevice: {}\n", dev.available ? fmt::format("{} ({} SMs)", dev.name, dev.sm_count) : dev.reason);
  return exit_code::kOk;
}

constexpr int kAutoWorkers = std::numeric_limits<int>::min();  // --workers not given
// Begins a campaign's warnings (CampaignOptions::warn): said even with --quiet.
constexpr const char* kWarning = workers::kWarning;

struct RunArgs {
  std::string op = "all", backend = "auto", tier = "default", json, corpus, seed, cases = "auto", shard, gpus = "all";
  std::string junit;  // JUnit XML of the run
  std::string html;   // HTML report of the run
  std::vector<std::string> kernels, properties, dtypes;
  int64_t per_cell = 0;        // 0: the backend's default (with --cases auto)
  int workers = kAutoWorkers;  // kAutoWorkers: the default layout (workerLayout)
  std::string concurrent_cases = "auto";
  double time_budget = 0, shrink_budget = 60, case_timeout = 300;
  bool no_shrink = false, no_corpus = false, no_save = false, quiet = false, perturb_schedule = false;
  bool report_to_coordinator = false;  // a worker of a coordinated run (harness/runner/workers.h)
  bool in_process = false;             // plugin kernels in this process (--in-process)
  OracleSettings oracle;               // --oracle, --judge
  std::vector<std::string> args;       // the process's arguments after the program name: workers get them again
};

/// Each op's result as reported, for the files written at the end of a run (--junit).
using OpResults = std::vector<std::pair<std::string, CampaignResult>>;

/// Writes the HTML report of `records` to `path`, saying where.
void writeHtml(const std::string& path, const std::vector<nlohmann::json>& records, const std::string& title) {
  writeWholeFile(path, htmlReport(records, title), "the HTML report");
  fmt::print("# HTML report: {}\n", path);
}

/// On SIGINT or SIGTERM: one line saying why the run ends here, then the
/// signal's own end (its exit status). The JSON lines are whole already; the
/// kernel workers die with this process (remote.cpp's Spawner).
void sayInterrupted(int sig) {
  const char* msg = sig == SIGINT ? "\nulpcheck: interrupted (SIGINT); every result measured so far is in the JSON "
                                    "lines, where --json was given\n"
                                  : "\nulpcheck: terminated (SIGTERM); every result measured so far is in the JSON "
                                    "lines, where --json was given\n";
  const ssize_t ignored = ::write(2, msg, std::strlen(msg));
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void sayWhenInterrupted() {
  // A signal the process was started ignoring (a background job's SIGINT) stays ignored.
  for (int sig : {SIGINT, SIGTERM})
    if (std::signal(sig, sayInterrupted) == SIG_IGN) std::signal(sig, SIG_IGN);
}

/// Checks, before any case runs, that the run's report files can be written
/// (a folder given for a file, a folder that does not exist): a usage error
/// now, not after the whole campaign.
void checkOutputFiles(const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [option, path] : files) {
    if (path.empty()) continue;
    try {
      checkWritableFile(path, option);
    } catch (const std::runtime_error& e) {
      throw UsageError(e.what());
    }
  }
}

/// The JSON-lines writer of --json (a usage error if the file cannot be opened).
std::unique_ptr<JsonlWriter> openJsonLines(const std::string& path) {
  if (path.empty()) return nullptr;
  checkOutputFiles({{"--json", path}});
  return std::make_unique<JsonlWriter>(path);
}

/// A JSON-lines file that could not be written in full: said after the run's
/// table, and exit code 4 (the table and the file's whole records stand).
bool reportJsonError(const JsonlWriter* json) {
  if (!json || json->error().empty()) return false;
  fmt::print("\n# I/O ERROR: {}\n", json->error());
  return true;
}

uint64_t runSeed(const RunArgs& a) {
  return a.seed.empty() ? std::random_device{}() ^ (uint64_t(std::random_device{}()) << 32) : parseSeed(a.seed);
}

/// --concurrent-cases. auto: one per core of this process's share, on the GPU
/// and on the host alike (the host's kernels and oracle use the pool, but
/// much of a small case is serial: the default campaign on a 2-core CPU took
/// 45.0 s one case at a time, 27.6 s two at once).
int concurrentCases(const RunArgs& a) {
  if (a.concurrent_cases == "auto") return std::clamp(int(ThreadPool::shared().size()), 1, kMaxConcurrentCases);
  const int64_t n = parseCount("--concurrent-cases", a.concurrent_cases);
  if (n < 1 || n > 256) throw UsageError(fmt::format("--concurrent-cases {}: give 1 to 256, or auto", n));
  return int(n);
}

/// A campaign's options from a run's arguments (one op of it).
CampaignOptions campaignOptions(const RunArgs& a, const std::string& op, const ExecContext& exec) {
  CampaignOptions o;
  o.op = op;
  o.kernels = a.kernels;
  o.properties = a.properties;
  o.dtypes = parseDTypes(a.dtypes);
  for (const auto& [option, seconds] : std::initializer_list<std::pair<const char*, double>>{
           {"--time-budget", a.time_budget}, {"--shrink-budget", a.shrink_budget}})
    if (!(seconds >= 0)) throw UsageError(fmt::format("{} {:g}: give seconds >= 0", option, seconds));
  if (!(a.case_timeout >= 0))
    throw UsageError(fmt::format("--case-timeout {:g}: give seconds >= 0 (0: no limit)", a.case_timeout));
  if (a.per_cell < 0) throw UsageError("--per-cell must be >= 0");
  if (a.cases == "auto") {
    o.cases = kDefaultCaseCap;
    o.per_cell = a.per_cell > 0 ? a.per_cell : exec.backend == Backend::Cuda ? kDefaultPerCellGpu : kDefaultPerCellHost;
  } else {
    o.cases = parseCount("--cases", a.cases);
    o.per_cell = a.per_cell;  // with --cases N: N is then the most the plan may take
  }
  o.concurrent_cases = concurrentCases(a);
  std::tie(o.shard_index, o.shard_count) = parseShard(a.shard);
  o.seed = runSeed(a);
  o.time_budget_s = a.time_budget;
  o.shrink_budget_s = a.shrink_budget;
  o.case_timeout_s = a.case_timeout;
  o.tier = parseTier(a.tier);
  o.shrink = !a.no_shrink;
  o.replay_corpus = !a.no_corpus;
  o.save_failures = !a.no_save;
  o.corpus_dir = a.corpus;
  return o;
}

/// The first line of an op's campaign.
void printCampaignHeader(const RunArgs& a, const CampaignOptions& o, const ExecContext& exec,
                         const std::string& workers) {
  const std::vector<std::string> kernels = o.kernels.empty() ? defaultKernels(o.op, exec.backend) : o.kernels;
  if (kernels.empty())
    throw UsageError(fmt::format("no {} kernel variant of '{}' is registered", backendName(exec.backend), o.op));
  const std::string cases = o.per_cell > 0
                                ? fmt::format("{} per kernel x property x dtype (at most {})", o.per_cell, o.cases)
                                : std::to_string(o.cases);
  fmt::print("# op {} | kernels {} | tier {} | cases {}{}{}{} | seed {:#x} | corpus {}\n", o.op,
             fmt::join(kernels, ","), a.tier, cases,
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
/// (added to `inapplicable`: the run decides those over all its ops).
int reportCampaign(const std::string& op, const CampaignResult& r, JsonlWriter* json,
                   std::map<std::string, int>& inapplicable, OpResults& results) {
  results.emplace_back(op, r);
  fmt::print("\n{}{}", formatCampaignTable(r), formatCoverage(r));
  for (const FailureRecord& f : r.failures) fmt::print("\n{}", formatFailure(f));
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
  for (const auto& p : r.inapplicable_properties) ++inapplicable[p];
  return r.exitCode(/*count_inapplicable_properties=*/false);
}

/// One op's campaign in this process: its exit code (as reportCampaign's).
/// A worker of a coordinated run sends its progress, log, records and
/// result to the coordinator instead of printing them.
int runOp(const RunArgs& a, const std::string& op, const ExecContext& exec, JsonlWriter* json,
          std::map<std::string, int>& inapplicable, OpResults& results) {
  CampaignOptions o = campaignOptions(a, op, exec);
  o.json = json;
  if (a.report_to_coordinator) {
    reportToCoordinator(o);
    const CampaignResult r = runCampaign(o, exec);
    sendResultToCoordinator(op, r);
    return r.exitCode(/*count_inapplicable_properties=*/false);
  }
  ProgressReporter progress(op, !a.quiet && ProgressReporter::stderrIsTerminal());
  o.warn = [&progress](const std::string& line) {
    progress.clear();
    fmt::print(stderr, "ulpcheck: {}{}\n", kWarning, line);
  };
  if (!a.quiet) {
    o.log = [&progress](const std::string& line) {
      progress.clear();
      fmt::print("# {}\n", line);
      std::fflush(stdout);
    };
    o.progress = [&progress](const CampaignProgress& p) { progress.update(p); };
  }
  printCampaignHeader(a, o, exec, "");
  const CampaignResult r = runCampaign(o, exec);
  progress.clear();
  return reportCampaign(op, r, json, inapplicable, results);
}

/// "rmsnorm, layernorm, ...": the ops, for messages.
std::string opNames() {
  std::vector<std::string> names;
  for (const OpAdapter* op : opRegistry()) names.push_back(op->name());
  return fmt::format("{}", fmt::join(names, ", "));
}

/// The ops a `run` covers: the one named, or with `--op all` every op (only
/// the op of the named kernels when --kernel is given).
std::vector<std::string> opsToRun(const RunArgs& a) {
  if (a.op != "all" && !findOp(a.op))
    throw UsageError(fmt::format("--op {}: no such op (ops: {}, or all)", a.op, opNames()));
  if (a.op != "all") return {a.op};
  std::vector<std::string> ops;
  for (const OpAdapter* op : opRegistry()) {
    const auto variants = op->kernels();
    const bool names_one = std::any_of(variants.begin(), variants.end(), [&](const KernelInfo& k) {
      return std::find(a.kernels.begin(), a.kernels.end(), k.name) != a.kernels.end();
    });
    if (a.kernels.empty() || names_one) ops.push_back(op->name());
  }
  if (ops.empty()) throw UsageError(fmt::format("no op has a kernel variant named {}", fmt::join(a.kernels, ", ")));
  if (ops.size() > 1 && !a.kernels.empty())
    throw UsageError("the --kernel names belong to several ops: pick one with --op");
  return ops;
}

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

/// What each oracle path computed (`counts`: fast, fell back, MPFR only,
/// cases whose GPU judgment the audit compared with the host's).
std::string formatOracleCounts(const std::array<int64_t, 4>& counts, const ExecContext& exec) {
  return fmt::format("oracle {}, judge {}: {} reference elements by the certified fast path, {} recomputed by MPFR "
                     "(undecided there), {} by MPFR only (--oracle mpfr, or not in the fast path yet: rounding=llama, "
                     "stats=T){}",
                     oracleModeName(exec.oracle), judgeWhereName(exec.judge), counts[0], counts[1], counts[2],
                     exec.oracle == OracleMode::Audit
                         ? fmt::format("; {} cases judged on the host and the GPU alike", counts[3])
                         : "");
}

/// The worker layout of a run's arguments (one process for a worker itself).
WorkerLayout runLayout(const RunArgs& a, const ExecContext& exec) {
  if (a.report_to_coordinator) return WorkerLayout{};  // a worker runs its share itself
  LayoutRequest r;
  if (a.workers != kAutoWorkers) r.workers = a.workers;
  if (a.gpus != "all") r.gpus = parseCount("--gpus", a.gpus);
  r.smoke_tier = a.tier == tierName(Tier::Smoke);
  r.in_process = a.in_process;
  return workerLayout(r, exec.backend);
}

/// One op's campaign split over worker processes (coordinator.h), reported
/// as one process's would be.
int runOpOnWorkers(const RunArgs& a, const std::string& op, const ExecContext& exec, const WorkerLayout& layout,
                   JsonlWriter* json, std::map<std::string, int>& inapplicable, OpResults& results,
                   std::array<int64_t, 4>& oracle, std::array<double, size_t(Phase::kCount)>& phases) {
  CoordinatedCampaign c;
  c.options = campaignOptions(a, op, exec);
  c.args = a.args;
  c.layout = layout;
  c.json = json;
  const int n = layout.workers;
  printCampaignHeader(a, c.options, exec,
                      layout.gpus.empty()
                          ? fmt::format(" | {} workers", n)
                          : fmt::format(" | {} workers on GPU{} {}", n, layout.gpus.size() == 1 ? "" : "s",
                                        fmt::join(layout.gpus, ",")));
  ProgressReporter progress(fmt::format("{} ({} workers)", op, n), !a.quiet && ProgressReporter::stderrIsTerminal());
  c.log = [&](const std::string& worker, const std::string& line, bool warning) {
    if (a.quiet && !warning) return;
    progress.clear();
    fmt::print("# [{}] {}\n", worker, line);
    std::fflush(stdout);
  };
  c.progress = [&](const CampaignProgress& p) {
    if (!a.quiet) progress.update(p);
  };
  const CoordinatedResult r = runOnWorkers(c);
  progress.clear();
  for (size_t i = 0; i < oracle.size(); ++i) oracle[i] += r.oracle[i];
  for (size_t i = 0; i < phases.size(); ++i) phases[i] += r.phases[i];
  int code = reportCampaign(op, r.result, json, inapplicable, results);
  for (int worker_code : r.codes)
    if (worker_code == exit_code::kHang && severity(worker_code) > severity(code)) code = worker_code;
  return code;
}

/// An explicit --corpus must be a folder: a file or a path that does not
/// exist would replay nothing and say nothing.
void checkCorpusOption(const std::string& corpus) {
  std::error_code ec;
  const char* layout = "a corpus is a folder holding <op>/<property>/regression/ (replayed) and crashing/ (saved)";
  if (corpus.empty()) {
    // $ULPCHECK_CORPUS may name a corpus not made yet (crashing cases go
    // there, or to ./ulpcheck-corpus), but not a file.
    const char* env = std::getenv("ULPCHECK_CORPUS");
    if (env && *env && std::filesystem::exists(env, ec) && !std::filesystem::is_directory(env, ec))
      throw UsageError(fmt::format("ULPCHECK_CORPUS={}: not a folder ({})", env, layout));
    return;
  }
  if (!std::filesystem::exists(corpus, ec))
    throw UsageError(fmt::format("--corpus {}: no such folder ({}; create it, or leave --corpus out for {})", corpus,
                                 layout, defaultCorpusDir()));
  if (!std::filesystem::is_directory(corpus, ec))
    throw UsageError(fmt::format("--corpus {}: not a folder ({})", corpus, layout));
}

int cmdRun(const RunArgs& a) {
  if (!a.report_to_coordinator) sayWhenInterrupted();  // a worker dies with its coordinator, which says it
  const std::vector<std::string> ops = opsToRun(a);
  checkCorpusOption(a.corpus);
  if (!a.report_to_coordinator) checkOutputFiles({{"--html", a.html}, {"--junit", a.junit}});
  const ExecContext exec = execContext(a.backend, a.perturb_schedule, a.oracle, a.report_to_coordinator);
  const WorkerLayout layout = runLayout(a, exec);
  std::unique_ptr<JsonlWriter> json;
  if (a.report_to_coordinator)
    json = std::make_unique<JsonlWriter>(
        [](const std::string& line) { workers::say(workers::kJson, nlohmann::json::parse(line)); });
  else json = openJsonLines(a.json);
  std::vector<nlohmann::json> kept;  // the records, for --html
  if (!a.html.empty() && !a.report_to_coordinator) {
    auto keep = [&kept](const nlohmann::json& r) { kept.push_back(r); };
    if (json) json->alsoKeep(keep);
    else json = JsonlWriter::keeping(keep);
  }
  const auto t0 = std::chrono::steady_clock::now();
  int worst = exit_code::kNothingRan;
  std::map<std::string, int> inapplicable;  // --property name -> ops it applies to nothing of
  std::array<int64_t, 4> oracle{};          // summed over workers
  std::array<double, size_t(Phase::kCount)> phases{};
  OpResults results;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i && !a.report_to_coordinator) fmt::print("\n");
    RunArgs per_op = a;
    if (a.time_budget > 0) {  // --time-budget is for the whole run: share what is left among the ops to go
      const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      per_op.time_budget = std::max(1.0, (a.time_budget - spent) / double(ops.size() - i));
    }
    if (a.seed.empty()) per_op.seed = fmt::format("{:#x}", runSeed(a));  // one seed for all of an op's workers
    const int code = layout.workers > 1 ? runOpOnWorkers(per_op, ops[i], exec, layout, json.get(), inapplicable,
                                                         results, oracle, phases)
                                        : runOp(per_op, ops[i], exec, json.get(), inapplicable, results);
    if (severity(code) > severity(worst)) worst = code;
    // A fault may have left the GPU unusable (a hang in this process ends it
    // at once; a kernel that hung in a worker was killed with its worker).
    if (code == exit_code::kRuntimeError) break;
  }
  if (a.report_to_coordinator) {
    sendStatsToCoordinator();
    return worst;
  }
  if (!a.junit.empty()) {
    writeWholeFile(a.junit, junitXml(results), "the JUnit XML");
    fmt::print("# JUnit XML: {}\n", a.junit);
  }
  if (!a.html.empty()) writeHtml(a.html, kept, "ulpcheck run");
  if (reportJsonError(json.get())) worst = exit_code::kRuntimeError;
  if (worst == exit_code::kRuntimeError || worst == exit_code::kHang) return worst;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (layout.workers > 1) {
    fmt::print("\n# {} (summed over {} workers)\n", formatOracleCounts(oracle, exec), layout.workers);
    fmt::print("# wall {:.1f} s; summed over the workers: {}\n", seconds, formatPhaseTimes(phases, -1));
  } else {
    fmt::print("\n# {}\n", formatOracleCounts(processOracleCounts(), exec));
    if (const int at_once = concurrentCases(a); at_once > 1)
      fmt::print("# wall {:.1f} s; summed over the {} cases checked at once: {}\n", seconds, at_once,
                 formatPhaseTimes(phaseSeconds(), -1));
    else fmt::print("# {}\n", formatPhaseTimes(phaseSeconds(), seconds));
  }
  for (const auto& [property, ops_without] : inapplicable)
    if (size_t(ops_without) == ops.size()) {
      fmt::print("\n# NOTHING JUDGED: --property {} applies to no kernel selected in this run\n", property);
      if (severity(exit_code::kNothingJudged) > severity(worst)) worst = exit_code::kNothingJudged;
    }
  return worst;
}

struct ReproArgs {
  std::string case_text, kernel, json;
  std::vector<std::string> properties;
  int repeat = 0;  // 0: once, or as often as a corpus file's `# repeat:` says
  double case_timeout = 300;
  bool perturb_schedule = false;
  OracleSettings oracle;  // --oracle, --judge
};

int cmdRepro(const ReproArgs& args) {
  sayWhenInterrupted();
  ReproArgs a = args;
  const std::string& text = a.case_text;
  CaseSpec spec;
  std::error_code ec;
  if (std::filesystem::is_regular_file(text, ec)) {
    // Under a corpus (<op>/<property>/<kind>/file.case) the folders must agree
    // with the case; a case file copied anywhere else replays as it is.
    const std::filesystem::path p = std::filesystem::absolute(text, ec);
    const std::string op_folder = p.parent_path().parent_path().parent_path().filename().string();
    const bool in_corpus = findOp(op_folder) && findProperty(p.parent_path().parent_path().filename().string());
    const CorpusEntry entry = readCorpusFile(text, in_corpus ? op_folder : "",
                                             in_corpus ? p.parent_path().parent_path().filename().string() : "");
    spec = entry.spec;
    if (a.repeat == 0) a.repeat = entry.repeat;
  } else if (text.find('=') == std::string::npos && text.find(".case") != std::string::npos) {
    throw CaseParseError(fmt::format("{}: no such case file", text));
  } else {
    spec = parseCaseString(text);
  }
  a.repeat = std::max(a.repeat, 1);
  if (!(a.case_timeout > 0)) throw UsageError(fmt::format("--case-timeout {:g}: give seconds > 0", a.case_timeout));
  if (!findOp(spec.op)) throw CaseParseError(fmt::format("unknown op '{}' (ops: {})", spec.op, opNames()));
  if (!a.kernel.empty()) spec.kernel = a.kernel;
  const KernelInfo* k = OpAdapter::findKernel(spec.op, spec.kernel);
  if (!k)
    throw CaseParseError(fmt::format("op '{}' has no kernel variant '{}' (see `ulpcheck list`)", spec.op, spec.kernel));
  std::unique_ptr<JsonlWriter> json = openJsonLines(a.json);
  ExecContext exec = execContext(backendName(k->backend), a.perturb_schedule, a.oracle);
  exec.determinism_repeats = kThoroughDeterminismRepeats;  // one case: afford the runs a race needs to show
  exec.call_timeout_s = a.case_timeout;  // a kernel in a worker that runs longer is killed: its case fails
  fmt::print("# case: {}{}\n", toCaseString(spec),
             a.repeat > 1 ? fmt::format(" ({} runs, each afresh)", a.repeat) : "");
  const auto t0 = std::chrono::steady_clock::now();
  bool failed = false, hung = false;
  std::vector<std::string> unjudged;  // properties that apply (or were named) and judged nothing
  // Each property said (and its JSON record written) as soon as it is final.
  runCase(spec, a.properties, exec, a.repeat, [&](const ReplayResult& r) {
    const Outcome& o = r.outcome;
    // With --repeat: how many runs failed, then the first failure (or the last pass) in full.
    const std::string tally = a.repeat > 1 ? fmt::format("failed {} of {} runs; ", r.failed, r.runs) : "";
    fmt::print("\n{:<18} {:<8} {}{}\n", r.property, verdictName(r.failed ? Verdict::Fail : o.verdict), tally,
               o.summary);
    fmt::print("{}{}", formatStats(o), formatFindings(o));
    failed |= r.failed > 0;
    hung |= r.hung > 0;
    if (!r.failed && !o.judged()) unjudged.push_back(r.property);
    if (json)
      json->write({{"type", "repro"},
                   {"case", toJson(spec)},
                   {"property", r.property},
                   {"runs", r.runs},
                   {"failed_runs", r.failed},
                   {"outcome", toJson(o)}});
    std::fflush(stdout);
  });
  fmt::print(
      "\n# {}\n",
      formatPhaseTimes(phaseSeconds(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
  if (reportJsonError(json.get())) return exit_code::kRuntimeError;
  if (hung) return exit_code::kHang;
  if (failed) return exit_code::kPropertyFailed;
  // A repro that judged nothing is not a pass, as a run's property that judged no case is not.
  if (!unjudged.empty()) {
    fmt::print("# NOTHING JUDGED: {} (skipped, inconclusive or not applicable)\n", fmt::join(unjudged, ", "));
    return exit_code::kNothingJudged;
  }
  return exit_code::kOk;
}

struct MutantsArgs {
  std::string backend = "auto", tier = "default", json, html, seed = "0x6d7574";
  std::vector<std::string> mutants;
  double time_per_mutant = 20, shrink_budget = 10;
  int64_t cases_per_mutant = 0;  // > 0: each campaign's cases; with it, no time limit unless --time-per-mutant is given
  bool time_given = false;
  bool no_controls = false, perturb_schedule = false;
  OracleSettings oracle;  // --oracle, --judge
};

int cmdMutants(const MutantsArgs& a, bool in_process) {
  if (!(a.time_per_mutant > 0))
    throw UsageError(fmt::format("--time-per-mutant {:g}: give seconds > 0", a.time_per_mutant));
  if (a.cases_per_mutant < 0)
    throw UsageError(fmt::format("--cases-per-mutant {}: give 1 or more", a.cases_per_mutant));
  if (!(a.shrink_budget >= 0))
    throw UsageError(fmt::format("--shrink-budget {:g}: give seconds >= 0", a.shrink_budget));
  const ExecContext exec = execContext(a.backend, a.perturb_schedule, a.oracle);
  // The matrix's variants run in a worker process where their op has doors
  // (kernels/door.h), as plugins do (kernels/plugin/remote.h): a mutant that
  // faults the GPU (a sticky CUDA error) or hangs is a failing case of that
  // mutant, and the rest of the matrix still runs. A multi-rank op's (no
  // doors) run in this process.
  int in_worker = 0;
  if (!in_process)
    for (const KernelInfo& k : kernelCatalog())
      if (k.backend == exec.backend && !k.remote && remote::canRunInWorker(k.op)) {
        remote::runInWorker(k.op, k.name);
        ++in_worker;
      }
  KillMatrixOptions o;
  o.controls = !a.no_controls;
  o.cli = std::filesystem::read_symlink("/proc/self/exe").string();  // kills replay through this very binary
  o.backend = exec.backend;
  o.mutants = a.mutants;
  // A bound in cases makes the matrix a function of the seed (a reference
  // to compare two builds by); a bound in seconds depends on the machine.
  o.seconds_per_mutant = a.cases_per_mutant > 0 && !a.time_given ? 0 : a.time_per_mutant;
  if (a.cases_per_mutant > 0) o.max_cases = a.cases_per_mutant;
  o.shrink_budget_s = a.shrink_budget;
  o.seed = parseSeed(a.seed);
  o.tier = parseTier(a.tier);
  checkOutputFiles({{"--html", a.html}});
  std::unique_ptr<JsonlWriter> json = openJsonLines(a.json);
  std::vector<nlohmann::json> kept;  // the matrix's records, for --html
  if (!a.html.empty()) {
    auto keep = [&kept](const nlohmann::json& r) {
      if (r.value("type", "") == "mutant" || r.value("type", "") == "control") kept.push_back(r);
    };
    if (json) json->alsoKeep(keep);
    else json = JsonlWriter::keeping(keep);
  }
  o.json = json.get();
  o.log = [](const std::string& line) {
    fmt::print("# {}\n", line);
    std::fflush(stdout);
  };
  const std::string bound = o.seconds_per_mutant > 0 && a.cases_per_mutant > 0
                                ? fmt::format("{} generated cases or {:g} s each", o.max_cases, o.seconds_per_mutant)
                            : o.seconds_per_mutant > 0
                                ? fmt::format("{:g} s of generated cases each", o.seconds_per_mutant)
                                : fmt::format("{} generated cases each", o.max_cases);
  fmt::print("# kill matrix: {} mutants{}, {}, seed {:#x}, tier {}{}; {}\n", backendName(exec.backend),
             o.controls ? " and correct variants" : "", bound, o.seed, a.tier,
             a.perturb_schedule ? ", schedule perturbed" : "",
             in_worker ? fmt::format("{} rmsnorm/layernorm variants in a worker process", in_worker)
                       : std::string("every variant in this process"));
  const KillMatrix m = runKillMatrix(o, exec);
  fmt::print("\n{}", formatKillMatrix(m));
  if (!a.html.empty()) writeHtml(a.html, kept, "ulpcheck kill matrix");
  if (reportJsonError(json.get())) return exit_code::kRuntimeError;
  return m.exitCode();
}

/// How printed repro commands name this program: `ulpcheck` where that is
/// this binary on PATH (an installed one), else its absolute path, so the
/// command works when pasted (the README's set-up leaves build/ulpcheck off PATH).
std::string thisProgram() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "ulpcheck";
  if (const char* path = std::getenv("PATH"))
    for (std::string_view rest = path; !rest.empty();) {
      const size_t colon = rest.find(':');
      const std::string dir(rest.substr(0, colon));
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
      if (!dir.empty() && fs::equivalent(fs::path(dir) / "ulpcheck", exe, ec)) return "ulpcheck";
    }
  const std::string s = exe.string();
  if (s.find_first_of(" '\"\\$`!*?;&|<>()") == std::string::npos) return s;
  std::string quoted = "'";
  for (char c : s) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// ---------------------------------------------------------------------------
// The command line: one function per subcommand defines its flags.

constexpr const char* kPluginHelp = "load a kernel plugin (a shared library; include/ulpcheck/plugin.h); repeatable";
constexpr const char* kPythonHelp =
    "load Python kernels: a file registering variants with the ulpcheck package (python/ulpcheck); repeatable";
constexpr const char* kInProcessHelp =
    "run plugin kernels in this process, not in a worker (for a debugger: a fault then ends the run)";
constexpr const char* kPerturbHelp =
    "run every kernel beside a random load on another stream, so repeated runs meet different CTA schedules";

/// The kernels from outside ulpcheck a command loads (include/ulpcheck/plugin.h,
/// python/ulpcheck): they add their variants to every subcommand.
struct KernelSources {
  std::vector<std::string> plugin_paths, python_files;
  bool in_process = false;  // run plugin kernels in this process, not in a worker
};

struct WorkerArgs {
  int fd = -1;
  bool probe = false;
};

struct ReportArgs {
  std::vector<std::string> inputs;
  std::string output, title = "ulpcheck report";
};

void addListCommand(CLI::App& app, KernelSources& k) {
  CLI::App* list = app.add_subcommand("list", "list ops, kernel variants (with contracts) and properties");
  list->add_option("--plugin", k.plugin_paths, kPluginHelp);
  list->add_option("--python", k.python_files, kPythonHelp);
}

void addWorkerCommand(CLI::App& app, WorkerArgs& w, KernelSources& k) {
  CLI::App* worker = app.add_subcommand("worker", "serve kernel calls for a coordinator (internal)");
  worker->group("");  // not listed: ulpcheck starts its own workers
  worker->add_option("--fd", w.fd, "the socket to the coordinator");
  worker->add_flag("--probe", w.probe, "only load the plugins and exit (remote::probePlugin)");
  worker->add_option("--plugin", k.plugin_paths, kPluginHelp);
}

CLI::App* addRunCommand(CLI::App& app, RunArgs& ra, KernelSources& k) {
  CLI::App* run = app.add_subcommand("run", "replay the regression corpus, then check generated cases");
  run->add_option("--op", ra.op, "op to test (see `ulpcheck list`), or all")->capture_default_str();
  run->add_option("--kernel", ra.kernels, "kernel variant(s); default: every correct variant of the backend");
  run->add_option("--property", ra.properties, "propert(y|ies) to check; default: all");
  run->add_option("--dtype", ra.dtypes, "fp32, fp16, bf16; default: all");
  run->add_option("--cases", ra.cases,
                  "generated cases per op, or auto: until every kernel x property x dtype has --per-cell cases (at "
                  "most 2000)")
      ->capture_default_str();
  run->add_option("--per-cell", ra.per_cell,
                  "with --cases auto: cases for every kernel x property x dtype (default 50 on the GPU, 20 on the "
                  "host); with --cases N: stop before N once every cell has this many");
  run->add_option("--gpus", ra.gpus, "GPUs to use, one worker process each (cuda backend): a count, or all")
      ->capture_default_str();
  run->add_option("--workers", ra.workers,
                  "worker processes sharing the campaign (default on the GPU: up to 2 per GPU used, one per 8 host "
                  "cores, 1 per GPU for the smoke tier or --in-process; on the host 1, where N splits the CPU)");
  run->add_option("--concurrent-cases", ra.concurrent_cases,
                  "cases each process checks at once, each on its own thread and CUDA stream (results are those of "
                  "one at a time); auto: one per core of the process's share, at most 8")
      ->capture_default_str();
  run->add_flag("--report-to-coordinator", ra.report_to_coordinator,
                "be a worker of a coordinated run: report on stdout in tagged lines (internal)")
      ->group("");
  run->add_option("--shard", ra.shard,
                  "i/n: run the i-th of n disjoint shares of the campaign (CI runners; together they are the whole)");
  run->add_option("--seed", ra.seed, "generation seed (decimal or 0x hex); default: random, printed");
  run->add_option("--time-budget", ra.time_budget, "stop generating after this many seconds (0: no limit)");
  run->add_option("--tier", ra.tier, "smoke | default | nightly (largest shapes)")->capture_default_str();
  run->add_option("--backend", ra.backend, "auto | host | cuda")->capture_default_str();
  run->add_option("--json", ra.json, "stream every result to this JSON-lines file");
  run->add_option("--html", ra.html, "write the HTML report of the run (one self-contained file)");
  run->add_option("--junit", ra.junit,
                  "write JUnit XML (a testcase per kernel x property x dtype, failures with their repro) for CI");
  run->add_option("--corpus", ra.corpus, "corpus root (default: the repository's corpora/)");
  run->add_option("--shrink-budget", ra.shrink_budget, "seconds to spend shrinking each failure")
      ->capture_default_str();
  run->add_option("--case-timeout", ra.case_timeout, "seconds before a case counts as hung")->capture_default_str();
  run->add_flag("--no-shrink", ra.no_shrink, "report failures unshrunk");
  run->add_flag("--no-corpus", ra.no_corpus, "do not replay the regression corpus");
  run->add_flag("--no-save", ra.no_save, "do not write failing cases to the corpus");
  run->add_flag("--quiet", ra.quiet, "no progress lines");
  run->add_flag("--perturb-schedule", ra.perturb_schedule, kPerturbHelp);
  run->add_option("--plugin", k.plugin_paths, kPluginHelp);
  run->add_option("--python", k.python_files, kPythonHelp);
  run->add_flag("--in-process", k.in_process, kInProcessHelp);
  return run;
}

CLI::App* addReproCommand(CLI::App& app, ReproArgs& pa, KernelSources& k) {
  CLI::App* repro = app.add_subcommand("repro", "rerun exactly one case and print its worst elements");
  repro->add_option("case", pa.case_text, "a case string (quoted) or a corpus .case file")->required();
  repro->add_option("--property", pa.properties, "propert(y|ies) to check; default: all");
  repro->add_option("--kernel", pa.kernel, "run the case on this variant instead of the one it names");
  repro->add_option("--json", pa.json, "write the results to this JSON-lines file");
  repro
      ->add_option("--repeat", pa.repeat,
                   "run the case this many times, each afresh, and count the failing runs (for races: a failure "
                   "that shows on some runs only); exit 1 if any run failed (default: 1, or a corpus file's "
                   "`# repeat:`)")
      ->check(CLI::Validator([](std::string& v) { return std::atoi(v.c_str()) >= 1 ? "" : "give 1 or more runs"; },
                             "RUNS >= 1"));
  repro->add_flag("--perturb-schedule", pa.perturb_schedule, kPerturbHelp);
  repro->add_option("--plugin", k.plugin_paths, kPluginHelp);
  repro->add_option("--python", k.python_files, kPythonHelp);
  repro->add_flag("--in-process", k.in_process, kInProcessHelp);
  repro
      ->add_option("--case-timeout", pa.case_timeout,
                   "seconds a kernel call in a worker may take before it counts as hung (the case fails)")
      ->capture_default_str();
  return repro;
}

/// `time_per_mutant`: the option, to tell whether it was given (MutantsArgs::time_given).
CLI::App* addMutantsCommand(CLI::App& app, MutantsArgs& ma, KernelSources& k, CLI::Option*& time_per_mutant) {
  CLI::App* mutants = app.add_subcommand(
      "mutants", "run every mutant (a variant reproducing a real bug) under all properties; print the kill matrix");
  mutants->add_option("--mutant", ma.mutants, "mutant(s) to run; default: every mutant of the backend");
  time_per_mutant = mutants
                        ->add_option("--time-per-mutant", ma.time_per_mutant, "seconds of generated cases per mutant")
                        ->capture_default_str();
  mutants->add_option("--cases-per-mutant", ma.cases_per_mutant,
                      "generated cases per mutant and control (a matrix the seed alone decides; no time limit unless "
                      "--time-per-mutant is given too)");
  mutants->add_option("--seed", ma.seed, "generation seed (decimal or 0x hex)")->capture_default_str();
  mutants->add_option("--tier", ma.tier, "smoke | default | nightly")->capture_default_str();
  mutants->add_option("--backend", ma.backend, "auto | host | cuda")->capture_default_str();
  mutants->add_option("--shrink-budget", ma.shrink_budget, "seconds to spend shrinking each kill")
      ->capture_default_str();
  mutants->add_option("--json", ma.json, "write the matrix to this JSON-lines file");
  mutants->add_option("--html", ma.html, "write the matrix as an HTML page (one self-contained file)");
  mutants->add_flag("--no-controls", ma.no_controls,
                    "skip the controls (the correct variants, run the same way to count false alarms)");
  mutants->add_flag("--perturb-schedule", ma.perturb_schedule, kPerturbHelp);
  mutants->add_option("--plugin", k.plugin_paths, kPluginHelp);
  mutants->add_option("--python", k.python_files, kPythonHelp);
  mutants->add_flag("--in-process", k.in_process,
                    "run the mutants and controls in this process, not in a worker (a sticky GPU fault then ends the "
                    "matrix)");
  return mutants;
}

void addReportCommand(CLI::App& app, ReportArgs& r) {
  CLI::App* report = app.add_subcommand("report", "turn the JSON lines of runs or kill matrices into an HTML report");
  report->add_option("jsonl", r.inputs, "JSON-lines file(s) written by run --json or mutants --json")->required();
  report->add_option("-o,--output", r.output, "the HTML file to write")->required();
  report->add_option("--title", r.title, "the page's title")->capture_default_str();
}

/// --oracle and --judge, on the commands that judge cases (oracleSettings reads them).
void addOracleOptions(std::initializer_list<CLI::App*> commands, std::string& oracle_text, std::string& judge_text) {
  for (CLI::App* sub : commands) {
    sub->add_option("--oracle", oracle_text,
                    "fast (default: double words with certified bounds, MPFR where they do not decide), mpfr (MPFR "
                    "only), or audit (both, failing on any difference; GPU and host judges compared too); also "
                    "$ULPCHECK_ORACLE");
    sub->add_option("--judge", judge_text,
                    "where accuracy is judged: auto (default: on the GPU for cases of 2^20 elements and more that its "
                    "oracle models), host, or gpu (every case it models); also $ULPCHECK_JUDGE");
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit a write fails with EFBIG (reported, exit code 4)
  // instead of the signal ending the process with nothing said.
  std::signal(SIGXFSZ, SIG_IGN);
  workers::dieWithCoordinator();
  setCliProgram(thisProgram());
  CLI::App app{"ulpcheck: verifies GPU numerical kernels element by element against an MPFR oracle"};
  app.footer(
      "exit codes: 0 all passed, 1 a property failed, 2 bad arguments, 3 malformed case, corpus or JSON-lines file,\n"
      "            4 a fault that ended the run (a sticky GPU error), or a report or JSON-lines file that could not\n"
      "              be written, 5 a case hung (a kernel in a worker is killed and the run goes on; one in this\n"
      "              process ends it), 6 nothing matched the selection,\n"
      "            7 judged too little: a property that applies judged no case (all skipped or inconclusive), a\n"
      "              cell of the plan judged fewer cases than its target (BELOW TARGET), a repro that judged\n"
      "              nothing, or --property names one that applies to nothing selected");
  app.require_subcommand(1);

  KernelSources sources;
  WorkerArgs wa;
  RunArgs ra;
  ReproArgs pa;
  MutantsArgs ma;
  ReportArgs report;
  std::string oracle_text, judge_text;
  CLI::Option* time_per_mutant = nullptr;
  addListCommand(app, sources);
  addWorkerCommand(app, wa, sources);
  CLI::App* run = addRunCommand(app, ra, sources);
  CLI::App* repro = addReproCommand(app, pa, sources);
  CLI::App* mutants = addMutantsCommand(app, ma, sources, time_per_mutant);
  addReportCommand(app, report);
  addOracleOptions({run, repro, mutants}, oracle_text, judge_text);

  useCtestAllocatedGpus();  // a ctest with RESOURCE_GROUPS: only its own GPUs
  for (int i = 1; i < argc; ++i) ra.args.emplace_back(argv[i]);
  // A misspelled command: CLI11 alone would say only that one is required.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) known |= sub->check_name(argv[1]);
    if (!known) {
      fmt::print(stderr, "ulpcheck: '{}' is not a command (list, run, repro, mutants, report; see ulpcheck --help)\n",
                 argv[1]);
      return exit_code::kUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? exit_code::kOk : exit_code::kUsage;
  }

  try {
    if (const char* limit = std::getenv("ULPCHECK_MAX_MEMORY"); limit && *limit && !parseMemorySize(limit))
      throw UsageError(fmt::format("ULPCHECK_MAX_MEMORY='{}': give the host memory ulpcheck may use in bytes or with "
                                   "a K, M, G or T suffix (e.g. 64G)",
                                   limit));
    ra.oracle = pa.oracle = ma.oracle = oracleSettings(oracle_text, judge_text);
    if (app.got_subcommand("worker")) {  // a worker process: the plugins' kernels run here, in-process
      if (wa.probe) {  // the coordinator learns from the exit status and kProbeLoaded; its own load says what is
                       // wrong
        try {
          for (const auto& path : sources.plugin_paths) loadPlugin(path);
        } catch (const PluginError&) {
          return exit_code::kUsage;
        }
        std::fputs(remote::kProbeLoaded, stdout);
        return exit_code::kOk;
      }
      if (wa.fd < 0) throw UsageError("worker: --fd is required");
      for (const auto& path : sources.plugin_paths) loadPlugin(path);
      return remote::serve(wa.fd);
    }
    std::vector<std::string> loaded;
    for (const auto& path : sources.plugin_paths) {
      // A library that crashes as it loads ends a child, not this process (a
      // campaign worker's coordinator has probed the same file already).
      if (!ra.report_to_coordinator) remote::probePlugin(path);
      const LoadedPlugin& p = loadPlugin(path);
      fmt::print("# plugin {}: {} ({} variants: {}), sha256 {}{}\n", p.path, p.name, p.variants.size(),
                 fmt::join(p.variants, ", "), p.sha256, sources.in_process ? "; run in this process" : "");
      loaded.push_back(p.path);
      // Unless asked not to, the plugin's kernels run in a worker process:
      // a crash or a hang in one is a failing case, not the end of the run.
      if (!sources.in_process)
        for (const KernelInfo& k : kernelCatalog())
          if (k.plugin_path == p.path) remote::runInWorker(k.op, k.name);
    }
    remote::setWorkerPlugins(loaded);
    if (!sources.python_files.empty()) {
      const auto names = remote::registerPythonVariants(sources.python_files);
      fmt::print("# python {}: {} variants ({}), in a Python worker\n", fmt::join(sources.python_files, ", "),
                 names.size(), fmt::join(names, ", "));
    }
    if (app.got_subcommand("report")) {
      checkOutputFiles({{"-o", report.output}});
      for (const auto& input : report.inputs) {
        std::error_code ec;
        if (std::filesystem::equivalent(input, report.output, ec))
          throw UsageError(
              fmt::format("-o {}: is one of the JSON-lines files to report (it would be overwritten)", report.output));
      }
      std::vector<nlohmann::json> records;
      for (const auto& path : report.inputs) {
        auto more = readJsonLines(path);
        for (const auto& r : more)
          if (r.value("type", "") == "input_note") fmt::print("# note: {}\n", r.value("text", ""));
        records.insert(records.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
      }
      writeHtml(report.output, records, report.title);
      return exit_code::kOk;
    }
    if (app.got_subcommand("list")) return cmdList();
    if (app.got_subcommand("mutants")) {
      ma.time_given = time_per_mutant->count() > 0;
      return cmdMutants(ma, sources.in_process);
    }
    ra.in_process = sources.in_process;
    if (app.got_subcommand("run")) return cmdRun(ra);
    if (app.got_subcommand("repro")) return cmdRepro(pa);
  } catch (const UsageError& e) {
    fmt::print(stderr, "ulpcheck: {}\n", e.what());
    return exit_code::kUsage;
  } catch (const PluginError& e) {
    fmt::print(stderr, "ulpcheck: plugin: {}\n", e.what());
    return exit_code::kUsage;
  } catch (const CaseNotRunnableHere& e) {
    fmt::print(stderr, "ulpcheck: the case cannot run here: {}\n", e.what());
    return exit_code::kNothingRan;
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "ulpcheck: {}\n", e.what());
    return exit_code::kUsage;
  } catch (const CaseParseError& e) {
    fmt::print(stderr, "ulpcheck: malformed case: {}\n", e.what());
    return exit_code::kBadCase;
  } catch (const CorpusError& e) {
    fmt::print(stderr, "ulpcheck: malformed corpus file: {}\n", e.what());
    return exit_code::kBadCase;
  } catch (const ReportInputError& e) {
    fmt::print(stderr, "ulpcheck: cannot report: {}\n", e.what());
    return exit_code::kBadCase;
  } catch (const CudaError& e) {
    fmt::print(stderr, "ulpcheck: GPU error: {}\n", e.what());
    return exit_code::kRuntimeError;
  } catch (const OutOfMemory& e) {
    fmt::print(stderr, "ulpcheck: out of memory: {}\n", e.what());
    return exit_code::kRuntimeError;
  } catch (const std::exception& e) {
    fmt::print(stderr, "ulpcheck: error: {}\n", e.what());
    return exit_code::kRuntimeError;
  }
  return exit_code::kUsage;
}
