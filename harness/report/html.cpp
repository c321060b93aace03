#include "harness/report/html.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <fmt/format.h>

#include "harness/report/junit.h"
#include "harness/runner/exit_codes.h"
#include "harness/runner/jsonl.h"
#include "properties/error_distribution.h"

namespace ulpcheck {

using json = nlohmann::json;

// What XML needs escaped, HTML5 reads the same way (&apos; included).
std::string htmlEscape(const std::string& text) { return xmlEscape(text); }

std::vector<json> readJsonLines(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw ReportInputError(fmt::format("'{}' is a folder; give the JSON-lines files written by run --json", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ReportInputError(fmt::format("cannot read '{}'", path));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<json> out;
  int line_number = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t eol = text.find('\n', start);
    const bool last_unterminated = eol == std::string::npos;
    const std::string line = text.substr(start, last_unterminated ? std::string::npos : eol - start);
    start = last_unterminated ? text.size() : eol + 1;
    ++line_number;
    if (line.empty()) continue;
    try {
      json j = json::parse(line);
      if (!j.is_object() || !j.contains("type"))
        throw ReportInputError(
            fmt::format("{}:{}: not a ulpcheck record (an object with a \"type\")", path, line_number));
      out.push_back(std::move(j));
    } catch (const json::exception& e) {
      // A run killed (or out of disk) while writing its last record leaves it
      // cut, without its newline: the whole records before it are reported.
      if (last_unterminated) {
        out.push_back({{"type", "input_note"},
                       {"text", fmt::format("{}:{}: the last line is cut mid-record (the run was interrupted while "
                                            "writing it); the {} whole records before it are reported",
                                            path, line_number, out.size())}});
        break;
      }
      throw ReportInputError(fmt::format("{}:{}: not JSON: {}", path, line_number, e.what()));
    }
  }
  if (std::none_of(out.begin(), out.end(), [](const json& j) { return j.value("type", "") != "input_note"; }))
    throw ReportInputError(fmt::format("'{}' holds no records", path));
  return out;
}

namespace {

constexpr int kPlotWidth = 280, kPlotHeight = 170;
constexpr int kLeft = 40, kRight = 10, kTop = 22, kBottom = 30;

std::string figure(double v) {
  if (std::isnan(v)) return "nan";
  if (!std::isfinite(v)) return "inf";
  return fmt::format("{:.3g}", v);
}

double number(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return INFINITY;  // JSON writes Inf as null
  return j.at(key).get<double>();
}

std::string svgOpen(const std::string& title) {
  return fmt::format(
      "<svg class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\">"
      "<text x=\"{2}\" y=\"14\" class=\"title\">{3}</text>",
      kPlotWidth, kPlotHeight, kLeft, htmlEscape(title));
}

/// A histogram of log buckets (ErrorDistribution's), trimmed to the
/// buckets that hold elements; heights on a log scale of counts; a line at
/// `mark` (err/budget = 1: the budget) where it falls inside.
std::string svgHistogram(const std::string& title, const int64_t* counts, int buckets, int low_octave, double mark,
                         const std::string& axis, double largest = NAN) {
  int first = buckets, last = -1;
  int64_t most = 0;
  for (int b = 0; b < buckets; ++b)
    if (counts[b]) first = std::min(first, b), last = std::max(last, b), most = std::max(most, counts[b]);
  std::string s = svgOpen(title);
  if (last < 0) return s + "<text x=\"60\" y=\"90\">no elements</text></svg>";
  const int n = last - first + 1;
  const double w = double(kPlotWidth - kLeft - kRight) / n, h = kPlotHeight - kTop - kBottom;
  for (int b = first; b <= last; ++b) {
    if (!counts[b]) continue;
    const double height = h * std::log10(1.0 + double(counts[b])) / std::log10(1.0 + double(most));
    const double lo = ErrorDistribution::lowerEdge(b, low_octave);
    const double hi = ErrorDistribution::upperEdge(b, low_octave, buckets);
    const bool over = mark > 0 && lo >= mark;
    s += fmt::format("<rect class=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"><title>{} to {}: "
                     "{} elements</title></rect>",
                     over ? "bar over" : "bar", kLeft + (b - first) * w, kTop + h - height, std::max(w - 1, 1.0),
                     height, figure(lo), figure(hi), counts[b]);
    if (mark > 0 && lo < mark && mark <= hi) {
      const double x = kLeft + (b - first + 1) * w;
      s += fmt::format("<line class=\"mark\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2:.1f}\"/>", x, kTop,
                       kTop + h);
    }
  }
  // The open top bucket ends at the largest value where it is known, else "beyond" its lower edge.
  const double top = ErrorDistribution::upperEdge(last, low_octave, buckets);
  const std::string end = std::isfinite(top)       ? figure(top)
                          : std::isfinite(largest) ? figure(largest)
                                                   : "beyond " + figure(ErrorDistribution::lowerEdge(last, low_octave));
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"axis\">{}</text>", kLeft, kPlotHeight - 16,
                   htmlEscape(fmt::format("{} .. {}", figure(ErrorDistribution::lowerEdge(first, low_octave)), end)));
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"axis\">{}, log heights (tallest {})</text>", kLeft, kPlotHeight - 4,
                   htmlEscape(axis), most);
  return s + "</svg>";
}

/// A colour for err/budget: pale for errors far inside the budget, orange
/// toward it (the last 12 octaves below 1), red beyond it.
std::string heatColour(double v) {
  if (v <= 0) return "#f4f4f4";
  if (v > 1) return "#c0142b";
  const double t = std::clamp((std::log2(v) + 12.0) / 12.0, 0.0, 1.0);  // 2^-12 .. 1
  const int r = 255, g = int(245 - 150 * t), b = int(220 - 200 * t);
  return fmt::format("#{:02x}{:02x}{:02x}", r, g, b);
}

std::string svgHeatmap(const std::string& title, const ErrorDistribution& d) {
  std::string s = svgOpen(title);
  const int g = ErrorDistribution::kGrid;
  const double side = std::min(kPlotWidth - kLeft - kRight, kPlotHeight - kTop - kBottom) / double(g);
  for (int r = 0; r < g; ++r)
    for (int c = 0; c < g; ++c) {
      const double v = d.worst_where[size_t(r * g + c)];
      s += fmt::format("<rect class=\"cell\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
                       "<title>rows {}/16, columns {}/16: worst err/budget {}</title></rect>",
                       kLeft + c * side, kTop + r * side, side, side, heatColour(v), r + 1, c + 1, figure(v));
    }
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"axis\">rows down, columns across (sixteenths)</text>", kLeft,
                   kPlotHeight - 4);
  return s + "</svg>";
}

/// Worst err/budget (log scale) against the element's scale (its octave).
std::string svgScale(const std::string& title, const ErrorDistribution& d) {
  std::string s = svgOpen(title);
  int first = -1, last = -1;
  for (size_t i = 0; i < d.scale_count.size(); ++i)
    if (d.scale_count[i]) first = first < 0 ? int(i) : first, last = int(i);
  if (first < 0) return s + "<text x=\"60\" y=\"90\">no elements</text></svg>";
  const double w = double(kPlotWidth - kLeft - kRight) / std::max(1, last - first + 1),
               h = kPlotHeight - kTop - kBottom;
  // y: log2 of err/budget from 2^-24 (bottom) to 2^4 (top); 1 marked.
  auto y = [&](double v) {
    return kTop + h * (1.0 - std::clamp((std::log2(std::max(v, 0x1p-24)) + 24.0) / 28.0, 0.0, 1.0));
  };
  s += fmt::format("<line class=\"mark\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>", kLeft, kPlotWidth - kRight,
                   y(1.0), y(1.0));
  for (int i = first; i <= last; ++i) {
    if (!d.scale_count[size_t(i)]) continue;
    const double v = d.scale_worst[size_t(i)];
    s += fmt::format("<circle class=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\"><title>scale 2^{}: {} elements, worst "
                     "err/budget {}</title></circle>",
                     v > 1 ? "dot over" : "dot", kLeft + (i - first + 0.5) * w, y(v), i + ErrorDistribution::kScaleLow,
                     d.scale_count[size_t(i)], figure(v));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"axis\">scale 2^{} .. 2^{}; y: log, line at 1</text>", kLeft,
                   kPlotHeight - 4, first + ErrorDistribution::kScaleLow, last + ErrorDistribution::kScaleLow);
  return s + "</svg>";
}

std::string copyable(const std::string& command) {
  return fmt::format("<div class=\"repro\"><code>{}</code> <button class=\"copy\" type=\"button\">copy</button></div>",
                     htmlEscape(command));
}

/// j[key] if it is there, else an empty object or array: a reference, so a
/// loop over it never walks a temporary.
const json& member(const json& j, const char* key, bool array = false) {
  static const json empty_object = json::object(), empty_array = json::array();
  return j.contains(key) ? j.at(key) : array ? empty_array : empty_object;
}

struct Op {
  std::string name;
  json summary;
  std::vector<json> failures;  // "failure" records: shrunk case, outcome with findings
};

/// An accuracy outcome's per-tensor figures, its rounding bias
/// (RoundingBias: the mean miss off the correctly rounded values, away from
/// zero, and what rounding to nearest allows it) among them.
std::string statsTable(const json& outcome) {
  std::string s;
  for (const json& t : member(outcome, "stats", true)) {
    const json& b = member(t, "bias");
    const bool have = b.value("elements", 0) > 0;
    const auto range = [&](const char* key) {
      const json& r = member(b, key, true);
      return r.size() == 2 ? fmt::format("{:+.3g}..{:+.3g}", r[0].get<double>(), r[1].get<double>()) : "-";
    };
    s += fmt::format(
        "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td></tr>",
        b.value("biased", false) ? "fail" : "pass", htmlEscape(t.value("tensor", "")), t.value("elements", 0),
        t.value("wrong", 0), figure(number(t, "max_ulp")), figure(number(t, "rms_ulp")), figure(number(t, "max_ratio")),
        have ? fmt::format("{:+.3g}", number(b, "error_outward_ulp")) : "-",
        have ? fmt::format("{:+.3g}", number(b, "miss_outward_ulp")) : "-", have ? range("allowed_outward") : "-",
        b.value("elements", 0));
  }
  if (s.empty()) return "";
  return "<table class=\"findings\"><tr><th>tensor</th><th>elements</th><th>#wrong</th><th>max ulp</th><th>rms ulp</th>"
         "<th>max err/budget</th><th>mean error away from zero (ulp)</th><th>mean miss off the correctly rounded, "
         "away from zero (ulp)</th><th>rounding to nearest allows</th><th>elements counted</th></tr>" +
         s + "</table>";
}

std::string findingsTable(const json& outcome) {
  if (!outcome.contains("findings")) return "";
  std::string s;
  // A bitwise property's findings compare two runs' bits: no exact value or budget.
  for (const json& f : member(outcome, "findings", true))
    if (f.value("bitwise", false))
      s += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
          htmlEscape(f.value("tensor", "")), f.value("row", 0), f.value("col", 0), htmlEscape(f.value("got", "")),
          htmlEscape(f.value("reference", "")),
          htmlEscape(f.value("note", "") + (f.value("inputs", "").empty() ? "" : " " + f.value("inputs", ""))));
  if (!s.empty())
    s = "<table class=\"findings\"><tr><th>tensor</th><th>row</th><th>col</th><th>got</th><th>reference run</th>"
        "<th>bits / inputs</th></tr>" +
        s + "</table>";
  bool accuracy = false;
  for (const json& f : member(outcome, "findings", true)) accuracy |= !f.value("bitwise", false);
  if (!accuracy) return s;
  s += "<table class=\"findings\"><tr><th>tensor</th><th>row</th><th>col</th><th>got</th><th>exact</th><th>ulp</th>"
       "<th>budget (ulp)</th><th>err/budget</th><th>inputs / note</th></tr>";
  for (const json& f : member(outcome, "findings", true))
    if (!f.value("bitwise", false))
      s += fmt::format(
          "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td>{}</td></tr>",
          htmlEscape(f.value("tensor", "")), f.value("row", 0), f.value("col", 0), htmlEscape(f.value("got", "")),
          htmlEscape(f.value("exact", "")), figure(number(f, "ulp")), figure(number(f, "budget_ulp")),
          figure(number(f, "ratio")),
          htmlEscape(f.value("inputs", "") + (f.value("note", "").empty() ? "" : " " + f.value("note", ""))));
  return s + "</table>";
}

std::string summarySection(const Op& op, int& failure_number) {
  const json& sum = op.summary;
  std::string s = fmt::format("<h2>{}</h2>", htmlEscape(op.name));
  if (sum.value("cut_short", false))
    s += "<p class=\"fail\">CUT SHORT: these JSON lines end before the op's summary (the run crashed, was killed or "
         "hung); the table is rebuilt from the cases they hold.</p>";
  s += fmt::format("<p>{} generated cases + {} regression cases in {:.1f} s{}{}{}.</p>", sum.value("cases", 0),
                   sum.value("regression_cases", 0), sum.value("seconds", 0.0),
                   sum.contains("seed") ? fmt::format(", seed {}", htmlEscape(sum.value("seed", ""))) : std::string(),
                   sum.value("per_cell", 0) > 0
                       ? fmt::format("; plan: {} per kernel x property x dtype", sum.value("per_cell", 0))
                       : std::string(),
                   sum.value("stopped_by_time", false) ? " (time budget reached)" : "");
  // The plan's target, as the text report states it.
  if (const int per_cell = sum.value("per_cell", 0); per_cell > 0 && !sum.value("cut_short", false)) {
    const json& short_cells = member(sum, "below_target", true);
    int64_t fewest = -1, cells = 0;
    for (const json& c : member(sum, "cells", true))
      if (c.value("property", "") != "" && c.value("cases", 0) > 0)
        ++cells, fewest = fewest < 0 ? c.value("judged", int64_t{0}) : std::min(fewest, c.value("judged", int64_t{0}));
    s += short_cells.empty()
             ? fmt::format("<p>target met: each of the {} kernel x property x dtype cells judged &ge; {} cases "
                           "conclusively (fewest {}).</p>",
                           cells, per_cell, fewest)
             : fmt::format("<p class=\"fail\">BELOW TARGET: {} cells judged fewer than {} cases conclusively.</p>",
                           short_cells.size(), per_cell);
  }
  std::set<std::string> below;
  for (const json& b : member(sum, "below_target", true))
    below.insert(b.value("kernel", "") + "|" + b.value("property", "") + "|" + b.value("dtype", ""));
  // Failing cells first, then cells short of their target, then the rest.
  const json& all_cells = member(sum, "cells", true);
  std::vector<json> cells(all_cells.begin(), all_cells.end());
  auto rank = [&](const json& c) {
    if (c.value("wrong", 0) > 0) return 0;
    if (c.value("judged", 0) == 0 ||
        below.count(c.value("kernel", "") + "|" + c.value("property", "") + "|" + c.value("dtype", "")))
      return 1;
    return 2;
  };
  std::stable_sort(cells.begin(), cells.end(), [&](const json& a, const json& b) { return rank(a) < rank(b); });
  s += "<table class=\"cells sortable\"><thead><tr><th>kernel</th><th>property</th><th>dtype</th><th>cases</th>"
       "<th>#wrong</th><th>expected</th><th>inconcl</th><th>skip</th><th>p50 e/b</th><th>p99 e/b</th><th>max e/b</th>"
       "<th>max ulp@scale</th><th>time (s)</th></tr></thead><tbody>";
  for (const json& c : cells) {
    ErrorDistribution all;
    for (const auto& [tensor, d] : member(c, "errors").items()) all.merge(ErrorDistribution::fromJson(d));
    const bool have = all.count > 0;
    const int r = rank(c);
    s += fmt::format(
        "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td></tr>",
        r == 0   ? "fail"
        : r == 1 ? "short"
                 : "pass",
        htmlEscape(c.value("kernel", "")), htmlEscape(c.value("property", "")), htmlEscape(c.value("dtype", "")),
        c.value("cases", 0), c.value("wrong", 0), c.value("expected", 0), c.value("inconclusive", 0),
        c.value("skipped", 0), have ? figure(all.ratioQuantile(0.5)) : "-",
        have ? figure(all.ratioQuantile(0.99)) : "-", have ? figure(number(c, "max_ratio")) : "-",
        have ? figure(all.max_ulp_at_scale) : "-", c.value("seconds", 0.0));
  }
  s += "</tbody></table>";
  if (!below.empty())
    s += fmt::format("<p class=\"short\">{} cells were judged fewer times than the plan's target (rows marked).</p>",
                     below.size());
  for (const json& u : member(sum, "unjudged", true))
    s += fmt::format("<p class=\"fail\">NOTHING JUDGED: {} applies to {} but judged none of its cases.</p>",
                     htmlEscape(u.value("property", "")), htmlEscape(u.value("kernel", "")));
  if (!sum.value("fatal_error", std::string()).empty())
    s += fmt::format("<pre class=\"fail\">FATAL: {}</pre>", htmlEscape(sum.value("fatal_error", "")));

  // The failures, with their worst elements and the command that reproduces each.
  for (const json& f : member(sum, "failure_list", true)) {
    const std::string repro = f.value("repro", "");
    const json* full = nullptr;
    for (const json& rec : op.failures)
      if (rec.value("repro", "") == repro) full = &rec;
    s += fmt::format("<div class=\"failure\" id=\"failure-{}\"><h3>FAILED {} ({})</h3><p>case: <code>{}</code></p>",
                     ++failure_number, htmlEscape(f.value("property", "")), htmlEscape(f.value("kind", "")),
                     htmlEscape(f.value("shrunk", "")));
    if (full) {
      s += fmt::format("<p>{}</p>", htmlEscape(full->at("outcome").value("summary", "")));
      s += findingsTable(full->at("outcome")) + statsTable(full->at("outcome"));
    } else if (!f.value("summary", "").empty()) {
      s += fmt::format("<p>{}</p>", htmlEscape(f.value("summary", "")));
    }
    s += copyable(repro) + "</div>";
  }
  return s;
}

std::string plotsSection(const Op& op) {
  // Per kernel x tensor, over its dtypes: the accuracy cells' distributions.
  std::map<std::pair<std::string, std::string>, ErrorDistribution> by;
  for (const json& c : member(op.summary, "cells", true))
    for (const auto& [tensor, d] : member(c, "errors").items())
      by[{c.value("kernel", ""), tensor}].merge(ErrorDistribution::fromJson(d));
  if (by.empty()) return "";
  std::string s = fmt::format("<h2>{}: where the errors lie</h2>", htmlEscape(op.name));
  for (const auto& [key, d] : by) {
    const auto& [kernel, tensor] = key;
    s += fmt::format(
        "<div class=\"plots\"><h3>{} {} <small>{} elements, err/budget p50 &le; {}, p99 &le; {}, max ulp@scale {}"
        "</small></h3>",
        htmlEscape(kernel), htmlEscape(tensor), d.count, figure(d.ratioQuantile(0.5)), figure(d.ratioQuantile(0.99)),
        figure(d.max_ulp_at_scale));
    s += svgHistogram("err/budget (line: the budget)", d.ratio.data(), ErrorDistribution::kRatioBuckets,
                      ErrorDistribution::kRatioLow, 1.0, "err/budget");
    s += svgHistogram("ulp@scale", d.ulp_at_scale.data(), ErrorDistribution::kUlpBuckets, ErrorDistribution::kUlpLow, 0,
                      "ulps of the scale", d.max_ulp_at_scale);
    s += svgHeatmap("worst err/budget by position", d);
    s += svgScale("worst err/budget by scale", d);
    s += "</div>";
  }
  return s;
}

std::string killMatrixSection(const std::vector<json>& mutants, const std::vector<json>& controls) {
  if (mutants.empty() && controls.empty()) return "";
  std::set<std::string> properties, baselines;
  for (const json& m : mutants) {
    for (const auto& [p, v] : member(m, "properties").items()) properties.insert(p);
    for (const auto& [b, v] : member(m, "baselines").items()) baselines.insert(b);
  }
  std::string s = "<section id=\"kill-matrix\"><h2>Kill matrix</h2><table class=\"matrix sortable\"><thead><tr>"
                  "<th>mutant</th><th>op</th>";
  // Long names break after their underscores, so the matrix fits a page.
  const auto header = [](const std::string& name) {
    std::string out;
    for (char ch : htmlEscape(name)) out += ch == '_' ? std::string("_<wbr>") : std::string(1, ch);
    return out;
  };
  for (const auto& p : properties) s += "<th>" + header(p) + "</th>";
  for (const auto& b : baselines) s += "<th class=\"baseline\">" + header(b) + "</th>";
  s += "<th>verdict</th></tr></thead><tbody>";
  int killed = 0;
  for (const json& m : mutants) {
    const bool as_declared = m.value("killed_as_declared", false);
    killed += as_declared;
    s += fmt::format("<tr class=\"{}\"><td title=\"{}\">{}</td><td>{}</td>", as_declared ? "pass" : "fail",
                     htmlEscape(m.value("bug", "")), htmlEscape(m.value("mutant", "")), htmlEscape(m.value("op", "")));
    for (const auto& p : properties) {
      const json cell = member(m, "properties").value(p, json::object());
      const bool declared = m.value("caught_by", "") == p;
      std::string text = "n/a";
      if (cell.value("killed", false))
        text = fmt::format("#{}/{:.2f}s{}", cell.value("cases_to_detect", 0), cell.value("seconds_to_detect", 0.0),
                           declared ? "*" : "");
      else if (cell.value("applies", true) && !cell.empty()) text = "-";
      s += fmt::format("<td class=\"{}\"{}>{}</td>", declared ? "declared" : "",
                       cell.contains("repro") ? " title=\"" + htmlEscape(cell.value("repro", "")) + "\"" : "",
                       htmlEscape(text));
    }
    for (const auto& b : baselines) {
      const json v = member(m, "baselines").value(b, json::object());
      const std::string text = !v.value("applies", false) ? "n/a" : v.value("caught", false) ? "caught" : "MISSED";
      s += fmt::format("<td class=\"baseline {}\">{}</td>", text == "MISSED" ? "missed" : "", text);
    }
    s += fmt::format("<td>{}</td></tr>", as_declared ? "killed" : "SURVIVED");
  }
  for (const json& c : controls) {
    const int64_t alarms = c.value("false_alarms", int64_t{0});
    s += fmt::format("<tr class=\"{}\"><td>(correct) {}</td><td>{}</td>", alarms ? "fail" : "pass",
                     htmlEscape(c.value("variant", "")), htmlEscape(c.value("op", "")));
    std::set<std::string> alarmed;
    for (const json& a : c.value("property_false_alarms", json::array())) alarmed.insert(a.value("property", ""));
    const json applying = c.value("properties_applying", json());
    const auto applies = [&](const std::string& p) {
      return !applying.is_array() || std::find(applying.begin(), applying.end(), p) != applying.end();
    };
    for (const auto& p : properties)
      s += alarmed.count(p) ? "<td class=\"missed\">FALSE ALARM</td>" : applies(p) ? "<td>pass</td>" : "<td>n/a</td>";
    for (const auto& b : baselines) {
      const json v = member(c, "baselines").value(b, json::object());
      const std::string text = !v.value("applies", false)      ? "n/a"
                               : v.value("false_alarm", false) ? "FALSE ALARM"
                                                               : "pass";
      s += fmt::format("<td class=\"baseline\">{}</td>", text);
    }
    s += fmt::format("<td>{}</td></tr>", alarms ? fmt::format("{} false alarms", alarms)
                                                : fmt::format("clean, {} cases", c.value("cases", 0)));
  }
  s += "</tbody></table>";
  s += fmt::format("<p>{} of {} mutants killed by their declared property (*: the declared property; cells: cases "
                   "and seconds to the first kill, - survived; hover a cell for its repro command).</p>",
                   killed, mutants.size());
  // What the baselines (the checks other projects' tests use) would have caught, as the text report says it.
  std::string missing;
  for (const auto& b : baselines) {
    int tested = 0, missed = 0;
    for (const json& m : mutants) {
      const json v = member(m, "baselines").value(b, json::object());
      tested += v.value("applies", false);
      missed += v.value("applies", false) && !v.value("caught", false);
    }
    missing += fmt::format("<li>{} misses {} of the {} mutants it tests</li>", htmlEscape(b), missed, tested);
  }
  if (!missing.empty()) s += "<ul>" + missing + "</ul>";
  int64_t control_cases = 0, alarms = 0;
  for (const json& c : controls)
    control_cases += c.value("cases", int64_t{0}), alarms += c.value("false_alarms", int64_t{0});
  if (!controls.empty())
    s += fmt::format("<p>{} false alarms on {} correct variants ({} cases).</p>", alarms, controls.size(),
                     control_cases);
  s += "</section>";
  return s;
}

constexpr const char* kStyle = R"(
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.5em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ccc; } h3 { margin-bottom: 0.3em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; font-variant-numeric: tabular-nums;
         white-space: nowrap; }
table.findings td:last-child { white-space: normal; }
th { background: #f0f0f0; cursor: pointer; } table.matrix th { white-space: normal; } td:first-child, td:nth-child(2) { text-align: left; }
tr.fail td { background: #fde2e4; } tr.short td { background: #fff4d6; }
p.fail, pre.fail { color: #b00020; font-weight: bold; } p.short { color: #8a6100; }
.verdict { font-size: 1.2em; font-weight: bold; padding: 0.4em 0.8em; display: inline-block; }
.verdict.pass { background: #dff5e1; color: #1b6d2b; } .verdict.fail { background: #fde2e4; color: #b00020; }
.failure { border-left: 4px solid #b00020; padding-left: 0.8em; margin: 1em 0; }
.repro code { background: #f6f6f6; padding: 2px 4px; word-break: break-all; }
.plots svg { border: 1px solid #eee; margin: 2px; } .plots h3 small { font-weight: normal; color: #555; }
svg .title { font-size: 12px; font-weight: bold; } svg .axis { font-size: 10px; fill: #555; }
svg .bar { fill: #4a78b5; } svg .bar.over { fill: #c0142b; } svg .mark { stroke: #c0142b; stroke-dasharray: 3 2; }
svg .dot { fill: #4a78b5; } svg .dot.over { fill: #c0142b; }
td.declared { font-weight: bold; } td.missed { color: #b00020; }
)";

// Copy buttons and sortable tables; the last line marks the page as ready,
// which the headless-browser test reads (window.onerror marks "error").
constexpr const char* kScript = R"(
document.querySelectorAll("button.copy").forEach(function (button) {
  button.addEventListener("click", function () {
    var text = button.parentNode.querySelector("code").textContent;
    if (navigator.clipboard) navigator.clipboard.writeText(text);
    button.textContent = "copied";
  });
});
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, column) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var key = function (r) { var t = r.cells[column].textContent, v = parseFloat(t.replace(/^[#]/, ""));
                               return isNaN(v) ? t : v; };
      var down = th.dataset.down !== "1"; th.dataset.down = down ? "1" : "0";
      rows.sort(function (a, b) { var x = key(a), y = key(b); return (x < y ? -1 : x > y ? 1 : 0) * (down ? 1 : -1); });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
document.body.dataset.ready = "ok";
)";

/// An op's summary rebuilt from its case records, for JSON lines that end
/// before the summary (a run cut short: a crash, a kill, a hang's exit):
/// what was measured is still reported.
json summaryFromCases(const std::string& op, const std::vector<const json*>& cases, const std::vector<json>& failures) {
  struct Cell {
    int64_t cases = 0, wrong = 0, expected = 0, skipped = 0, inconclusive = 0;
    double max_ratio = 0, seconds = 0;
    std::map<std::string, ErrorDistribution> errors;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Cell> cells;
  int64_t generated = 0, regression = 0;
  std::set<std::string> seen_cases;
  for (const json* r : cases) {
    const json& spec = member(*r, "case");
    Cell& c = cells[{spec.value("kernel", ""), r->value("property", ""), spec.value("dtype", "")}];
    ++c.cases;
    c.seconds += r->value("seconds", 0.0);
    const std::string verdict = member(*r, "outcome").value("verdict", "");
    c.wrong += verdict == "FAIL", c.expected += verdict == "expected", c.skipped += verdict == "skip";
    c.inconclusive += verdict == "inconclusive";
    for (const json& s : member(member(*r, "outcome"), "stats", true)) {
      c.max_ratio = std::max(c.max_ratio, number(s, "max_ratio"));
      if (s.contains("errors")) c.errors[s.value("tensor", "")].merge(ErrorDistribution::fromJson(s.at("errors")));
    }
    if (seen_cases.insert(spec.value("case", "") + r->value("type", "")).second)
      (r->value("type", "") == "regression" ? regression : generated) += 1;
  }
  json sum = {{"type", "summary"},
              {"op", op},
              {"cases", generated},
              {"regression_cases", regression},
              {"cut_short", true},
              {"cells", json::array()},
              {"failure_list", json::array()}};
  double seconds = 0;
  for (const auto& [key, c] : cells) {
    json errors = json::object();
    for (const auto& [tensor, d] : c.errors) errors[tensor] = d.toJson();
    sum["cells"].push_back({{"kernel", std::get<0>(key)},
                            {"property", std::get<1>(key)},
                            {"dtype", std::get<2>(key)},
                            {"cases", c.cases},
                            {"wrong", c.wrong},
                            {"expected", c.expected},
                            {"skipped", c.skipped},
                            {"inconclusive", c.inconclusive},
                            {"judged", c.cases - c.skipped - c.inconclusive},
                            {"max_ratio", c.max_ratio},
                            {"seconds", c.seconds},
                            {"errors", errors}});
    seconds += c.seconds;
  }
  sum["seconds"] = seconds;
  for (const json& f : failures)
    if (member(f, "shrunk").value("op", "") == op)
      sum["failure_list"].push_back({{"property", f.value("property", "")},
                                     {"kind", f.value("kind", "generated")},
                                     {"shrunk", member(f, "shrunk").value("case", "")},
                                     {"repro", f.value("repro", "")},
                                     {"summary", member(f, "outcome").value("summary", "")}});
  sum["failures"] = sum["failure_list"].size();
  return sum;
}

}  // namespace

std::string htmlReport(const std::vector<json>& records, const std::string& title) {
  std::vector<Op> ops;
  std::vector<json> failures, mutants, controls;
  std::string notes;  // what reading the JSON lines left out (a record cut short)
  for (const json& r : records)
    if (r.value("type", "") == "input_note")
      notes += fmt::format("<p class=\"fail\">{}</p>", htmlEscape(r.value("text", "")));
  int64_t cases = 0, failing = 0, cut_short = 0;
  // Ops whose case records have no summary after them: rebuilt from the cases.
  std::map<std::string, std::vector<const json*>> unsummarised;
  std::vector<std::string> unsummarised_order;
  for (const json& r : records) {
    const std::string type = r.value("type", "");
    if (type == "case" || type == "regression") {
      const std::string op = member(r, "case").value("op", "");
      if (!unsummarised.count(op)) unsummarised_order.push_back(op);
      unsummarised[op].push_back(&r);
    } else if (type == "summary") {
      unsummarised.erase(r.value("op", ""));
      std::erase(unsummarised_order, r.value("op", ""));
    } else if (type == "failure") {
      failures.push_back(r);
    }
  }
  std::vector<json> rebuilt;
  for (const std::string& op : unsummarised_order) rebuilt.push_back(summaryFromCases(op, unsummarised[op], failures));
  failures.clear();
  std::vector<const json*> all;
  for (const json& r : records) all.push_back(&r);
  for (const json& r : rebuilt) all.push_back(&r);
  for (const json* rp : all) {
    const json& r = *rp;
    const std::string type = r.value("type", "");
    if (type == "summary") {
      ops.push_back({r.value("op", std::string("campaign")), r, {}});
      cut_short += r.value("cut_short", false);  // an unfinished run is not a pass, nor a failure
      cases += r.value("cases", int64_t{0}) + r.value("regression_cases", int64_t{0});
      failing += r.value("failures", int64_t{0}) + (r.value("fatal_error", std::string()).empty() ? 0 : 1);
    } else if (type == "failure") {
      failures.push_back(r);
    } else if (type == "mutant") {
      mutants.push_back(r);
      failing += !r.value("killed_as_declared", false);
    } else if (type == "control") {
      controls.push_back(r);
      failing += r.value("false_alarms", int64_t{0}) > 0;
    }
  }
  if (ops.empty() && mutants.empty() && controls.empty())
    throw ReportInputError("the JSON lines hold no campaign summary and no kill matrix (was the run cut short?)");
  // A failure record belongs to the op of its case.
  for (const json& f : failures)
    for (Op& op : ops)
      if (f.contains("shrunk") && f.at("shrunk").value("op", "") == op.name) op.failures.push_back(f);

  std::string body;
  int failure_number = 0;
  if (!ops.empty()) {
    body += "<section id=\"summary\">";
    for (const Op& op : ops) body += summarySection(op, failure_number);
    body += "</section><section id=\"errors\">";
    for (const Op& op : ops) body += plotsSection(op);
    body += "</section>";
  }
  body += killMatrixSection(mutants, controls);
  int64_t killed = 0;
  for (const json& m : mutants) killed += m.value("killed_as_declared", false);
  const std::string what = ops.empty() ? fmt::format("{} of {} mutants killed as declared, {} correct variants", killed,
                                                     mutants.size(), controls.size())
                                       : fmt::format("{} cases", cases);
  const std::string cut = cut_short ? fmt::format("; CUT SHORT: {} of the ops did not finish", cut_short) : "";
  const std::string verdict =
      failing     ? fmt::format("<p class=\"verdict fail\">{} failing ({}{})</p>", failing, what, cut)
      : cut_short ? fmt::format("<p class=\"verdict fail\">CUT SHORT: no failure among the {} measured, but the run "
                                "did not finish ({} of the ops)</p>",
                                what, cut_short)
                  : fmt::format("<p class=\"verdict pass\">no failures ({})</p>", what);
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title><style>{1}</style></head>\n"
      "<body data-ready=\"no\"><script>window.onerror = function () {{ document.body.dataset.ready = \"error\"; }};"
      "</script>\n<h1>{0}</h1>{2}{3}\n<p class=\"how\">err/budget: an element's error over its budget (pass &le; 1; "
      "percentiles are upper edges of quarter-octave buckets). ulp@scale: the error in units in the last place of the "
      "element's scale, the size of the terms it is made of (so a result that cancels to near zero is not thousands "
      "of ulps for a correct kernel).</p>\n<script>{4}</script></body></html>\n",
      htmlEscape(title), kStyle, verdict + notes, body, kScript);
}

void writeHtmlReport(const std::string& path, const std::vector<json>& records, const std::string& title) {
  writeWholeFile(path, htmlReport(records, title), "the HTML report");
  fmt::print("# HTML report: {}\n", path);
}

void reportJsonLinesFiles(const std::vector<std::string>& inputs, const std::string& output, const std::string& title) {
  checkOutputFiles({{"-o", output}});
  for (const auto& input : inputs) {
    std::error_code ec;
    if (std::filesystem::equivalent(input, output, ec))
      throw UsageError(
          fmt::format("-o {}: is one of the JSON-lines files to report (it would be overwritten)", output));
  }
  std::vector<json> records;
  for (const auto& path : inputs) {
    auto more = readJsonLines(path);
    for (const auto& r : more)
      if (r.value("type", "") == "input_note") fmt::print("# note: {}\n", r.value("text", ""));
    records.insert(records.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  writeHtmlReport(output, records, title);
}

}  // namespace ulpcheck
