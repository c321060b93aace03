#include "harness/runner/mutants.h"

#include <algorithm>

#include <fmt/format.h>

#include "harness/runner/exit_codes.h"

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

int KillMatrix::exitCode() const {
  if (rows.empty()) return exit_code::kNothingRan;
  for (const MutantRow& r : rows)
    if (!r.fatal_error.empty()) return exit_code::kRuntimeError;
  for (const MutantRow& r : rows)
    if (!r.killedAsDeclared()) return exit_code::kPropertyFailed;
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
    if (o.log) o.log(fmt::format("mutant {} ({}): {}", k.name, k.op, k.bug));
    // Generated cases only: the regression corpus would kill most mutants at
    // once and say nothing about how fast the generators find each bug.
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
    if (o.stop_at_declared_kill) c.stop_after_failure_of = k.caught_by;
    const CampaignResult r = runCampaign(c, exec);

    MutantRow row;
    row.mutant = k;
    row.cases_run = r.cases_run;
    row.seconds = r.seconds;
    row.fatal_error = r.fatal_error;
    for (const auto& name : m.properties) row.by_property[name];
    for (const auto& [key, cell] : r.cells)
      row.by_property[std::get<1>(key)].applies |= cell.cases > cell.skipped;
    for (const FailureRecord& f : r.failures) row.by_property[f.property].kill = f;
    if (r.fatal_error.empty())
      for (const Baseline& b : baselines()) row.by_baseline[b.name] = runBaseline(b, k, exec);
    if (o.json) {
      nlohmann::json j = {{"type", "mutant"}, {"mutant", k.name}, {"op", k.op}, {"bug", k.bug},
                          {"caught_by", k.caught_by}, {"killed_as_declared", row.killedAsDeclared()},
                          {"cases", row.cases_run}, {"seconds", row.seconds}};
      for (const auto& [name, cell] : row.by_property)
        j["properties"][name] = cell.kill ? nlohmann::json{{"killed", true},
                                                           {"cases_to_detect", cell.kill->case_index + 1},
                                                           {"seconds_to_detect", cell.kill->seconds_to_detect},
                                                           {"repro", reproCommand(cell.kill->shrunk, name)}}
                                          : nlohmann::json{{"killed", false}, {"applies", cell.applies}};
      for (const auto& [name, v] : row.by_baseline)
        j["baselines"][name] = {{"applies", v.applies}, {"caught", v.caught}, {"detail", v.detail}};
      o.json->write(j);
    }
    m.rows.push_back(std::move(row));
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
      const std::string mark = cell.kill ? fmt::format("#{}/{:.2f}s{}", cell.kill->case_index + 1,
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
  out += "(#cases/seconds to the first kill; * the property the mutant declares must catch it; the last columns are\n"
         " the baseline checkers, on their own fixed randn cases, against the correctly rounded reference)\n";
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
  out += fmt::format("median time to first detection: {:.2f} s over {} mutants\n", m.medianSecondsToFirstKill(),
                     m.rows.size());
  for (const MutantRow& r : m.rows) {
    const auto it = r.by_property.find(r.mutant.caught_by);
    if (it != r.by_property.end() && it->second.kill)
      out += fmt::format("  {}: {}\n", r.mutant.name, reproCommand(it->second.kill->shrunk, r.mutant.caught_by));
    if (!r.fatal_error.empty()) out += fmt::format("  {}: FATAL {}\n", r.mutant.name, r.fatal_error);
  }
  return out;
}

}  // namespace ulpcheck
