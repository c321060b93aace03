// ulpcheck: property-based verification of GPU numerical kernels against an
// MPFR oracle. This file is the command line: each subcommand's flags, their
// text turned into a request (harness/cli/options.h), and the call of the
// command that carries it out (harness/runner/run.h, repro.h, mutants.h;
// harness/report/catalog.h, html.h).
#include <algorithm>
#include <bit>
#include <csignal>
#include <cstdio>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/ctest_gpus.h"
#include "core/parallel.h"
#include "harness/cli/options.h"
#include "harness/report/catalog.h"
#include "harness/report/html.h"
#include "harness/runner/corpus.h"
#include "harness/runner/exit_codes.h"
#include "harness/runner/kernel_sources.h"
#include "harness/runner/mutants.h"
#include "harness/runner/repro.h"
#include "harness/runner/run.h"
#include "harness/runner/workers.h"
#include "kernels/plugin/plugin_loader.h"
#include "kernels/plugin/remote.h"
#include "oracles/oracle_mode.h"

using namespace ulpcheck;
using namespace ulpcheck::cli;

namespace {

constexpr int kAutoWorkers = std::numeric_limits<int>::min();  // --workers not given

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
  bool keep_going = false;
  bool report_to_coordinator = false;  // a worker of a coordinated run (harness/runner/workers.h)
  bool in_process = false;             // plugin kernels in this process (--in-process)
  OracleSettings oracle;               // --oracle, --judge
  std::vector<std::string> args;       // the process's arguments after the program name: workers get them again
};

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

/// A campaign's options from a run's arguments (its op, seed and time budget: RunRequest's).
CampaignOptions campaignOptions(const RunArgs& a, const ExecContext& exec) {
  CampaignOptions o;
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
  o.shrink_budget_s = a.shrink_budget;
  o.case_timeout_s = a.case_timeout;
  o.tier = parseTier(a.tier);
  o.shrink = !a.no_shrink;
  o.keep_going = a.keep_going;
  o.replay_corpus = !a.no_corpus;
  o.save_failures = !a.no_save;
  o.corpus_dir = a.corpus;
  return o;
}

/// The worker layout of a run's arguments (one process for a worker itself).
WorkerLayout runLayout(const RunArgs& a, const ExecContext& exec) {
  if (a.report_to_coordinator) return WorkerLayout{};  // a worker runs its share itself
  LayoutRequest r;
  if (a.workers != kAutoWorkers) r.workers = a.workers;
  if (a.gpus != "all") r.gpus = parseCount("--gpus", a.gpus);
  return workerLayout(r, exec.backend);
}

int cmdRun(const RunArgs& a) {
  if (!a.report_to_coordinator) sayWhenInterrupted();  // a worker dies with its coordinator, which says it
  RunRequest run;
  run.ops = opsToRun(a.op, a.kernels);
  run.all_ops = a.op == "all";
  checkCorpusOption(a.corpus);
  if (!a.report_to_coordinator) checkOutputFiles({{"--html", a.html}, {"--junit", a.junit}});
  const ExecContext exec = execContext(a.backend, a.perturb_schedule, a.oracle, a.report_to_coordinator);
  run.layout = runLayout(a, exec);
  run.campaign = campaignOptions(a, exec);
  if (!a.seed.empty()) run.seed = parseSeed(a.seed);
  run.time_budget_s = a.time_budget;
  run.args = a.args;
  run.quiet = a.quiet;
  run.to_coordinator = a.report_to_coordinator;
  if (!a.report_to_coordinator) {
    run.json = a.json;
    run.junit = a.junit;
    run.html = a.html;
  }
  return runOps(run, exec);
}

struct ReproArgs {
  std::string case_text, kernel, json;
  std::vector<std::string> properties;
  int repeat = 0;  // 0: once, or as often as a corpus file's `# repeat:` says
  double case_timeout = 300;
  bool perturb_schedule = false;
  OracleSettings oracle;  // --oracle, --judge
};

int cmdRepro(const ReproArgs& a) {
  sayWhenInterrupted();
  const ReproCase c = readReproCase(a.case_text, a.kernel);
  if (!(a.case_timeout > 0)) throw UsageError(fmt::format("--case-timeout {:g}: give seconds > 0", a.case_timeout));
  checkOutputFiles({{"--json", a.json}});
  const ExecContext exec = execContext(backendName(c.kernel->backend), a.perturb_schedule, a.oracle);
  return reproCase(c, ReproRequest{a.properties, a.repeat, a.case_timeout, a.json}, exec);
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
  MutantsRequest m;
  KillMatrixOptions& o = m.matrix;
  o.controls = !a.no_controls;
  o.mutants = a.mutants;
  // A bound in cases makes the matrix a function of the seed (a reference
  // to compare two builds by); a bound in seconds depends on the machine.
  o.seconds_per_mutant = a.cases_per_mutant > 0 && !a.time_given ? 0 : a.time_per_mutant;
  if (a.cases_per_mutant > 0) o.max_cases = a.cases_per_mutant;
  o.shrink_budget_s = a.shrink_budget;
  o.seed = parseSeed(a.seed);
  o.tier = parseTier(a.tier);
  m.cases_bounded = a.cases_per_mutant > 0;
  m.in_process = in_process;
  m.json = a.json;
  m.html = a.html;
  return runMutants(std::move(m), exec);
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
                  "worker processes sharing the campaign (default on the GPU: one per GPU used; on the host 1, where N "
                  "splits the CPU)");
  run->add_option("--concurrent-cases", ra.concurrent_cases,
                  fmt::format("cases each process checks at once, each on its own thread and CUDA stream (results "
                              "are those of one at a time); auto: one per core of the process's share, at most {}",
                              kMaxConcurrentCases))
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
  run->add_flag("--keep-going", ra.keep_going,
                "go on checking a kernel x property after its first failure: every failing case is recorded (the "
                "first shrunk and saved, the others as found), so a known defect does not hide the rest");
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
    static_assert(std::has_single_bit(uint64_t(kGpuJudgeMinElements)), "--judge's help gives it as a power of two");
    sub->add_option(
        "--judge", judge_text,
        fmt::format("where accuracy is judged: auto (default: on the GPU for cases of 2^{} elements and "
                    "more that its oracle models), host, or gpu (every case it models); also $ULPCHECK_JUDGE",
                    std::countr_zero(uint64_t(kGpuJudgeMinElements))));
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
  app.add_subcommand("version", "print ulpcheck's version and the protocol its Python package speaks");
  addOracleOptions({run, repro, mutants}, oracle_text, judge_text);

  useCtestAllocatedGpus();  // a ctest with RESOURCE_GROUPS: only its own GPUs
  for (int i = 1; i < argc; ++i) ra.args.emplace_back(argv[i]);
  // A misspelled command: CLI11 alone would say only that one is required.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) known |= sub->check_name(argv[1]);
    if (!known) {
      fmt::print(stderr,
                 "ulpcheck: '{}' is not a command (list, run, repro, mutants, report, version; see ulpcheck --help)\n",
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
    checkMemoryLimitVariable();
    ra.oracle = pa.oracle = ma.oracle = oracleSettings(oracle_text, judge_text);
    // A worker process: the plugins' kernels run here, in-process.
    if (app.got_subcommand("worker")) return serveKernelCalls(wa.fd, wa.probe, sources.plugin_paths);
    if (app.got_subcommand("version")) {
      // The pip package's pytest plugin reads this line and refuses a CLI of another protocol.
      fmt::print("ulpcheck {} python-protocol {}\n", ULPCHECK_VERSION, remote::kPythonProtocol);
      return exit_code::kOk;
    }
    // A campaign worker's coordinator has probed the plugins already.
    loadKernelSources(sources, /*probed=*/ra.report_to_coordinator);
    if (app.got_subcommand("report")) {
      reportJsonLinesFiles(report.inputs, report.output, report.title);
      return exit_code::kOk;
    }
    if (app.got_subcommand("list")) {
      fmt::print("{}", formatCatalog());
      return exit_code::kOk;
    }
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
