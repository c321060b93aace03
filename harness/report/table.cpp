#include "harness/report/table.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/phase_timer.h"
#include "harness/runner/campaign.h"
#include "harness/runner/campaign_json.h"
#include "properties/accuracy.h"

namespace ulpcheck {

namespace {
/// A figure for the table: 3 significant digits, "inf" beyond, "-" where none.
std::string figure(double v, bool have = true) {
  if (!have) return "-";
  if (!std::isfinite(v)) return "inf";
  return fmt::format("{:.3g}", v);
}
}  // namespace

std::string formatCampaignTable(const CampaignResult& r) {
  size_t kernel_width = 6;
  for (const auto& [key, c] : r.cells) kernel_width = std::max(kernel_width, std::get<0>(key).size());
  // Each line opens with its mark: '#' on the header, a space on a cell's row.
  const std::string row = "{}{:<{}} {:<16} {:<5} {:>6} {:>6} {:>8} {:>7} {:>5} {:>8} {:>8} {:>8} {:>9} {:>8}\n";
  std::string out = fmt::format(fmt::runtime(row), "#", "kernel", kernel_width, "property", "dtype", "cases", "#wrong",
                                "expected", "inconcl", "skip", "p50 e/b", "p99 e/b", "max e/b", "ulp@scale", "time(s)");
  for (const auto& [key, c] : r.cells) {
    const auto& [kernel, property, dtype] = key;
    // Error figures where the property judged values (accuracy): percentiles
    // of err/budget over every element of the cell's cases, and the largest
    // error in ulps of an element's scale (properties/error_distribution.h).
    const ErrorDistribution e = c.allErrors();
    const bool have = e.count > 0;
    out += fmt::format(fmt::runtime(row), " ", kernel, kernel_width, property, dtype, c.cases, c.failed, c.expected,
                       c.inconclusive, c.skipped, figure(e.ratioQuantile(0.5), have),
                       figure(e.ratioQuantile(0.99), have), figure(c.max_ratio, have), figure(e.max_ulp_at_scale, have),
                       fmt::format("{:.2f}", c.seconds));
  }
  return out;
}

std::string formatJudgedSummary(const CampaignResult& r) {
  // Per property over the campaign's cells: how many cases were judged (with
  // full power, for accuracy), how many could not have seen a gross error.
  std::map<std::string, CellStats> by_property;
  for (const auto& [key, c] : r.cells) {
    CellStats& s = by_property[std::get<1>(key)];
    s.cases += c.cases, s.passed += c.passed, s.failed += c.failed, s.expected += c.expected;
    s.skipped += c.skipped, s.inconclusive += c.inconclusive, s.faulted += c.faulted;
  }
  std::string out;
  // A fault (the kernel crashed, hung or returned an error) fails its case
  // but judges nothing: it is not counted among the judged cases.
  for (const auto& [property, s] : by_property)
    out += fmt::format(
        "# {:<18} {} of {} cases judged{}{}{}{}\n", property, s.judged() - s.faulted, s.cases,
        property == "accuracy" ? " with full power" : "",
        s.faulted ? fmt::format(", {} faulted (the kernel crashed, hung or returned an error)", s.faulted) : "",
        s.inconclusive ? fmt::format(", {} inconclusive", s.inconclusive) : "",
        s.skipped ? fmt::format(", {} skipped", s.skipped) : "");
  if (r.per_cell > 0 && r.shard_count == 1) {
    const auto below = r.belowTarget();
    if (below.empty()) {
      const auto decided = r.decidedByFailure();
      int64_t fewest = -1, failed_cells = 0;
      for (const auto& cell : r.applicable_cells) {
        if (decided.count({std::get<0>(cell), std::get<1>(cell)})) {
          ++failed_cells;
          continue;
        }
        const auto it = r.cells.find(cell);
        const int64_t judged = it == r.cells.end() ? 0 : it->second.judged();
        fewest = fewest < 0 ? judged : std::min(fewest, judged);
      }
      out += failed_cells == 0
                 ? fmt::format("# target met: each of the {} kernel x property x dtype cells judged >= {} cases "
                               "conclusively (fewest {})\n",
                               r.applicable_cells.size(), r.per_cell, fewest)
                 : fmt::format("# target met: {} of the {} kernel x property x dtype cells judged >= {} cases "
                               "conclusively{}; {} decided by a failure\n",
                               r.applicable_cells.size() - failed_cells, r.applicable_cells.size(), r.per_cell,
                               fewest >= 0 ? fmt::format(" (fewest {})", fewest) : "", failed_cells);
    } else {
      std::string list;
      for (const auto& [cell, judged] : below)
        list += fmt::format("{}{} {} {}: {}", list.empty() ? "" : ", ", std::get<0>(cell), std::get<1>(cell),
                            std::get<2>(cell), judged);
      out += fmt::format("# BELOW TARGET: {} of {} kernel x property x dtype cells judged fewer than {} cases "
                         "conclusively: {}\n",
                         below.size(), r.applicable_cells.size(), r.per_cell, list);
    }
  }
  for (const auto& [kernel, property] : r.unjudged())
    out += fmt::format("# NOTHING JUDGED: {} applies to {} but judged none of its cases\n", property, kernel);
  for (const auto& property : r.inapplicable_properties)
    out += fmt::format("# NOTHING JUDGED: --property {} applies to no selected kernel\n", property);
  return out;
}

std::string formatCoverage(const CampaignResult& r) {
  std::string out;
  for (const auto& [kernel, paths] : r.paths) {
    if (paths.empty()) continue;
    std::string reached, never;
    for (const auto& [path, cases] : paths) {
      if (cases) reached += fmt::format("{}{} {}", reached.empty() ? "" : ", ", path, cases);
      else never += fmt::format("{}{}", never.empty() ? "" : ", ", path);
    }
    out += fmt::format("# paths of {} (cases): {}\n", kernel, reached.empty() ? "none reached" : reached);
    if (!never.empty()) out += fmt::format("#   NEVER REACHED by this run: {}\n", never);
  }
  return out;
}

std::string formatFindings(const Outcome& o) {
  std::string out;
  // A header before the first finding of each kind: a bitwise property's
  // findings compare two runs' bits (no exact value, ulp or budget).
  enum class Header { None, Accuracy, Bitwise } header = Header::None;
  for (const Finding& f : o.findings) {
    if (f.tensor.empty()) {
      out += "    " + f.note + "\n";
      continue;
    }
    if (f.bitwise) {
      if (header != Header::Bitwise)
        out += fmt::format("    {:<6} {:>7} {:>6}  {:<24} {:<24} {}\n", "tensor", "row", "col", "got", "reference run",
                           "bits / inputs");
      header = Header::Bitwise;
      out += fmt::format("    {:<6} {:>7} {:>6}  {:<24} {:<24} {}{}{}\n", f.tensor, f.row, f.col, hexFloat(f.got),
                         hexFloat(f.exact), f.note, f.inputs.empty() ? "" : "  ", f.inputs);
      continue;
    }
    if (header != Header::Accuracy)
      out += fmt::format("    {:<6} {:>7} {:>6}  {:<24} {:<24} {:<24} {:>10} {:>10} {:>9}  {}\n", "tensor", "row",
                         "col", "got", "exact", "correctly rounded", "ulp", "budget", "err/bud", "inputs / note");
    header = Header::Accuracy;
    out += fmt::format("    {:<6} {:>7} {:>6}  {:<24} {:<24} {:<24} {:>10.4g} {:>10.4g} {:>9.3g}  {}{}{}\n", f.tensor,
                       f.row, f.col, hexFloat(f.got), hexFloat(f.exact), hexFloat(f.correctly_rounded), f.ulp,
                       f.budget_ulp, f.ratio, f.inputs, f.inputs.empty() || f.note.empty() ? "" : "  ", f.note);
  }
  return out;
}

std::string formatStats(const Outcome& o) {
  if (o.stats.empty()) return "";
  std::string out = fmt::format("    {:<6} {:>9} {:>7} {:>11} {:>11} {:>11}  {}\n", "tensor", "elements", "#wrong",
                                "max_ulp", "rms_ulp", "max_err/bud", "rounding bias");
  for (const TensorStats& s : o.stats)
    out += fmt::format("    {:<6} {:>9} {:>7} {:>11.4g} {:>11.4g} {:>11.4g}  {}\n", s.tensor, s.elements, s.wrong,
                       s.max_ulp, s.rms_ulp, s.max_ratio, describeBias(s.bias) + (s.bias.biased() ? "  BIASED" : ""));
  return out;
}

std::string formatFailure(const FailureRecord& f) {
  std::string out = fmt::format("FAILED {} ({}{})\n", f.property, f.kind,
                                f.case_index >= 0 ? fmt::format(", case {}", f.case_index) : "");
  if (f.kind == "generated") {
    out += fmt::format("  original: {}\n", toCaseString(f.original));
    out += fmt::format("  shrunk ({} steps): {}\n", f.shrink_steps, toCaseString(f.shrunk));
  } else {
    out += fmt::format("  case: {}\n", toCaseString(f.shrunk));
  }
  out += fmt::format("  {}\n", f.outcome.summary);
  out += formatFindings(f.outcome);
  if (!f.corpus_file.empty())
    out += fmt::format("  {}: {}\n", f.kind == "regression" ? "regression file" : "saved", f.corpus_file);
  out += fmt::format("  reproduce: {}\n", reproCommand(f));
  return out;
}

std::string formatFailureBriefly(const FailureRecord& f) {
  return fmt::format("FAILED {} ({}{}): {}\n  {}\n  reproduce: {}\n", f.property, f.kind,
                     f.case_index >= 0 ? fmt::format(", case {}", f.case_index) : "", toCaseString(f.shrunk),
                     f.outcome.summary, reproCommand(f));
}

nlohmann::json campaignSummaryJson(const CampaignResult& r) {
  nlohmann::json j = {{"type", "summary"},
                      {"op", r.op},
                      {"seed", fmt::format("{:#x}", r.seed)},
                      {"cases", r.cases_run},
                      {"regression_cases", r.regression_cases},
                      {"failures", r.failures.size()},
                      {"stopped_by_time", r.stopped_by_time},
                      {"planned_cases", r.planned_cases},
                      {"topped_up_cases", r.topped_up_cases},
                      {"per_cell", r.per_cell},
                      {"shard", {r.shard_index + 1, r.shard_count}},
                      {"seconds", r.seconds},
                      {"fatal_error", r.fatal_error}};
  for (const auto& [key, c] : r.cells) {
    const auto& [kernel, property, dtype] = key;
    j["cells"].push_back({{"kernel", kernel},
                          {"property", property},
                          {"dtype", dtype},
                          {"cases", c.cases},
                          {"wrong", c.failed},
                          {"expected", c.expected},
                          {"skipped", c.skipped},
                          {"inconclusive", c.inconclusive},
                          {"judged", c.judged()},
                          {"max_ulp", c.max_ulp},
                          {"max_ratio", c.max_ratio},
                          {"seconds", c.seconds},
                          {"errors", errorsJson(c)}});
  }
  for (const auto& [kernel, property] : r.unjudged())
    j["unjudged"].push_back({{"kernel", kernel}, {"property", property}});
  for (const auto& [cell, judged] : r.belowTarget())
    j["below_target"].push_back({{"kernel", std::get<0>(cell)},
                                 {"property", std::get<1>(cell)},
                                 {"dtype", std::get<2>(cell)},
                                 {"judged", judged}});
  for (const auto& property : r.inapplicable_properties) j["inapplicable_properties"].push_back(property);
  for (const auto& [kernel, paths] : r.paths)
    for (const auto& [path, cases] : paths) j["paths"][kernel][path] = cases;
  for (const auto& f : r.failures)
    j["failure_list"].push_back({{"property", f.property},
                                 {"kind", f.kind},
                                 {"shrunk", toCaseString(f.shrunk)},
                                 {"repro", reproCommand(f)},
                                 {"summary", f.outcome.summary},
                                 {"seconds_to_detect", f.seconds_to_detect}});
  return j;
}

std::string formatPhaseTimes(const std::array<double, size_t(Phase::kCount)>& phases, double seconds) {
  std::string out = seconds >= 0 ? fmt::format("time {:.1f} s:", seconds) : "time:";
  double charged = 0;
  for (size_t i = 0; i < phases.size(); ++i) {
    out += fmt::format("{} {} {:.1f} s", i ? "," : "", phaseName(Phase(i)), phases[i]);
    charged += phases[i];
  }
  if (seconds >= 0)
    out += fmt::format(", the rest (case generation, shrinking, reports) {:.1f} s", std::max(0.0, seconds - charged));
  return out;
}

}  // namespace ulpcheck
