#include "harness/runner/campaign.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "harness/core/device.h"
#include "harness/core/memory_limit.h"
#include "harness/core/rng.h"
#include "harness/core/parallel.h"
#include "harness/runner/corpus.h"
#include "harness/runner/exit_codes.h"
#include "kernels/plugin/remote.h"

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
// Keys a top-up case's random draw apart from case i of the sequence.
constexpr uint64_t kTopUpSalt = 0x746f702d7570ULL;  // "top-up"
// Draws a top-up may make per case it may run (most are drawn again).
constexpr int64_t kTopUpDrawsPerCase = 64;

std::string today() {
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

/// Ends the process with exit code 5 when one check runs longer than its
/// limit (a hung kernel cannot be interrupted from inside the process). What
/// was measured so far is already in the JSON-lines file. Each thread that
/// runs cases times its own check (cases run at once: concurrent_cases).
class Watchdog {
 public:
  Watchdog(double timeout_s, JsonlWriter* json) : timeout_s_(timeout_s), json_(json) {
    if (timeout_s_ > 0) thread_ = std::thread([this] { loop(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  /// Starts timing the calling thread's check, which may take `limit_s` (0:
  /// the campaign's timeout).
  void enter(const std::string& what, double limit_s = 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    checks_[std::this_thread::get_id()] = Check{what, Clock::now(), limit_s > 0 ? limit_s : timeout_s_};
  }
  void leave() {
    std::lock_guard<std::mutex> lock(mutex_);
    checks_.erase(std::this_thread::get_id());
  }

 private:
  struct Check {
    std::string what;
    Clock::time_point started;
    double limit_s = 0;
  };
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::milliseconds(500));
      for (const auto& [thread, check] : checks_) {
        if (since(check.started) <= check.limit_s) continue;
        std::fprintf(stderr, "\nulpcheck: case exceeded its %.0f s limit (hung kernel?): %s\n", check.limit_s,
                     check.what.c_str());
        if (json_) json_->write({{"type", "hang"}, {"timeout_s", check.limit_s}, {"what", check.what}});
        std::fflush(stderr);
        std::_Exit(exit_code::kHang);
      }
    }
  }
  double timeout_s_;
  JsonlWriter* json_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<std::thread::id, Check> checks_;
  bool stop_ = false;
};

const KernelInfo* kernelOf(const CaseSpec& c) { return OpAdapter::findKernel(c.op, c.kernel); }

/// Admits the cases that run at once (concurrent_cases). They share the GPU
/// (SharedGpuScope); some run alone, after the cases running when they
/// asked, and no case starts while one waits or runs:
/// - a variant not built into ulpcheck (a plugin's, a Python one), in a
///   worker process or in this one: compiled elsewhere, it may launch on the
///   legacy default stream, which a thread's own synchronisation would not
///   wait for;
/// - a variant that puts its ranks on several GPUs;
/// - a large case: several nightly-size cases at once could run out of the
///   memory one has alone (a skip one at a time would not see), and its
///   oracle and judging use every core.
class CaseGate {
 public:
  static bool runsAlone(const KernelInfo& k, const CaseSpec& c) {
    constexpr int64_t kLargestSharedCase = int64_t{1} << 22;  // elements
    return k.remote || !k.plugin_path.empty() || !k.python_file.empty() || k.one_rank_per_gpu ||
           c.M * c.ld > kLargestSharedCase;
  }

  void enter(bool alone) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (alone) {
      ++waiting_alone_;
      changed_.wait(lock, [&] { return running_ == 0; });
      --waiting_alone_;
      alone_ = true;
    } else {
      changed_.wait(lock, [&] { return !alone_ && waiting_alone_ == 0; });
    }
    ++running_;
  }
  void leave(bool alone) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --running_;
      if (alone) alone_ = false;
    }
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int running_ = 0, waiting_alone_ = 0;
  bool alone_ = false;
};

/// One case's stay in the gate, with what its thread must do meanwhile:
/// synchronise its own stream only and run its chunks itself when it shares
/// the GPU. Inactive (`gate` null) when cases run one at a time.
class GateTicket {
 public:
  GateTicket(CaseGate* gate, const CaseSpec& c) : gate_(gate), alone_(CaseGate::runsAlone(*kernelOf(c), c)) {
    if (!gate_) return;
    gate_->enter(alone_);
    if (!alone_) shared_.emplace(), inline_.emplace();
  }
  ~GateTicket() {
    if (gate_) gate_->leave(alone_);
  }
  GateTicket(const GateTicket&) = delete;
  GateTicket& operator=(const GateTicket&) = delete;

 private:
  CaseGate* gate_;
  bool alone_;
  std::optional<SharedGpuScope> shared_;
  std::optional<InlineChunks> inline_;
};

/// Why the case cannot run in this process's memory (empty: it fits): its
/// estimated peak against what the process may use, with room for the rest
/// of the process. Estimated before anything is allocated: a case of 2^31
/// rows once grew to 24 GB before the OOM killer ended ulpcheck unsaid.
std::string exceedsHostMemory(const CaseSpec& spec) {
  const MemoryLimit& limit = hostMemoryLimit();
  const OpAdapter* op = findOp(spec.op);
  if (!limit.bytes || !op) return "";
  constexpr double kUsableFraction = 0.9;
  const uint64_t need = op->peakHostBytes(spec);
  if (double(need) <= kUsableFraction * double(limit.bytes)) return "";
  return fmt::format("does not fit in host memory: the case needs about {} at its peak, this process may use {} ({}; "
                     "ULPCHECK_MAX_MEMORY sets it)",
                     formatBytes(need), formatBytes(limit.bytes), limit.source);
}

/// Runs one property on one case, converting recoverable errors into a failed
/// outcome. Sticky GPU faults propagate: nothing more can run in the process.
Outcome checkOne(const Property& p, const CaseSpec& spec, const ExecContext& exec, CaseContext* shared = nullptr) {
  if (std::string why = exceedsHostMemory(spec); !why.empty()) {
    Outcome o;
    o.verdict = Verdict::Skip;
    o.summary = std::move(why);
    return o;
  }
  try {
    if (shared) return p.check(*shared);
    CaseContext ctx(spec, *findOp(spec.op), exec);
    return p.check(ctx);
  } catch (const CudaError& e) {
    if (e.sticky) throw;
    Outcome o;
    o.verdict = Verdict::Fail;
    o.summary = fmt::format("CUDA error: {}", e.what());
    return o;
  } catch (const KernelFailure& e) {  // the kernel returned an error, or crashed or hung in its worker
    Outcome o;
    o.verdict = Verdict::Fail;
    o.fault = true;
    o.hang = e.hang;
    o.summary = e.what();
    return o;
  } catch (const CaseNotRunnableHere& e) {
    Outcome o;
    o.verdict = Verdict::Skip;
    o.summary = e.what();
    return o;
  } catch (const OutOfMemory& e) {
    Outcome o;
    o.verdict = Verdict::Skip;
    o.summary = fmt::format("does not fit in memory: {}", e.what());
    return o;
  } catch (const std::bad_alloc&) {
    Outcome o;
    o.verdict = Verdict::Skip;
    o.summary = "does not fit in host memory";
    return o;
  }
}

struct Selection {
  const OpAdapter* op = nullptr;
  std::vector<const Property*> properties;
  std::vector<std::string> kernels;
  std::vector<DType> dtypes;
  /// The property applies to the kernel and the case (Property::appliesTo).
  bool applies(const Property& p, const CaseSpec& c) const {
    return p.appliesTo(*op, *OpAdapter::findKernel(c.op, c.kernel)) && p.appliesTo(c);
  }
  /// The case fits the kernel's dtypes, layout preconditions and specs.
  static bool fits(const CaseSpec& c) {
    const KernelInfo& k = *OpAdapter::findKernel(c.op, c.kernel);
    return k.supports(c.dtype) && k.violation(c.dtype, c.N, c.ld, c.spec).empty();
  }
};

Selection select(const CampaignOptions& o, const ExecContext& exec) {
  Selection s;
  s.op = findOp(o.op);
  if (!s.op) throw std::invalid_argument(fmt::format("unknown op '{}' (see `ulpcheck list`)", o.op));
  if (o.properties.empty()) {
    for (const Property& p : propertyRegistry()) s.properties.push_back(&p);
  } else {
    for (const auto& name : o.properties) {
      const Property* p = findProperty(name);
      if (!p) throw std::invalid_argument(fmt::format("unknown property '{}' (see `ulpcheck list`)", name));
      s.properties.push_back(p);
    }
  }
  s.kernels = o.kernels.empty() ? defaultKernels(o.op, exec.backend) : o.kernels;
  for (const auto& k : s.kernels) {
    const KernelInfo* info = OpAdapter::findKernel(o.op, k);
    if (!info) throw std::invalid_argument(fmt::format("op '{}' has no kernel variant '{}' (see `ulpcheck list`)", o.op, k));
    if (info->backend == Backend::Cuda && !queryDevice().available)
      throw std::invalid_argument(fmt::format("kernel '{}' needs a GPU: {}", k, queryDevice().reason));
  }
  s.dtypes = o.dtypes.empty() ? std::vector<DType>(std::begin(kAllDTypes), std::end(kAllDTypes)) : o.dtypes;
  return s;
}

/// `index`: a generated case's place in the seed's sequence (-1: a regression replay).
nlohmann::json caseRecord(const char* kind, const CaseSpec& spec, const std::string& property, const Outcome& o,
                          double seconds, int64_t index = -1) {
  nlohmann::json j = {{"type", kind}, {"case", toJson(spec)}, {"property", property}, {"seconds", seconds}};
  if (index >= 0) j["index"] = index;
  j["outcome"] = toJson(o);
  return j;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> CampaignResult::unjudged() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [pair, n] : judged)
    if (n == 0) out.push_back(pair);
  return out;
}

std::set<std::pair<std::string, std::string>> CampaignResult::decidedByFailure() const {
  // A failure decides its (kernel, property): more cases would only cost
  // time (a failing run once topped up for a minute to end BELOW TARGET).
  std::set<std::pair<std::string, std::string>> decided;
  for (const FailureRecord& f : failures)
    if (!f.outcome.fault) decided.insert({f.shrunk.kernel, f.property});
  return decided;
}

std::vector<std::pair<std::tuple<std::string, std::string, std::string>, int64_t>> CampaignResult::belowTarget() const {
  std::vector<std::pair<std::tuple<std::string, std::string, std::string>, int64_t>> out;
  if (per_cell <= 0) return out;
  const auto decided = decidedByFailure();
  for (const auto& cell : applicable_cells) {
    if (decided.count({std::get<0>(cell), std::get<1>(cell)})) continue;
    const auto it = cells.find(cell);
    const int64_t judged = it == cells.end() ? 0 : it->second.judged();
    const auto share = cell_targets.find(cell);
    if (judged < (shard_count > 1 && share != cell_targets.end() ? share->second : per_cell))
      out.emplace_back(cell, judged);
  }
  return out;
}

int CampaignResult::exitCode(bool count_inapplicable_properties) const {
  if (!fatal_error.empty()) return exit_code::kRuntimeError;
  // Every hang counts, recorded or not (a kernel's faults past the first few are only counted).
  if (std::any_of(cells.begin(), cells.end(), [](const auto& c) { return c.second.hung > 0; }) ||
      std::any_of(failures.begin(), failures.end(), [](const FailureRecord& f) { return f.outcome.hang; }))
    return exit_code::kHang;
  if (!failures.empty()) return exit_code::kPropertyFailed;
  if (cases_run == 0 && regression_cases == 0) return exit_code::kNothingRan;
  if (!unjudged().empty() || (count_inapplicable_properties && !inapplicable_properties.empty()))
    return exit_code::kNothingJudged;
  // A plan that ended with cells judged fewer times than its target has not
  // judged what it set out to (unless the --time-budget the user gave cut it
  // short, which the run says).
  if (!stopped_by_time && !belowTarget().empty()) return exit_code::kNothingJudged;
  return exit_code::kOk;
}

std::vector<std::string> defaultKernels(const std::string& op, Backend backend) {
  std::vector<std::string> out;
  // Variants with one rank per GPU join the defaults where there are at least two GPUs.
  for (const KernelInfo& k : kernelCatalog())
    if (k.op == op && k.backend == backend && !k.isMutant() && (!k.one_rank_per_gpu || queryDevice().count >= 2))
      out.push_back(k.name);
  return out;
}

namespace {
std::string& cliProgramSetting() {
  static std::string program = "ulpcheck";
  return program;
}
}  // namespace

void setCliProgram(std::string program) { cliProgramSetting() = std::move(program); }
const std::string& cliProgram() { return cliProgramSetting(); }

std::string reproCommand(const CaseSpec& spec, const std::string& property, bool perturb_schedule, int repeats,
                         double case_timeout_s) {
  return cliProgram() + " " + reproArgs(spec, property, perturb_schedule, repeats, case_timeout_s);
}

std::string reproArgs(const CaseSpec& spec, const std::string& property, bool perturb_schedule, int repeats,
                      double case_timeout_s) {
  // A plugin's variant needs its plugin loaded again.
  const KernelInfo* k = OpAdapter::findKernel(spec.op, spec.kernel);
  return fmt::format("repro '{}' --property {}{}{}{}{}", toCaseString(spec), property,
                     perturb_schedule ? " --perturb-schedule" : "",
                     repeats > 1 ? fmt::format(" --repeat {}", repeats) : "",
                     case_timeout_s > 0 ? fmt::format(" --case-timeout {:g}", case_timeout_s) : "",
                     !k                          ? ""
                     : !k->plugin_path.empty() ? fmt::format(" --plugin '{}'", k->plugin_path)
                     : !k->python_file.empty() ? fmt::format(" --python '{}'", k->python_file)
                                               : "");
}

std::string reproCommand(const FailureRecord& f) {
  return reproCommand(f.shrunk, f.property, f.perturb_schedule, f.repeats, f.case_timeout_s);
}

std::vector<ReplayResult> runCase(const CaseSpec& spec, const std::vector<std::string>& properties,
                                  const ExecContext& exec, int repeats,
                                  const std::function<void(const ReplayResult&)>& done) {
  const OpAdapter* op = findOp(spec.op);
  if (!op) throw CaseParseError(fmt::format("unknown op '{}'", spec.op));
  for (const auto& name : properties)
    if (!findProperty(name)) throw std::invalid_argument(fmt::format("unknown property '{}' (see `ulpcheck list`)", name));
  CaseContext ctx(spec, *op, exec);
  if (const std::string why = ctx.kernel().preconditions.violation(spec.dtype, spec.N, spec.ld); !why.empty())
    throw CaseNotRunnableHere(fmt::format("{} {}: the case has N={} ld={}", spec.kernel, why, spec.N, spec.ld));
  if (const std::string why = ctx.kernel().specs.violation(spec.dtype, spec.spec); !why.empty())
    throw CaseNotRunnableHere(fmt::format("{} {}: the case's spec is {}", spec.kernel, why, specLabel(spec.spec)));
  std::vector<ReplayResult> out;
  for (const Property& p : propertyRegistry()) {
    const bool named = std::find(properties.begin(), properties.end(), p.name) != properties.end();
    const bool applies = p.appliesTo(*op, ctx.kernel()) && p.appliesTo(spec);
    if (applies && (properties.empty() || named)) out.push_back({p.name, {}, 0, 0, true});
    if (!applies && named) {  // said, not run
      ReplayResult r{p.name, {}, 0, 0, false};
      r.outcome.verdict = Verdict::Skip;
      r.outcome.summary = fmt::format("does not apply to {} on this case", spec.kernel);
      out.push_back(std::move(r));
    }
  }
  const int runs = std::max(repeats, 1);
  for (int k = 0; k < runs; ++k) {
    ctx.forgetRuns();
    // After a fault (a crash, a hang, an error return) the run's other
    // properties are not checked: they would fault the same way, and a hang
    // would cost each of them --case-timeout.
    std::string faulted_in;
    for (ReplayResult& r : out) {
      if (r.applies && !faulted_in.empty() && r.runs == 0) {
        r.outcome.verdict = Verdict::Skip;
        r.outcome.summary = fmt::format("not run: the kernel faulted on this case in {}", faulted_in);
      } else if (r.applies && faulted_in.empty()) {
        Outcome o = checkOne(*findProperty(r.property), spec, exec, &ctx);
        ++r.runs;
        if (o.fault) faulted_in = r.property;
        r.hung += o.hang;
        if (o.verdict == Verdict::Fail && r.failed++) {  // keep the first failure
        } else if (o.verdict == Verdict::Fail || !r.failed) {
          r.outcome = std::move(o);
        }
      }
      if (k == runs - 1 && done) done(r);  // final: said as soon as it is known
    }
  }
  return out;
}

CampaignResult runCampaign(const CampaignOptions& o, const ExecContext& exec) {
  const auto t0 = Clock::now();
  const Selection sel = select(o, exec);
  const std::string corpus_dir = o.corpus_dir.empty() ? defaultCorpusDir() : o.corpus_dir;
  auto log = [&](const std::string& line) {
    if (o.log) o.log(line);
  };
  auto warn = [&](const std::string& line) {
    if (o.warn) o.warn(line);
    else log(line);
  };
  auto repro = [&](const CaseSpec& spec, const std::string& property) {
    return reproCommand(spec, property, exec.perturb_schedule);
  };
  if (o.shard_count < 1 || o.shard_index < 0 || o.shard_index >= o.shard_count)
    throw std::invalid_argument(fmt::format("shard {} of {} does not exist", o.shard_index + 1, o.shard_count));
  CampaignResult result;
  result.op = o.op;
  result.seed = o.seed;
  result.per_cell = o.per_cell;
  result.shard_index = o.shard_index;
  result.shard_count = o.shard_count;
  for (const auto& kernel : sel.kernels) {
    const KernelInfo& info = *OpAdapter::findKernel(o.op, kernel);
    // A kernel that takes none of the selected dtypes runs no case: said
    // once, not as "judged nothing" for each of its properties.
    if (std::none_of(sel.dtypes.begin(), sel.dtypes.end(), [&](DType t) { return info.supports(t); })) {
      std::vector<std::string> takes;
      for (DType t : info.dtypes) takes.push_back(dtypeName(t));
      log(fmt::format("{} takes none of the dtypes selected: it takes {}", kernel, fmt::join(takes, ", ")));
      continue;
    }
    for (const auto& path : info.code_paths) result.paths[kernel][path] = 0;
    for (const Property* p : sel.properties)
      if (p->appliesTo(*sel.op, info)) {
        result.judged[{kernel, p->name}] = 0;
        for (DType t : sel.dtypes)
          if (info.supports(t)) result.applicable_cells.insert({kernel, p->name, dtypeName(t)});
      }
  }
  const bool mine_only = o.shard_count > 1;
  auto mine = [&](int64_t index) { return !mine_only || index % o.shard_count == o.shard_index; };
  for (const auto& name : o.properties)
    if (std::none_of(result.judged.begin(), result.judged.end(), [&](const auto& j) { return j.first.second == name; }))
      result.inapplicable_properties.push_back(name);
  auto cover = [&](const CaseSpec& spec) {
    const KernelInfo& k = *OpAdapter::findKernel(spec.op, spec.kernel);
    if (k.paths_taken)
      for (const auto& path : k.paths_taken(RowShape{spec.dtype, spec.M, spec.N, spec.ld, spec.eps, spec.spec},
                                            LaunchEnv{exec.sm_count, spec.ctas, nullptr}))
        ++result.paths[spec.kernel][path];
  };
  Watchdog watchdog(o.case_timeout_s, o.json);
  // A kernel in a worker that hangs is killed after --case-timeout and its
  // case fails; the watchdog, which can only end the whole run, then allows
  // such a check the few calls it may still make.
  remote::setCallTimeout(o.case_timeout_s);
  std::string in_flight;  // the check that raised a fatal error, named in it
  // Starts the watchdog on the calling thread's check; returns its repro.
  auto enter = [&](const CaseSpec& spec, const std::string& property) {
    std::string what = repro(spec, property);
    const bool remote = OpAdapter::findKernel(spec.op, spec.kernel)->remote;
    watchdog.enter(what, o.case_timeout_s * (remote ? kRemoteCheckTimeouts : 1));
    return what;
  };
  // (kernel, property) already failed: stop checking it. Threads running
  // cases at once read it under the mutex; only the committing thread adds.
  std::set<std::pair<std::string, std::string>> failed;
  std::mutex failed_mutex;
  auto alreadyFailed = [&](const std::string& kernel, const std::string& property) {
    std::lock_guard<std::mutex> lock(failed_mutex);
    return failed.count({kernel, property}) > 0;
  };
  std::map<std::string, int> faults;                     // kernel -> faults seen (crashes, hangs, error returns)
  double shrinking_s = 0;  // spent shrinking so far

  // Per cell, per value regime (distribution) of its cases: (judged, run).
  // A top-up draws its cases where the cell's cases were judged (below).
  std::map<std::tuple<std::string, std::string, std::string>, std::map<Dist, std::pair<int64_t, int64_t>>>
      judged_by_regime;
  std::set<std::tuple<std::string, std::string, std::string>> said_skip;  // cells whose first skip was said
  auto tally = [&](const CaseSpec& spec, const std::string& property, const Outcome& out, double seconds) {
    // Why a cell's cases are skipped (too large for this machine, more ranks
    // than GPUs): said at its first, not only in the JSON.
    if (out.verdict == Verdict::Skip && said_skip.insert({spec.kernel, property, dtypeName(spec.dtype)}).second)
      log(fmt::format("{} {} {}: a case skipped: {}", spec.kernel, property, dtypeName(spec.dtype), out.summary));
    auto& regime = judged_by_regime[{spec.kernel, property, dtypeName(spec.dtype)}][spec.x.kind];
    regime.first += out.judged(), ++regime.second;
    CellStats& cell = result.cells[{spec.kernel, property, dtypeName(spec.dtype)}];
    ++cell.cases;
    cell.seconds += seconds;
    switch (out.verdict) {
      case Verdict::Pass: ++cell.passed; break;
      case Verdict::Fail: ++cell.failed, cell.faulted += out.fault, cell.hung += out.hang; break;
      case Verdict::Expected: ++cell.expected; break;
      case Verdict::Skip: ++cell.skipped; break;
      case Verdict::Inconclusive: ++cell.inconclusive; break;
    }
    if (out.judged()) ++result.judged[{spec.kernel, property}];
    for (const TensorStats& s : out.stats) {
      cell.max_ulp = std::max(cell.max_ulp, s.max_ulp);
      cell.max_ratio = std::max(cell.max_ratio, s.max_ratio);
      if (s.errors.count) cell.errors[s.tensor].merge(s.errors);
    }
  };

  // The regression replays (every corpus case on every selected kernel of
  // its op) and the generated cases this campaign (or shard) runs.
  struct Replay {
    const CorpusEntry* entry;
    const Property* property;
    CaseSpec spec;
  };
  std::vector<CorpusEntry> corpus;
  std::vector<Replay> replays;
  if (o.replay_corpus) {
    corpus = loadCorpus(corpus_dir, "regression");
    int64_t index = 0;
    for (const CorpusEntry& entry : corpus) {
      if (entry.op != o.op) continue;
      const Property* p = findProperty(entry.property);
      if (!p) throw CorpusError(fmt::format("{}: no property named '{}'", entry.path, entry.property));
      if (std::find(sel.properties.begin(), sel.properties.end(), p) == sel.properties.end()) continue;
      if (std::find(sel.dtypes.begin(), sel.dtypes.end(), entry.spec.dtype) == sel.dtypes.end()) continue;
      for (const auto& kernel : sel.kernels) {
        CaseSpec spec = entry.spec;
        spec.kernel = kernel;
        if (!Selection::fits(spec) || !sel.applies(*p, spec)) continue;
        if (mine(index++)) replays.push_back({&entry, p, spec});
      }
    }
  }
  gen::CaseOptions gopts{o.op, sel.kernels, sel.dtypes, o.tier};
  const rc::Gen<CaseSpec> generator = gen::caseSpec(gopts);
  auto draw = [&](int64_t i) {
    const rc::Random random(rc::Random::Key{o.seed, uint64_t(i), 0x756c70636865636bULL, 0});
    rc::Shrinkable<CaseSpec> s = generator(random, int(i % 101));
    validateCase(s.value());
    return s;
  };
  // A per-cell plan: the seed's cases in order until every applicable cell
  // has its share. What applies to a case is known before it runs, so every
  // shard computes the same plan.
  int64_t planned = o.cases;
  int64_t unfit = 0;  // of the plan's cases: a dtype or layout their kernel does not take (never run)
  if (o.per_cell > 0) {
    std::map<std::tuple<std::string, std::string, std::string>, int64_t> counts, mine_counts;
    size_t filled = 0;
    result.plan_reached_target = result.applicable_cells.empty();
    for (planned = 0; planned < o.cases && !result.plan_reached_target; ++planned) {
      const CaseSpec spec = draw(planned).value();
      if (!Selection::fits(spec)) {
        ++unfit;
        continue;
      }
      for (const Property* p : sel.properties) {
        if (!sel.applies(*p, spec)) continue;
        const std::tuple<std::string, std::string, std::string> cell{spec.kernel, p->name, dtypeName(spec.dtype)};
        if (++counts[cell] == o.per_cell) ++filled;
        mine_counts[cell] += mine(planned);
      }
      result.plan_reached_target = filled == result.applicable_cells.size();
    }
    // A shard's share of each cell's target, in proportion to the plan's
    // cases of the cell it runs (rounded up: the shares add up to the target).
    for (const auto& [cell, n] : counts)
      result.cell_targets[cell] = (mine_counts[cell] * std::min(n, o.per_cell) + n - 1) / n;
  }
  result.planned_cases = planned;
  // Cases drawn for a kernel on a dtype or layout it does not take are
  // skipped: said, so "N generated cases" at the end is not a surprise.
  const std::string skipped =
      unfit ? fmt::format(" ({} of them skipped: a dtype or layout their kernel does not take)", unfit) : "";
  if (o.per_cell > 0)
    log(result.plan_reached_target
            ? fmt::format("plan: {} generated cases{} give each of the {} kernel x property x dtype cells {} cases",
                          planned, skipped, result.applicable_cells.size(), o.per_cell)
            : fmt::format("plan: {} generated cases{} (the most allowed) leave some of the {} kernel x property x "
                          "dtype cells under {} cases",
                          planned, skipped, result.applicable_cells.size(), o.per_cell));
  CampaignProgress progress{0, int64_t(replays.size()), 0, 0, o.time_budget_s};
  for (int64_t i = 0; i < planned; ++i) progress.total += mine(i);
  if (mine_only)
    log(fmt::format("shard {}/{}: {} of the {} generated cases, {} regression replays", o.shard_index + 1,
                    o.shard_count, progress.total - int64_t(replays.size()), planned, replays.size()));
  auto advance = [&] {
    ++progress.done;
    progress.failures = int64_t(result.failures.size());
    progress.seconds = since(t0);
    if (o.progress) o.progress(progress);
  };

  // The check that raised the first error, in time: with cases running at
  // once, a sticky fault is seen by every case then on the GPU, and the
  // one committed first need not be the one that caused it.
  std::mutex first_error_mutex;
  std::string first_error_while;
  try {
    // 1. The regression corpus, for every selected kernel of its op.
    if (o.replay_corpus) {
      for (const Replay& replay : replays) {
        const CorpusEntry& entry = *replay.entry;
        const Property* p = replay.property;
        const CaseSpec& spec = replay.spec;
        const std::string& kernel = spec.kernel;
        in_flight = enter(spec, p->name);
        const auto c0 = Clock::now();
        CaseContext ctx(spec, *sel.op, exec);
        Outcome out;
        for (int k = 0; k < entry.repeat && out.verdict != Verdict::Fail; ++k) {
          ctx.forgetRuns();
          out = checkOne(*p, spec, exec, &ctx);
          if (out.verdict == Verdict::Fail && entry.repeat > 1)
            out.summary += fmt::format(" (run {} of up to {})", k + 1, entry.repeat);
        }
        watchdog.leave();
        ++result.regression_cases;
        cover(spec);
        tally(spec, p->name, out, since(c0));
        if (o.json) o.json->write(caseRecord("regression", spec, p->name, out, since(c0)));
        if (out.verdict == Verdict::Fail) {
          log(fmt::format("REGRESSION FAILED {} [{}]: {}", entry.path, kernel, out.summary));
          result.failures.push_back({"regression", p->name, spec, spec, out, 0, -1, since(t0), entry.path,
                                     exec.perturb_schedule, entry.repeat});
          // As a generated failure's: a report of JSON lines cut short still has its message.
          if (o.json)
            o.json->write({{"type", "failure"},
                           {"kind", "regression"},
                           {"property", p->name},
                           {"original", toJson(spec)},
                           {"shrunk", toJson(spec)},
                           {"repro", reproCommand(result.failures.back())},
                           {"corpus_file", entry.path},
                           {"outcome", toJson(out)}});
        }
        advance();
      }
      std::error_code ec;
      if (!std::filesystem::is_directory(corpus_dir, ec))  // said even with --quiet: no regression case ran
        warn(fmt::format("no regression cases replayed: the corpus {} does not exist", corpus_dir));
      else
        log(fmt::format("replayed {} regression cases{}", result.regression_cases,
                        corpus.empty()    ? fmt::format(" ({} holds none)", corpus_dir)
                        : replays.empty() ? fmt::format(" ({} holds none for this op and selection)", corpus_dir)
                                          : std::string()));
    }

    // 2. Generated cases. Case i runs in two steps: `execute` checks its
    // properties (on any thread, when cases run at once), `commit` takes the
    // outcomes in the sequence's order (on this thread): tallies, records,
    // failures, shrinking. A check that an earlier case's failure makes moot
    // is dropped there, so the results are those of one case at a time.
    struct CaseChecks {
      int64_t index = 0;
      std::optional<rc::Shrinkable<CaseSpec>> shrinkable;
      CaseSpec spec;
      struct Check {
        size_t property;  // in sel.properties
        Outcome outcome;
        double seconds = 0;
      };
      std::vector<Check> checks;
      std::exception_ptr error;  // raised by a check (named by error_while): rethrown when committed
      std::string error_while;
      bool top_up = false;  // drawn for a short cell, not case `index` of the seed's sequence
    };
    CaseGate gate;
    CaseGate* const sharing = o.concurrent_cases > 1 ? &gate : nullptr;
    // Checks the case's properties from sel.properties[first] on.
    auto execute = [&](CaseChecks& run, size_t first) {
      const CaseSpec& spec = run.spec;
      std::string what;
      try {
        GateTicket ticket(sharing, spec);
        CaseContext ctx(spec, *sel.op, exec);
        for (size_t n = first; n < sel.properties.size(); ++n) {
          const Property* p = sel.properties[n];
          if (alreadyFailed(spec.kernel, p->name) || !sel.applies(*p, spec)) continue;
          what = enter(spec, p->name);
          const auto c0 = Clock::now();
          Outcome out = checkOne(*p, spec, exec, &ctx);
          watchdog.leave();
          const bool fault = out.fault;
          run.checks.push_back({n, std::move(out), since(c0)});
          if (fault) break;  // the kernel cannot run this case: its other properties would fault the same way
        }
      } catch (...) {
        watchdog.leave();
        run.error = std::current_exception();
        run.error_while = what;
        std::lock_guard<std::mutex> lock(first_error_mutex);
        if (first_error_while.empty()) first_error_while = what;
      }
    };
    // Commits case i; false: nothing is left to check.
    auto commit = [&](CaseChecks& run) {
      const CaseSpec& spec = run.spec;
      const int64_t i = run.index;
      if (!Selection::fits(spec)) return true;  // not this kernel's dtype (generators respect the layout)
      ++result.cases_run;
      cover(spec);
      for (size_t c = 0; c < run.checks.size(); ++c) {
        const Property* p = sel.properties[run.checks[c].property];
        if (failed.count({spec.kernel, p->name})) {
          // Ran beside the case that failed it: dropped. If it ended the
          // case's checks by faulting, the rest are checked now.
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
        tally(spec, p->name, out, secs);
        if (o.json) o.json->write(caseRecord("case", spec, p->name, out, secs, i));
        if (out.verdict != Verdict::Fail) continue;
        // A fault (the kernel crashed, hung, returned an error) fails the case
        // but not the kernel's other cases: they are still judged. The first
        // few are recorded, the first one shrunk.
        const int fault_number = out.fault ? ++faults[spec.kernel] : 0;
        if (fault_number > kMaxRecordedFaults) {
          log(fmt::format("FAULT {} on case {} (not recorded: {} already): {}", p->name, i, kMaxRecordedFaults, out.summary));
          break;  // as below: its other properties would fault the same way
        }

        // Time to detection leaves out the shrinking of earlier failures.
        FailureRecord f{"generated", p->name, spec, spec, out, 0, i, since(t0) - shrinking_s, "",
                        exec.perturb_schedule, 1, out.fault ? o.case_timeout_s : 0};
        log(fmt::format("FAIL {} on case {}: {}", p->name, i, out.summary));
        if (o.shrink && p->intermittent_failures) {
          log("  not shrunk: this property's failures show on some runs only, so the case is kept as found");
        } else if (o.shrink && fault_number <= 1) {
          const auto s0 = Clock::now();
          rc::Shrinkable<CaseSpec> current = *run.shrinkable;
          bool out_of_budget = false;
          for (bool improved = true; improved && !out_of_budget;) {
            improved = false;
            for (auto seq = current.shrinks(); auto next = seq.next();) {
              if ((out_of_budget = since(s0) >= o.shrink_budget_s)) break;
              const CaseSpec candidate = next->value();
              try {
                validateCase(candidate);
              } catch (const CaseParseError&) {
                continue;
              }
              if (!Selection::fits(candidate)) continue;  // a dtype or layout the kernel does not take
              std::optional<Outcome> oc;
              {
                GateTicket ticket(sharing, candidate);
                in_flight = enter(candidate, p->name);
                oc = checkOne(*p, candidate, exec);
                watchdog.leave();
              }
              // Failing the same way: a hang shrinks to a hang, not to a crash (exit code 5 is the hang's).
              if (oc->verdict == Verdict::Fail && oc->fault == f.outcome.fault && oc->hang == f.outcome.hang) {
                current = *next;
                f.shrunk = candidate;
                f.outcome = std::move(*oc);
                ++f.shrink_steps;
                improved = true;
                break;
              }
            }
          }
          shrinking_s += since(s0);
          f.shrink_finished = !out_of_budget;
          log(fmt::format("  shrunk in {} steps ({:.1f} s{}) to: {}", f.shrink_steps, since(s0),
                          out_of_budget ? ", the budget ran out: a smaller case may fail too" : "",
                          toCaseString(f.shrunk)));
        }
        if (o.save_failures) {
          const std::vector<std::string> comments{
              fmt::format("found {} by ulpcheck run --seed {:#x} ({} {}), property {}", today(), o.seed,
                          run.top_up ? "top-up draw" : "case", i, p->name),
              f.outcome.summary, "reproduce: " + repro(f.shrunk, p->name),
              "kernel: " + OpAdapter::findKernel(f.shrunk.op, f.shrunk.kernel)->origin};
          try {
            f.corpus_file = saveCrashingCase(corpus_dir, p->name, f.shrunk, comments);
          } catch (const CorpusError& e) {  // an installed corpus may be read-only
            f.corpus_file = saveCrashingCase(kFallbackCrashingRoot, p->name, f.shrunk, comments);
            warn(fmt::format("{}; saved under ./{} instead", e.what(), kFallbackCrashingRoot));
          }
        }
        if (o.json)
          o.json->write({{"type", "failure"},
                         {"kind", "generated"},
                         {"property", p->name},
                         {"case_index", i},
                         {"original", toJson(f.original)},
                         {"shrunk", toJson(f.shrunk)},
                         {"shrink_steps", f.shrink_steps},
                         {"shrink_finished", f.shrink_finished},
                         {"seconds_to_detect", f.seconds_to_detect},
                         {"repro", repro(f.shrunk, p->name)},
                         {"corpus_file", f.corpus_file},
                         {"outcome", toJson(f.outcome)}});
        if (!out.fault) {
          std::lock_guard<std::mutex> lock(failed_mutex);
          failed.insert({spec.kernel, p->name});
        }
        result.failures.push_back(std::move(f));
        if (out.fault) break;  // the kernel cannot run this case: its other properties would fault the same way
      }
      if (run.error) {  // what one case at a time would have raised here
        in_flight = run.error_while;
        std::rethrow_exception(run.error);
      }
      if (failed.size() == result.judged.size()) return false;
      return o.stop_after_failure_of.empty() ||
             std::none_of(failed.begin(), failed.end(), [&](const auto& f) { return f.second == o.stop_after_failure_of; });
    };
    auto runGenerated = [&](int64_t i, const rc::Shrinkable<CaseSpec>& shrinkable, bool top_up = false) {
      CaseChecks run{i, shrinkable, shrinkable.value(), {}, {}, {}};
      run.top_up = top_up;
      if (Selection::fits(run.spec)) execute(run, 0);
      return commit(run);
    };
    const auto gen_t0 = Clock::now();
    auto out_of_time = [&] {
      if (o.time_budget_s > 0 && since(gen_t0) > o.time_budget_s) result.stopped_by_time = true;
      return result.stopped_by_time;
    };
    bool going = true;
    if (!sharing) {
      for (int64_t i = 0; i < planned && going; ++i) {
        if (!mine(i)) continue;
        if (out_of_time()) break;
        going = runGenerated(i, draw(i));
        advance();
      }
    } else {
      // concurrent_cases threads start the plan's cases in the sequence's
      // order; this thread commits each once it and those before it are done.
      std::mutex mutex;
      std::condition_variable changed;
      int64_t next = 0;  // the next case to start
      bool stop = false, timed_out = false;
      std::map<int64_t, CaseChecks> done;
      auto startAndCheck = [&] {
        for (;;) {
          CaseChecks run;
          {
            std::lock_guard<std::mutex> lock(mutex);
            while (next < planned && !mine(next)) ++next;
            if (stop || next >= planned) return;
            if (o.time_budget_s > 0 && since(gen_t0) > o.time_budget_s) {
              stop = timed_out = true;
              changed.notify_all();
              return;
            }
            run.index = next++;
            try {
              run.shrinkable = draw(run.index);
              run.spec = run.shrinkable->value();
            } catch (...) {  // raised when committed, as one case at a time would
              run.shrinkable.reset();
              run.error = std::current_exception();
            }
          }
          if (run.shrinkable && Selection::fits(run.spec)) execute(run, 0);
          {
            std::lock_guard<std::mutex> lock(mutex);
            const int64_t index = run.index;
            done.emplace(index, std::move(run));
          }
          changed.notify_all();
        }
      };
      std::vector<std::thread> threads;
      // Stops and joins them however this thread leaves (a commit may throw):
      // they finish the case each has started.
      struct Join {
        std::vector<std::thread>& threads;
        std::function<void()> stop;
        ~Join() {
          stop();
          for (std::thread& t : threads) t.join();
        }
      } join{threads, [&] {
               {
                 std::lock_guard<std::mutex> lock(mutex);
                 stop = true;
               }
               changed.notify_all();
             }};
      for (int k = 0; k < o.concurrent_cases; ++k) threads.emplace_back(startAndCheck);
      for (int64_t i = 0; i < planned && going; ++i) {
        if (!mine(i)) continue;
        CaseChecks run;
        {
          std::unique_lock<std::mutex> lock(mutex);
          changed.wait(lock, [&] { return done.count(i) || (stop && next <= i); });
          const auto it = done.find(i);
          if (it == done.end()) break;  // not started: the time budget ran out
          run = std::move(it->second);
          done.erase(it);
        }
        if (!run.shrinkable) std::rethrow_exception(run.error);
        going = commit(run);
        advance();
      }
      join.stop();
      std::lock_guard<std::mutex> lock(mutex);
      if (timed_out) result.stopped_by_time = true;
    }
    // A top-up: the plan gave each cell its share of cases, but a case may be
    // inconclusive (or skipped): further cases, each drawn for a cell still
    // short of judged cases (its kernel and dtype; the short cells taken in
    // turn) and run if it applies to one, until none is short (or `cases`
    // cases have run). The sequence's own cases would seldom be one: on two
    // GPUs the real-rank fused variants' fp32 fused_vs_unfused cells, whose
    // rows are mostly not determined bit for bit (NCCL's order may round them
    // otherwise), were 14 and 16 of 50 after the whole cap. A draw in a value
    // regime (distribution) where the cell's cases were seldom judged is
    // mostly drawn again: kept with probability its judged rate (Laplace's)
    // over the best regime's, so the cell is topped up where it can be judged
    // without leaving the other regimes. Draws cost microseconds, runs do not.
    // Top-up draw i is a pure function of (seed, i, the cell and what the
    // cell judged so far), and a shard tops up its own share of each cell
    // from its own indices and its share of the cases left, so shards never
    // run the same case.
    std::map<std::pair<std::string, DType>, rc::Gen<CaseSpec>> cell_generators;
    int64_t turn = 0;
    const int64_t top_up_cap = (o.cases - planned + o.shard_count - 1) / o.shard_count;
    const int64_t last_draw = planned + kTopUpDrawsPerCase * std::max<int64_t>(o.cases, 1);
    // The short cells change only when a case runs: not recomputed for each draw.
    auto below = result.belowTarget();
    for (int64_t i = planned; going && o.per_cell > 0 && result.topped_up_cases < top_up_cap && i < last_draw; ++i) {
      if (!mine(i)) continue;
      if (below.empty() || out_of_time()) break;
      const auto& [short_kernel, short_property, short_dtype] = below[size_t(turn++) % below.size()].first;
      const DType dtype = *parseDType(short_dtype);
      auto generator_of_cell = cell_generators.find({short_kernel, dtype});
      if (generator_of_cell == cell_generators.end())
        generator_of_cell = cell_generators
                                .emplace(std::pair{short_kernel, dtype},
                                         gen::caseSpec(gen::CaseOptions{o.op, {short_kernel}, {dtype}, o.tier}))
                                .first;
      const rc::Random random(rc::Random::Key{o.seed, uint64_t(i), kTopUpSalt, 0});
      const rc::Shrinkable<CaseSpec> shrinkable = generator_of_cell->second(random, int(i % 101));
      try {
        validateCase(shrinkable.value());
      } catch (const CaseParseError&) {
        continue;
      }
      const CaseSpec& spec = shrinkable.value();
      const bool needed = Selection::fits(spec) && std::any_of(sel.properties.begin(), sel.properties.end(), [&](const Property* p) {
        const std::tuple<std::string, std::string, std::string> cell{spec.kernel, p->name, dtypeName(spec.dtype)};
        return sel.applies(*p, spec) &&
               std::any_of(below.begin(), below.end(), [&](const auto& b) { return b.first == cell; });
      });
      if (!needed) continue;
      const auto& regimes = judged_by_regime[{short_kernel, short_property, short_dtype}];
      auto judgedRate = [](const std::pair<int64_t, int64_t>& r) { return (r.first + 1.0) / (r.second + 2.0); };
      double best = judgedRate({0, 0});  // a regime not yet seen
      for (const auto& [dist, r] : regimes) best = std::max(best, judgedRate(r));
      const auto seen = regimes.find(spec.x.kind);
      const double rate = seen == regimes.end() ? judgedRate({0, 0}) : judgedRate(seen->second);
      const double u = double(mix64(o.seed ^ mix64(uint64_t(i) ^ kTopUpSalt)) >> 11) * 0x1p-53;
      if (u >= rate / best) continue;
      ++progress.total;
      ++result.topped_up_cases;
      going = runGenerated(i, shrinkable, /*top_up=*/true);
      advance();
      below = result.belowTarget();
    }
  } catch (const CudaError& e) {
    if (!first_error_while.empty()) in_flight = first_error_while;
    result.fatal_error = fmt::format("{}\n  while running: {}", e.what(), in_flight);
    if (o.json) o.json->write({{"type", "fatal"}, {"error", e.what()}, {"while", in_flight}});
    log(fmt::format("FATAL: {} (the GPU context is lost; results so far are kept)", result.fatal_error));
  }
  result.seconds = since(t0);
  return result;
}

}  // namespace ulpcheck
