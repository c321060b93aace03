// The engine's run of one campaign: it plans (plan.h), replays the corpus,
// schedules the plan's cases (schedule.h), runs each (run_case.h), judges
// (judge.h), shrinks (shrink.h) and records (record.h) its failures, and
// tops up short cells (top_up.h). This file only joins the stages.
#include "harness/runner/campaign.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "harness/runner/corpus.h"
#include "harness/runner/judge.h"
#include "harness/runner/plan.h"
#include "harness/runner/schedule.h"
#include "harness/runner/selection.h"
#include "harness/runner/shrink.h"
#include "harness/runner/top_up.h"
#include "harness/runner/watchdog.h"

namespace ulpcheck {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A check of a kernel in a worker may make several calls, each allowed
// --case-timeout before the worker is killed: the watchdog allows it this
// many timeouts before it ends the run.
constexpr double kRemoteCheckTimeouts = 4;
// Faults recorded per kernel (more are counted in the table and logged).
constexpr int kMaxRecordedFaults = 5;

/// A regression replay: a corpus case on one selected kernel.
struct Replay {
  const CorpusEntry* entry;
  const Property* property;
  CaseSpec spec;
};

/// One generated case's checks. It runs in two steps: `execute` checks its
/// properties (on any thread, when cases run at once), `commit` takes the
/// outcomes in the sequence's order (on the campaign's thread): tallies,
/// records, failures, shrinking. A check that an earlier case's failure makes
/// moot is dropped there, so the results are those of one case at a time.
struct CaseChecks {
  int64_t index = 0;
  std::optional<rc::Shrinkable<CaseSpec>> shrinkable;
  CaseSpec spec;
  struct Check {
    size_t property;  // in Selection::properties
    Outcome outcome;
    double seconds = 0;
  };
  std::vector<Check> checks;
  std::exception_ptr error;  // raised by a check (named by error_while): rethrown when committed
  std::string error_while;
  bool top_up = false;  // drawn for a short cell, not case `index` of the seed's sequence
};

/// `exec` with calls into worker processes limited to `seconds`: a kernel in
/// a worker that hangs is killed after --case-timeout and its case fails;
/// the watchdog, which can only end the whole run, then allows such a check
/// the few calls it may still make.
ExecContext withCallTimeout(ExecContext exec, double seconds) {
  exec.call_timeout_s = seconds;
  return exec;
}

class CampaignRun {
 public:
  CampaignRun(const CampaignOptions& o, const ExecContext& exec);
  CampaignResult run();

 private:
  std::vector<Replay> regressionReplays();
  void makeThePlan();
  void sayThePlan();
  /// Case i of the seed's sequence.
  rc::Shrinkable<CaseSpec> draw(int64_t i) const;
  void replayCorpus();
  void runPlan();
  void topUp();
  void execute(CaseChecks& run, size_t first);
  bool commit(CaseChecks& run);
  bool runGenerated(int64_t i, const rc::Shrinkable<CaseSpec>& shrinkable, bool top_up);
  void recordFailure(const CaseChecks& run, const Property& p, const Outcome& out, int fault_number);
  /// Starts the watchdog on the calling thread's check; returns its repro.
  std::string enter(const CaseSpec& spec, const std::string& property);
  bool doneWith(const std::string& kernel, const std::string& property);
  /// The time budget of generated cases is spent.
  bool budgetSpent() const { return o_.time_budget_s > 0 && since(gen_t0_) > o_.time_budget_s; }
  bool outOfTime();
  void advance();
  void log(const std::string& line) const {
    if (o_.log) o_.log(line);
  }
  void warn(const std::string& line) const {
    if (o_.warn) o_.warn(line);
    else log(line);
  }

  const CampaignOptions& o_;
  ExecContext exec_;  // the caller's, with the campaign's call timeout
  const Clock::time_point t0_ = Clock::now();
  const Selection sel_;
  const std::string corpus_dir_;
  CampaignResult result_;
  Tally tally_;
  std::optional<Watchdog> watchdog_;
  Plan plan_;
  std::vector<CorpusEntry> corpus_;
  std::vector<Replay> replays_;  // the regression replays this campaign (or shard) runs
  rc::Gen<CaseSpec> generator_;
  CampaignProgress progress_;
  CaseGate gate_;
  CaseGate* sharing_ = nullptr;  // the gate, when cases run at once
  Clock::time_point gen_t0_;
  bool going_ = true;      // false: nothing is left to check
  std::string in_flight_;  // the check that raised a fatal error, named in it
  // (kernel, property) already failed: stop checking it. Threads running
  // cases at once read it under the mutex; only the committing thread adds.
  std::set<std::pair<std::string, std::string>> failed_;
  std::mutex failed_mutex_;
  std::map<std::string, int> faults_;  // kernel -> faults seen (crashes, hangs, error returns)
  double shrinking_s_ = 0;             // spent shrinking so far
  // The check that raised the first error, in time: with cases running at
  // once, a sticky fault is seen by every case then on the GPU, and the one
  // committed first need not be the one that caused it.
  std::mutex first_error_mutex_;
  std::string first_error_while_;
};

CampaignRun::CampaignRun(const CampaignOptions& o, const ExecContext& exec)
    : o_(o),
      exec_(withCallTimeout(exec, o.case_timeout_s)),
      sel_(select(SelectionRequest{o.op, o.kernels, o.properties, o.dtypes}, exec.backend)),
      corpus_dir_(o.corpus_dir.empty() ? defaultCorpusDir() : o.corpus_dir),
      tally_(result_, [this](const std::string& line) { log(line); }),
      generator_(gen::caseSpec(gen::CaseOptions{o.op, sel_.kernels, sel_.dtypes, o.tier})) {}

std::string CampaignRun::enter(const CaseSpec& spec, const std::string& property) {
  std::string what = reproCommand(spec, property, exec_.perturb_schedule);
  watchdog_->enter(what, o_.case_timeout_s * (kernelOf(spec).remote ? kRemoteCheckTimeouts : 1));
  return what;
}

// (kernel, property) is checked no more: it failed, and the campaign does
// not keep going.
bool CampaignRun::doneWith(const std::string& kernel, const std::string& property) {
  if (o_.keep_going) return false;
  std::lock_guard<std::mutex> lock(failed_mutex_);
  return failed_.count({kernel, property}) > 0;
}

bool CampaignRun::outOfTime() {
  if (budgetSpent()) result_.stopped_by_time = true;
  return result_.stopped_by_time;
}

void CampaignRun::advance() {
  ++progress_.done;
  progress_.failures = int64_t(result_.failures.size());
  progress_.seconds = since(t0_);
  if (o_.progress) o_.progress(progress_);
}

/// Every corpus case of the op on every selected kernel it fits and applies
/// to, this shard's share.
std::vector<Replay> CampaignRun::regressionReplays() {
  std::vector<Replay> replays;
  if (!o_.replay_corpus) return replays;
  corpus_ = loadCorpus(corpus_dir_, "regression");
  int64_t index = 0;
  for (const CorpusEntry& entry : corpus_) {
    if (entry.op != o_.op) continue;
    const Property* p = findProperty(entry.property);
    if (!p) throw CorpusError(fmt::format("{}: no property named '{}'", entry.path, entry.property));
    if (std::find(sel_.properties.begin(), sel_.properties.end(), p) == sel_.properties.end()) continue;
    if (std::find(sel_.dtypes.begin(), sel_.dtypes.end(), entry.spec.dtype) == sel_.dtypes.end()) continue;
    for (const auto& kernel : sel_.kernels) {
      CaseSpec spec = entry.spec;
      spec.kernel = kernel;
      if (!Selection::fits(spec) || !sel_.applies(*p, spec)) continue;
      if (plan_.mine(index++)) replays.push_back({&entry, p, spec});
    }
  }
  return replays;
}

void CampaignRun::replayCorpus() {
  for (const Replay& replay : replays_) {
    const CorpusEntry& entry = *replay.entry;
    const Property* p = replay.property;
    const CaseSpec& spec = replay.spec;
    in_flight_ = enter(spec, p->name);
    const auto c0 = Clock::now();
    CaseContext ctx(spec, *sel_.op, exec_);
    Outcome out;
    for (int k = 0; k < entry.repeat && out.verdict != Verdict::Fail; ++k) {
      ctx.forgetRuns();
      out = checkOne(*p, spec, exec_, &ctx);
      if (out.verdict == Verdict::Fail && entry.repeat > 1)
        out.summary += fmt::format(" (run {} of up to {})", k + 1, entry.repeat);
    }
    watchdog_->leave();
    ++result_.regression_cases;
    tally_.cover(spec, exec_.sm_count);
    tally_.add(spec, p->name, out, since(c0));
    if (o_.json) o_.json->write(caseRecord("regression", spec, p->name, out, since(c0)));
    if (out.verdict == Verdict::Fail) {
      log(fmt::format("REGRESSION FAILED {} [{}]: {}", entry.path, spec.kernel, out.summary));
      result_.failures.push_back({"regression", p->name, spec, spec, out, 0, -1, since(t0_), entry.path,
                                  exec_.perturb_schedule, entry.repeat});
      if (o_.json) o_.json->write(regressionFailureRecord(result_.failures.back()));
    }
    advance();
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(corpus_dir_, ec))  // said even with --quiet: no regression case ran
    warn(fmt::format("no regression cases replayed: the corpus {} does not exist", corpus_dir_));
  else
    log(fmt::format("replayed {} regression cases{}", result_.regression_cases,
                    corpus_.empty()    ? fmt::format(" ({} holds none)", corpus_dir_)
                    : replays_.empty() ? fmt::format(" ({} holds none for this op and selection)", corpus_dir_)
                                       : std::string()));
}

// Checks the case's properties from sel_.properties[first] on.
void CampaignRun::execute(CaseChecks& run, size_t first) {
  const CaseSpec& spec = run.spec;
  std::string what;
  try {
    GateTicket ticket(sharing_, spec, *sel_.op, exec_);
    CaseContext ctx(spec, *sel_.op, exec_);
    for (size_t n = first; n < sel_.properties.size(); ++n) {
      const Property* p = sel_.properties[n];
      if (doneWith(spec.kernel, p->name) || !sel_.applies(*p, spec)) continue;
      what = enter(spec, p->name);
      const auto c0 = Clock::now();
      Outcome out = checkOne(*p, spec, exec_, &ctx);
      watchdog_->leave();
      const bool fault = out.fault;
      run.checks.push_back({n, std::move(out), since(c0)});
      if (fault) break;  // the kernel cannot run this case: its other properties would fault the same way
    }
  } catch (...) {
    watchdog_->leave();
    run.error = std::current_exception();
    run.error_while = what;
    std::lock_guard<std::mutex> lock(first_error_mutex_);
    if (first_error_while_.empty()) first_error_while_ = what;
  }
}

// Commits a case; false: nothing is left to check.
bool CampaignRun::commit(CaseChecks& run) {
  const CaseSpec& spec = run.spec;
  if (!Selection::fits(spec)) return true;  // not this kernel's dtype (generators respect the layout)
  ++result_.cases_run;
  tally_.cover(spec, exec_.sm_count);
  for (size_t c = 0; c < run.checks.size(); ++c) {
    const Property* p = sel_.properties[run.checks[c].property];
    if (!o_.keep_going && failed_.count({spec.kernel, p->name})) {
      // Ran beside the case that failed it: dropped. If it ended the case's
      // checks by faulting, the rest are checked now.
      if (run.checks[c].outcome.fault) {
        CaseChecks rest{run.index, std::nullopt, spec, {}, {}, {}};
        execute(rest, run.checks[c].property + 1);
        run.checks.erase(run.checks.begin() + ptrdiff_t(c) + 1, run.checks.end());
        for (auto& check : rest.checks) run.checks.push_back(std::move(check));
        if (rest.error) run.error = rest.error, run.error_while = rest.error_while;
      }
      continue;
    }
    const Outcome& out = run.checks[c].outcome;
    const double secs = run.checks[c].seconds;
    tally_.add(spec, p->name, out, secs);
    if (o_.json) o_.json->write(caseRecord("case", spec, p->name, out, secs, run.index));
    if (out.verdict != Verdict::Fail) continue;
    // A fault (the kernel crashed, hung, returned an error) fails the case
    // but not the kernel's other cases: they are still judged. The first few
    // are recorded, the first one shrunk.
    const int fault_number = out.fault ? ++faults_[spec.kernel] : 0;
    if (fault_number > kMaxRecordedFaults) {
      log(fmt::format("FAULT {} on case {} (not recorded: {} already): {}", p->name, run.index, kMaxRecordedFaults,
                      out.summary));
      break;  // as below: its other properties would fault the same way
    }
    recordFailure(run, *p, out, fault_number);
    if (out.fault) break;  // the kernel cannot run this case: its other properties would fault the same way
  }
  if (run.error) {  // what one case at a time would have raised here
    in_flight_ = run.error_while;
    std::rethrow_exception(run.error);
  }
  if (!o_.keep_going && failed_.size() == result_.judged.size()) return false;
  return o_.stop_after_failure_of.empty() || std::none_of(failed_.begin(), failed_.end(), [&](const auto& f) {
           return f.second == o_.stop_after_failure_of;
         });
}

// A failure of generated case `run` by `p`: shrunk (unless its property's
// failures show on some runs only, or an earlier fault of the kernel was),
// saved to the corpus, recorded. A later failure of a (kernel, property)
// that already failed (keep_going) is recorded as found.
void CampaignRun::recordFailure(const CaseChecks& run, const Property& p, const Outcome& out, int fault_number) {
  const CaseSpec& spec = run.spec;
  const bool first = out.fault || !failed_.count({spec.kernel, p.name});
  // Time to detection leaves out the shrinking of earlier failures.
  FailureRecord f{"generated", p.name,
                  spec,        spec,
                  out,         0,
                  run.index,   since(t0_) - shrinking_s_,
                  "",          exec_.perturb_schedule,
                  1,           out.fault ? o_.case_timeout_s : 0};
  f.as_found = !first;
  log(fmt::format("FAIL {} on case {}: {}", p.name, run.index, out.summary));
  if (f.as_found) {
    log("  kept going: recorded as found (a kernel x property's first failure alone is shrunk and saved)");
  } else if (o_.shrink && p.intermittent_failures) {
    log("  not shrunk: this property's failures show on some runs only, so the case is kept as found");
  } else if (o_.shrink && fault_number <= 1) {
    const Shrunk s = shrinkFailure(*run.shrinkable, out, o_.shrink_budget_s, [&](const CaseSpec& candidate) {
      std::optional<Outcome> oc;
      if (!Selection::fits(candidate)) return oc;  // a dtype or layout the kernel does not take
      GateTicket ticket(sharing_, candidate, *sel_.op, exec_);
      in_flight_ = enter(candidate, p.name);
      oc = checkOne(p, candidate, exec_);
      watchdog_->leave();
      return oc;
    });
    f.shrunk = s.spec, f.outcome = s.outcome, f.shrink_steps = s.steps, f.shrink_finished = s.finished;
    shrinking_s_ += s.seconds;
    log(fmt::format("  shrunk in {} steps ({:.1f} s{}) to: {}", f.shrink_steps, s.seconds,
                    s.finished ? "" : ", the budget ran out: a smaller case may fail too", toCaseString(f.shrunk)));
  }
  const std::string repro = reproCommand(f.shrunk, p.name, exec_.perturb_schedule);
  if (o_.save_failures && !f.as_found)
    f.corpus_file = saveFailingCase(corpus_dir_, p.name, f.shrunk,
                                    {fmt::format("found {} by ulpcheck run --seed {:#x} ({} {}), property {}", today(),
                                                 o_.seed, run.top_up ? "top-up draw" : "case", run.index, p.name),
                                     f.outcome.summary, "reproduce: " + repro, "kernel: " + kernelOf(f.shrunk).origin},
                                    [this](const std::string& line) { warn(line); });
  if (o_.json) o_.json->write(generatedFailureRecord(f, repro));
  if (!out.fault) {
    std::lock_guard<std::mutex> lock(failed_mutex_);
    failed_.insert({spec.kernel, p.name});
  }
  result_.failures.push_back(std::move(f));
}

bool CampaignRun::runGenerated(int64_t i, const rc::Shrinkable<CaseSpec>& shrinkable, bool top_up) {
  CaseChecks run{i, shrinkable, shrinkable.value(), {}, {}, {}};
  run.top_up = top_up;
  if (Selection::fits(run.spec)) execute(run, 0);
  return commit(run);
}

// The plan's cases, one at a time or concurrent_cases at once (schedule.h).
void CampaignRun::runPlan() {
  ScheduleOptions schedule;
  schedule.count = plan_.planned;
  schedule.mine = [this](int64_t i) { return plan_.mine(i); };
  schedule.threads = sharing_ ? o_.concurrent_cases : 1;
  schedule.out_of_time = [this] { return budgetSpent(); };
  const std::function<CaseChecks(int64_t)> prepare = [this](int64_t i) {
    rc::Shrinkable<CaseSpec> s = draw(i);
    CaseChecks run{i, s, s.value(), {}, {}, {}};
    return run;
  };
  const std::function<void(CaseChecks&)> run = [this](CaseChecks& c) {
    if (Selection::fits(c.spec)) execute(c, 0);
  };
  const std::function<bool(CaseChecks&)> take = [this](CaseChecks& c) {
    going_ = commit(c);
    advance();
    return going_;
  };
  if (runInOrder<CaseChecks>(schedule, prepare, run, take)) result_.stopped_by_time = true;
}

rc::Shrinkable<CaseSpec> CampaignRun::draw(int64_t i) const {
  const rc::Random random(rc::Random::Key{o_.seed, uint64_t(i), 0x756c70636865636bULL, 0});
  rc::Shrinkable<CaseSpec> s = generator_(random, int(i % 101));
  validateCase(s.value());
  return s;
}

void CampaignRun::makeThePlan() {
  plan_ = makePlan(PlanRequest{o_.cases, o_.per_cell, o_.shard_index, o_.shard_count}, result_.applicable_cells,
                   [this](int64_t i) { return sel_.cellsOf(draw(i).value()); });
  result_.planned_cases = plan_.planned;
  result_.plan_reached_target = plan_.reached_target;
  result_.cell_targets = plan_.cell_targets;
}

void CampaignRun::sayThePlan() {
  // Cases drawn for a kernel on a dtype or layout it does not take are
  // skipped: said, so "N generated cases" at the end is not a surprise.
  const std::string skipped =
      plan_.unfit ? fmt::format(" ({} of them skipped: a dtype or layout their kernel does not take)", plan_.unfit)
                  : "";
  if (o_.per_cell > 0)
    log(plan_.reached_target
            ? fmt::format("plan: {} generated cases{} give each of the {} kernel x property x dtype cells {} cases",
                          plan_.planned, skipped, result_.applicable_cells.size(), o_.per_cell)
            : fmt::format("plan: {} generated cases{} (the most allowed) leave some of the {} kernel x property x "
                          "dtype cells under {} cases",
                          plan_.planned, skipped, result_.applicable_cells.size(), o_.per_cell));
  progress_ = CampaignProgress{0, int64_t(replays_.size()) + plan_.mineCount(), 0, 0, o_.time_budget_s};
  if (o_.shard_count > 1)
    log(fmt::format("shard {}/{}: {} of the {} generated cases, {} regression replays", o_.shard_index + 1,
                    o_.shard_count, plan_.mineCount(), plan_.planned, replays_.size()));
}

void CampaignRun::topUp() {
  if (o_.per_cell <= 0) return;
  TopUp top_up(TopUpRequest{o_.seed, o_.tier, o_.cases}, plan_, sel_);
  int64_t turn = 0;
  // The short cells change only when a case runs: not recomputed for each draw.
  auto below = result_.belowTarget();
  for (int64_t i = top_up.firstDraw(); going_ && result_.topped_up_cases < top_up.cap() && i < top_up.endOfDraws();
       ++i) {
    if (!plan_.mine(i)) continue;
    if (below.empty() || outOfTime()) break;
    const CellKey cell = below[size_t(turn++) % below.size()].first;
    const std::optional<rc::Shrinkable<CaseSpec>> drawn = top_up.draw(i, cell, below, tally_.regimes(cell));
    if (!drawn) continue;
    ++progress_.total;
    ++result_.topped_up_cases;
    going_ = runGenerated(i, *drawn, /*top_up=*/true);
    advance();
    below = result_.belowTarget();
  }
}

CampaignResult CampaignRun::run() {
  if (o_.shard_count < 1 || o_.shard_index < 0 || o_.shard_index >= o_.shard_count)
    throw std::invalid_argument(fmt::format("shard {} of {} does not exist", o_.shard_index + 1, o_.shard_count));
  result_.op = o_.op;
  result_.seed = o_.seed;
  result_.per_cell = o_.per_cell;
  result_.shard_index = o_.shard_index;
  result_.shard_count = o_.shard_count;
  declareApplicable(sel_, o_.properties, result_, [this](const std::string& line) { log(line); });
  watchdog_.emplace(o_.case_timeout_s, o_.json);
  makeThePlan();
  replays_ = regressionReplays();  // the plan's shard (Plan::mine) takes its share of them too
  sayThePlan();
  sharing_ = o_.concurrent_cases > 1 ? &gate_ : nullptr;
  try {
    if (o_.replay_corpus) replayCorpus();
    gen_t0_ = Clock::now();
    runPlan();
    topUp();
  } catch (const CudaError& e) {
    if (!first_error_while_.empty()) in_flight_ = first_error_while_;
    result_.fatal_error = fmt::format("{}\n  while running: {}", e.what(), in_flight_);
    if (o_.json) o_.json->write({{"type", "fatal"}, {"error", e.what()}, {"while", in_flight_}});
    log(fmt::format("FATAL: {} (the GPU context is lost; results so far are kept)", result_.fatal_error));
  }
  result_.seconds = since(t0_);
  return std::move(result_);
}

}  // namespace

CampaignResult runCampaign(const CampaignOptions& options, const ExecContext& exec) {
  return CampaignRun(options, exec).run();
}

}  // namespace ulpcheck
