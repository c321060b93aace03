#include "harness/runner/mutants.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/report/html.h"
#include "harness/runner/exit_codes.h"
#include "kernels/plugin/remote.h"

namespace ulpcheck {

bool MutantRow::killedAsDeclared() const {
  const auto it = by_property.find(mutant.caught_by);
  return it != by_property.end() && it->second.kill.has_value();
}

const FailureRecord* MutantRow::firstKill() const {
  const FailureRecord* first = nullptr;
  for (const auto& [name, cell] : by_property)
    if (cell.kill && (!first || cell.kill->seconds_to_detect < first->seconds_to_detect)) first = &*cell.kill;
  return first;
}

int64_t ControlRow::falseAlarms() const {
  int64_t n = int64_t(false_alarms.size());
  for (const auto& [name, v] : by_baseline) n += v.caught;
  return n;
}

bool MutantRow::mustReplay(const std::string& property) const {
  if (property == mutant.caught_by || property == "memory_safety") return true;
  const auto memory = by_property.find("memory_safety");
  return !(memory != by_property.end() && memory->second.kill && memory->second.replays);
}

int KillMatrix::exitCode() const {
  if (rows.empty()) return exit_code::kNothingRan;
  if (!not_run.empty()) return exit_code::kRuntimeError;
  for (const MutantRow& r : rows)
    if (!r.fatal_error.empty()) return exit_code::kRuntimeError;
  for (const ControlRow& c : controls)
    if (!c.fatal_error.empty()) return exit_code::kRuntimeError;
  for (const MutantRow& r : rows) {
    if (!r.killedAsDeclared()) return exit_code::kPropertyFailed;
    for (const auto& [name, cell] : r.by_property)
      if (cell.kill && !cell.replays && !cell.intermittent && r.mustReplay(name)) return exit_code::kPropertyFailed;
  }
  for (const ControlRow& c : controls)
    if (c.falseAlarms()) return exit_code::kPropertyFailed;
  return exit_code::kOk;
}

double KillMatrix::medianSecondsToFirstKill() const {
  std::vector<double> s;
  for (const MutantRow& r : rows)
    if (const FailureRecord* f = r.firstKill()) s.push_back(f->seconds_to_detect);
  if (s.empty()) return 0;
  std::sort(s.begin(), s.end());
  return s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
}

namespace {

/// A campaign of one variant over generated cases only: the regression corpus
/// would kill most mutants at once and say nothing about how fast the
/// generators find each bug.
CampaignResult generatedCasesOnly(const KillMatrixOptions& o, const KernelInfo& k, const ExecContext& exec) {
  CampaignOptions c;
  c.op = k.op;
  c.kernels = {k.name};
  c.cases = o.max_cases;
  c.seed = o.seed;
  c.time_budget_s = o.seconds_per_mutant;
  c.shrink_budget_s = o.shrink_budget_s;
  c.tier = o.tier;
  c.replay_corpus = false;
  c.save_failures = false;
  c.json = o.json;
  if (o.stop_at_declared_kill && k.isMutant()) c.stop_after_failure_of = k.caught_by;
  return runCampaign(c, exec);
}

/// Whether the shrunk case of a kill fails again when replayed alone: its
/// `ulpcheck repro --repeat R` command run through `cli` (exit code 1: a
/// property failed in some repeat), or without one runCase in this process.
/// A deterministic defect fails on the first run; a race shows on some runs
/// only (the cuda_atomic race ulpcheck found failed 1 run in 3, so 20 runs
/// miss it with probability (2/3)^20 < 1e-3), and a property whose failures
/// are intermittent compares many runs in each repeat already.
int replayRepeats(bool intermittent) { return intermittent ? 10 : 20; }

bool replays(const FailureRecord& f, bool intermittent, const std::string& cli, const ExecContext& exec) {
  const int repeats = replayRepeats(intermittent);
  if (!cli.empty()) {
    const std::string args = reproArgs(f.shrunk, f.property, f.perturb_schedule, repeats);
    const int status = std::system(fmt::format("'{}' {} > /dev/null 2>&1", cli, args).c_str());
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == exit_code::kPropertyFailed;
  }
  ExecContext e = exec;
  e.perturb_schedule = f.perturb_schedule;
  e.determinism_repeats = kThoroughDeterminismRepeats;  // as `ulpcheck repro` runs it
  const auto replay = runCase(f.shrunk, {f.property}, e, repeats);
  return !replay.empty() && replay.front().failed > 0;
}

/// Whether property p applies to variant k at all (the kill matrix says n/a where not).
bool appliesToVariant(const std::string& p, const KernelInfo& k) {
  const Property* property = findProperty(p);
  const OpAdapter* op = findOp(k.op);
  return property && op && property->appliesTo(*op, k);
}

/// A row's generated cases, in a worker process of its own where the
/// variant runs in one: a mutant may leave its process damaged beyond what
/// its own cases show (cuda_bug_scratch_sized_by_n writes past its scratch),
/// and no row may be judged on another's damage. Seen on the H200
/// (2026-11-28, `mutants --backend cuda --cases-per-mutant 60`): with every
/// variant in one worker, the control cuda_twopass failed one case with
/// cudaErrorIllegalInstruction in 2 of 3 whole matrices, that case alone
/// passed (also under compute-sanitizer), and no matrix with fewer mutants
/// before it failed (0 of 7); with a fresh worker per row, 0 of 3 failed.
CampaignResult casesOfRow(const KillMatrixOptions& o, const KernelInfo& k, const ExecContext& exec) {
  if (k.remote) remote::restartWorkers();
  return generatedCasesOnly(o, k, exec);
}

ControlRow runControl(const KillMatrixOptions& o, const KernelInfo& k, const ExecContext& exec) {
  if (o.log) o.log(fmt::format("control {} ({}): a correct variant, must raise no alarm", k.name, k.op));
  const CampaignResult r = casesOfRow(o, k, exec);
  ControlRow row;
  row.variant = k;
  row.cases_run = r.cases_run;
  row.seconds = r.seconds;
  row.false_alarms = r.failures;
  row.fatal_error = r.fatal_error;
  if (r.fatal_error.empty())
    for (const Baseline& b : baselines()) row.by_baseline[b.name] = runBaseline(b, k, exec);
  if (o.json) {
    nlohmann::json j = {{"type", "control"},      {"variant", k.name},      {"op", k.op},
                        {"cases", row.cases_run}, {"seconds", row.seconds}, {"false_alarms", row.falseAlarms()}};
    for (const FailureRecord& f : row.false_alarms)
      j["property_false_alarms"].push_back({{"property", f.property}, {"repro", reproCommand(f)}});
    j["properties_applying"] = nlohmann::json::array();
    for (const Property& p : propertyRegistry())
      if (appliesToVariant(p.name, k)) j["properties_applying"].push_back(p.name);
    for (const auto& [name, v] : row.by_baseline)
      j["baselines"][name] = {{"applies", v.applies}, {"false_alarm", v.caught}, {"detail", v.detail}};
    o.json->write(j);
  }
  return row;
}

}  // namespace

KillMatrix runKillMatrix(const KillMatrixOptions& o, const ExecContext& exec) {
  KillMatrix m;
  for (const Property& p : propertyRegistry()) m.properties.push_back(p.name);
  for (const Baseline& b : baselines()) m.baselines.push_back(b.name);
  std::vector<KernelInfo> mutants;
  for (const KernelInfo& k : kernelCatalog()) {
    if (!k.isMutant()) continue;
    const bool named = std::find(o.mutants.begin(), o.mutants.end(), k.name) != o.mutants.end();
    if (o.mutants.empty() ? k.backend == o.backend : named) mutants.push_back(k);
  }
  for (const auto& name : o.mutants)
    if (std::none_of(mutants.begin(), mutants.end(), [&](const KernelInfo& k) { return k.name == name; }))
      throw std::invalid_argument(fmt::format("no mutant named '{}' (see `ulpcheck list`)", name));

  for (const KernelInfo& k : mutants) {
    if (!m.rows.empty() && !m.rows.back().fatal_error.empty()) {
      m.not_run.push_back(k.name);
      continue;
    }
    if (o.log) o.log(fmt::format("mutant {} ({}): {}", k.name, k.op, k.bug));
    const CampaignResult r = casesOfRow(o, k, exec);

    MutantRow row;
    row.mutant = k;
    row.cases_run = r.cases_run;
    row.seconds = r.seconds;
    row.fatal_error = r.fatal_error;
    for (const auto& name : m.properties) row.by_property[name];
    for (const auto& [key, cell] : r.cells) row.by_property[std::get<1>(key)].applies |= cell.judged() > 0;
    for (const FailureRecord& f : r.failures) {
      KillCell& cell = row.by_property[f.property];
      cell.kill = f;
      const Property* p = findProperty(f.property);
      cell.intermittent = p && p->intermittent_failures;
      cell.replays = r.fatal_error.empty() && replays(f, cell.intermittent, o.cli, exec);
    }
    if (r.fatal_error.empty())
      for (const Baseline& b : baselines()) row.by_baseline[b.name] = runBaseline(b, k, exec);
    if (o.json) {
      nlohmann::json j = {
          {"type", "mutant"},       {"mutant", k.name},         {"op", k.op},
          {"bug", k.bug},           {"caught_by", k.caught_by}, {"killed_as_declared", row.killedAsDeclared()},
          {"cases", row.cases_run}, {"seconds", row.seconds},   {"in_worker", k.remote}};
      for (const auto& [name, cell] : row.by_property)
        j["properties"][name] =
            cell.kill ? nlohmann::json{{"killed", true},
                                       {"cases_to_detect", cell.kill->case_index + 1},
                                       {"seconds_to_detect", cell.kill->seconds_to_detect},
                                       {"shrink_steps", cell.kill->shrink_steps},
                                       {"shrink_finished", cell.kill->shrink_finished},
                                       {"shrunk_replays", cell.replays},
                                       {"intermittent", cell.intermittent},
                                       {"repro", reproCommand(cell.kill->shrunk, name, cell.kill->perturb_schedule,
                                                              cell.intermittent ? replayRepeats(true) : 1)}}
                      : nlohmann::json{{"killed", false}, {"applies", cell.applies}};
      for (const auto& [name, v] : row.by_baseline)
        j["baselines"][name] = {{"applies", v.applies}, {"caught", v.caught}, {"detail", v.detail}};
      o.json->write(j);
    }
    m.rows.push_back(std::move(row));
  }
  if (o.controls && m.not_run.empty() && (m.rows.empty() || m.rows.back().fatal_error.empty())) {
    std::vector<std::string> ops;
    for (const MutantRow& r : m.rows)
      if (std::find(ops.begin(), ops.end(), r.mutant.op) == ops.end()) ops.push_back(r.mutant.op);
    for (const std::string& op : ops)
      for (const std::string& name : defaultKernels(op, exec.backend))
        for (const KernelInfo& k : kernelCatalog())
          if (k.op == op && k.name == name) {
            if (!m.controls.empty() && !m.controls.back().fatal_error.empty()) m.not_run.push_back(k.name);
            else m.controls.push_back(runControl(o, k, exec));
          }
  }
  return m;
}

std::string formatKillMatrix(const KillMatrix& m) {
  // A kill: "#cases/seconds", a survival "-", a property that skipped every case "n/a".
  std::string out = fmt::format("{:<31} {:<17}", "mutant", "op");
  for (const auto& p : m.properties) out += fmt::format(" {:>16}", p);
  for (const auto& b : m.baselines) out += fmt::format(" {:>21}", b);
  out += "  verdict\n";
  for (const MutantRow& r : m.rows) {
    out += fmt::format("{:<31} {:<17}", r.mutant.name, r.mutant.op);
    for (const auto& p : m.properties) {
      const KillCell& cell = r.by_property.at(p);
      const std::string mark = cell.kill      ? fmt::format("#{}/{:.2f}s{}", cell.kill->case_index + 1,
                                                            cell.kill->seconds_to_detect, p == r.mutant.caught_by ? "*" : "")
                               : cell.applies ? (p == r.mutant.caught_by ? "SURVIVED*" : "-")
                                              : "n/a";
      out += fmt::format(" {:>16}", mark);
    }
    for (const auto& b : m.baselines) {
      const auto it = r.by_baseline.find(b);
      const std::string mark = it == r.by_baseline.end() || !it->second.applies ? "n/a"
                               : it->second.caught                              ? "caught"
                                                                                : "MISSED";
      out += fmt::format(" {:>21}", mark);
    }
    out += r.fatal_error.empty() ? (r.killedAsDeclared() ? "  killed\n" : "  SURVIVED its declared property\n")
                                 : "  FATAL\n";
  }
  for (const ControlRow& c : m.controls) {
    out += fmt::format("{:<31} {:<17}", "(correct) " + c.variant.name, c.variant.op);
    for (const auto& p : m.properties) {
      const bool alarm = std::any_of(c.false_alarms.begin(), c.false_alarms.end(),
                                     [&](const FailureRecord& f) { return f.property == p; });
      out += fmt::format(" {:>16}", alarm ? "FALSE ALARM" : appliesToVariant(p, c.variant) ? "pass" : "n/a");
    }
    for (const auto& b : m.baselines) {
      const auto it = c.by_baseline.find(b);
      out += fmt::format(" {:>21}", it == c.by_baseline.end() || !it->second.applies ? "n/a"
                                    : it->second.caught                              ? "FALSE ALARM"
                                                                                     : "pass");
    }
    out += !c.fatal_error.empty() ? "  FATAL\n"
           : c.falseAlarms()      ? fmt::format("  {} FALSE ALARMS in {} cases\n", c.falseAlarms(), c.cases_run)
                                  : fmt::format("  no false alarm in {} cases\n", c.cases_run);
  }
  out += "(#cases/seconds to the first kill; * the property the mutant declares must catch it; the last columns are\n"
         " the baseline checkers, on their own fixed randn cases, against the correctly rounded reference;\n"
         " (correct) rows are the controls: correct variants run the same way, where any failure is a false alarm)\n";
  for (const auto& b : m.baselines) {
    int applies = 0, missed = 0;
    for (const MutantRow& r : m.rows) {
      const auto it = r.by_baseline.find(b);
      if (it == r.by_baseline.end() || !it->second.applies) continue;
      ++applies;
      missed += !it->second.caught;
    }
    out += fmt::format("{} misses {} of the {} mutants it tests\n", b, missed, applies);
  }
  int64_t killed = 0, false_alarms = 0, control_cases = 0;
  for (const MutantRow& r : m.rows) killed += r.killedAsDeclared();
  for (const ControlRow& c : m.controls) false_alarms += c.falseAlarms(), control_cases += c.cases_run;
  out += fmt::format("{} of {} mutants killed by their declared property; median time to first detection: {:.2f} s\n",
                     killed, m.rows.size(), m.medianSecondsToFirstKill());
  if (!m.controls.empty())
    out += fmt::format("{} false alarms on {} correct variants ({} cases)\n", false_alarms, m.controls.size(),
                       control_cases);
  out += "shrunk reproductions of the declared kills (replayed alone, as `ulpcheck repro --repeat` runs them):\n";
  for (const MutantRow& r : m.rows) {
    const auto it = r.by_property.find(r.mutant.caught_by);
    if (it != r.by_property.end() && it->second.kill) {
      const FailureRecord& f = *it->second.kill;
      const int repeats = replayRepeats(it->second.intermittent);
      const std::string replay = it->second.replays ? "fails again"
                                 : it->second.intermittent
                                     ? fmt::format("intermittent: no failure in {} repeats", repeats)
                                     : fmt::format("DOES NOT REPLAY in {} repeats", repeats);
      out += fmt::format(
          "  {} [{}]: {}\n", r.mutant.name, replay,
          reproCommand(f.shrunk, r.mutant.caught_by, f.perturb_schedule, it->second.intermittent ? repeats : 1));
    }
    // Other kills that did not fail again alone: the command would mislead.
    for (const auto& [property, cell] : r.by_property) {
      if (!cell.kill || cell.replays || cell.intermittent || property == r.mutant.caught_by) continue;
      out += fmt::format("  {} also failed {}, which DOES NOT REPLAY in {} repeats{}: {}\n", r.mutant.name, property,
                         replayRepeats(false),
                         r.mustReplay(property) ? ""
                                                : " (it follows from the out-of-bounds write its memory_safety kill "
                                                  "replays; what that overwrites depends on the memory layout)",
                         reproCommand(cell.kill->shrunk, property, cell.kill->perturb_schedule, 1));
    }
    if (!r.fatal_error.empty()) out += fmt::format("  {}: FATAL {}\n", r.mutant.name, r.fatal_error);
  }
  if (!m.not_run.empty()) {
    // The variants after a fatal fault: mutants, or controls once a control faulted.
    out += fmt::format("the GPU context was lost (FATAL above), so these did not run: {}\n",
                       fmt::join(m.not_run, ", "));
    std::string rerun;
    for (const KernelInfo& k : kernelCatalog())
      if (k.isMutant() && std::find(m.not_run.begin(), m.not_run.end(), k.name) != m.not_run.end())
        rerun += " --mutant " + k.name;
    if (!rerun.empty()) out += "  run the mutants in a fresh process: ulpcheck mutants" + rerun + "\n";
  }
  for (const ControlRow& c : m.controls) {
    for (const FailureRecord& f : c.false_alarms)
      out += fmt::format("  FALSE ALARM {}: {}\n", c.variant.name, reproCommand(f));
    if (!c.fatal_error.empty()) out += fmt::format("  {}: FATAL {}\n", c.variant.name, c.fatal_error);
  }
  return out;
}

namespace {
/// The matrix's variants run in worker processes where their op has doors
/// (kernels/door.h), as plugins do (kernels/plugin/remote.h), a fresh one
/// for each row (casesOfRow): a mutant that faults the GPU (a sticky CUDA
/// error), hangs or writes out of bounds is a failing case of that mutant,
/// and the rest of the matrix still runs, undamaged. A multi-rank op's (no
/// doors) run in this process. Returns how many were sent to a worker.
int runVariantsInWorker(Backend backend) {
  int in_worker = 0;
  for (const KernelInfo& k : kernelCatalog())
    if (k.backend == backend && !k.remote && remote::canRunInWorker(k.op)) {
      remote::runInWorker(k.op, k.name);
      ++in_worker;
    }
  return in_worker;
}
}  // namespace

int runMutants(MutantsRequest request, const ExecContext& exec) {
  KillMatrixOptions& o = request.matrix;
  o.backend = exec.backend;
  o.cli = std::filesystem::read_symlink("/proc/self/exe").string();  // kills replay through this very binary
  checkOutputFiles({{"--html", request.html}});
  const int in_worker = request.in_process ? 0 : runVariantsInWorker(exec.backend);
  std::unique_ptr<JsonlWriter> json = openJsonLines(request.json);
  std::vector<nlohmann::json> kept;  // the matrix's records, for --html
  if (!request.html.empty()) {
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
  const std::string bound = o.seconds_per_mutant > 0 && request.cases_bounded
                                ? fmt::format("{} generated cases or {:g} s each", o.max_cases, o.seconds_per_mutant)
                            : o.seconds_per_mutant > 0
                                ? fmt::format("{:g} s of generated cases each", o.seconds_per_mutant)
                                : fmt::format("{} generated cases each", o.max_cases);
  fmt::print("# kill matrix: {} mutants{}, {}, seed {:#x}, tier {}{}; {}\n", backendName(exec.backend),
             o.controls ? " and correct variants" : "", bound, o.seed, tierName(o.tier),
             exec.perturb_schedule ? ", schedule perturbed" : "",
             in_worker ? fmt::format("{} variants in worker processes, a fresh one for each (those of ops with doors)",
                                     in_worker)
                       : std::string("every variant in this process"));
  const KillMatrix m = runKillMatrix(o, exec);
  fmt::print("\n{}", formatKillMatrix(m));
  if (!request.html.empty()) writeHtmlReport(request.html, kept, "ulpcheck kill matrix");
  if (sayJsonLinesError(json.get())) return exit_code::kRuntimeError;
  return m.exitCode();
}

}  // namespace ulpcheck
