#include "harness/runner/campaign_json.h"

#include <algorithm>
#include <cmath>

namespace ulpcheck {

namespace {

using json = nlohmann::json;

// JSON has no Inf or NaN: nlohmann writes them as null.
double number(const json& j) { return j.is_null() ? INFINITY : j.get<double>(); }

json cellKey(const std::tuple<std::string, std::string, std::string>& k) {
  return {std::get<0>(k), std::get<1>(k), std::get<2>(k)};
}
std::tuple<std::string, std::string, std::string> cellKey(const json& j) {
  return {j.at(0).get<std::string>(), j.at(1).get<std::string>(), j.at(2).get<std::string>()};
}

}  // namespace

json errorsJson(const CellStats& c) {
  json j = json::object();
  for (const auto& [tensor, d] : c.errors) j[tensor] = d.toJson();
  return j;
}

json campaignResultToJson(const CampaignResult& r) {
  json j = {{"op", r.op},
            {"seed", r.seed},
            {"cases_run", r.cases_run},
            {"regression_cases", r.regression_cases},
            {"planned_cases", r.planned_cases},
            {"per_cell", r.per_cell},
            {"topped_up_cases", r.topped_up_cases},
            {"plan_reached_target", r.plan_reached_target},
            {"shard", {r.shard_index, r.shard_count}},
            {"stopped_by_time", r.stopped_by_time},
            {"seconds", r.seconds},
            {"fatal_error", r.fatal_error},
            {"cells", json::array()},
            {"judged", json::array()},
            {"applicable_cells", json::array()},
            {"inapplicable_properties", r.inapplicable_properties},
            {"failures", json::array()},
            {"paths", json::object()}};
  for (const auto& [key, c] : r.cells)
    j["cells"].push_back(
        {{"key", cellKey(key)},
         {"n", {c.cases, c.passed, c.failed, c.expected, c.skipped, c.inconclusive, c.faulted, c.hung}},
         {"max_ulp", c.max_ulp},
         {"max_ratio", c.max_ratio},
         {"seconds", c.seconds},
         {"errors", errorsJson(c)}});
  for (const auto& [pair, n] : r.judged) j["judged"].push_back({pair.first, pair.second, n});
  for (const auto& cell : r.applicable_cells) j["applicable_cells"].push_back(cellKey(cell));
  for (const auto& [cell, n] : r.cell_targets) j["cell_targets"].push_back({cellKey(cell), n});
  for (const FailureRecord& f : r.failures)
    j["failures"].push_back({{"kind", f.kind},
                             {"property", f.property},
                             {"original", toCaseString(f.original)},
                             {"shrunk", toCaseString(f.shrunk)},
                             {"outcome", toJson(f.outcome)},
                             {"shrink_steps", f.shrink_steps},
                             {"shrink_finished", f.shrink_finished},
                             {"as_found", f.as_found},
                             {"case_index", f.case_index},
                             {"seconds_to_detect", f.seconds_to_detect},
                             {"corpus_file", f.corpus_file},
                             {"perturb_schedule", f.perturb_schedule},
                             {"repeats", f.repeats},
                             {"case_timeout_s", f.case_timeout_s}});
  for (const auto& [kernel, paths] : r.paths) j["paths"][kernel] = paths;
  return j;
}

CampaignResult campaignResultFromJson(const json& j) {
  CampaignResult r;
  r.op = j.value("op", "");
  r.cases_run = j.at("cases_run");
  r.regression_cases = j.at("regression_cases");
  r.seed = j.at("seed");
  r.planned_cases = j.at("planned_cases");
  r.per_cell = j.at("per_cell");
  r.topped_up_cases = j.at("topped_up_cases");
  r.plan_reached_target = j.at("plan_reached_target");
  r.shard_index = j.at("shard").at(0);
  r.shard_count = j.at("shard").at(1);
  r.stopped_by_time = j.at("stopped_by_time");
  r.seconds = j.at("seconds");
  r.fatal_error = j.at("fatal_error");
  for (const auto& c : j.at("cells")) {
    CellStats s;
    const json& n = c.at("n");
    s.cases = n.at(0), s.passed = n.at(1), s.failed = n.at(2), s.expected = n.at(3), s.skipped = n.at(4);
    s.inconclusive = n.at(5);
    s.faulted = n.size() > 6 ? n.at(6).get<int64_t>() : 0;
    s.hung = n.size() > 7 ? n.at(7).get<int64_t>() : 0;
    s.max_ulp = number(c.at("max_ulp"));
    s.max_ratio = number(c.at("max_ratio"));
    s.seconds = c.at("seconds");
    if (c.contains("errors"))  // (a loop over c.value(...).items() would walk a destroyed temporary)
      for (const auto& [tensor, d] : c.at("errors").items()) s.errors[tensor] = ErrorDistribution::fromJson(d);
    r.cells[cellKey(c.at("key"))] = s;
  }
  for (const auto& p : j.at("judged")) r.judged[{p.at(0), p.at(1)}] = p.at(2);
  for (const auto& c : j.at("applicable_cells")) r.applicable_cells.insert(cellKey(c));
  for (const auto& t : j.value("cell_targets", json::array())) r.cell_targets[cellKey(t.at(0))] = t.at(1);
  r.inapplicable_properties = j.at("inapplicable_properties").get<std::vector<std::string>>();
  for (const auto& f : j.at("failures")) {
    FailureRecord rec;
    rec.kind = f.at("kind");
    rec.property = f.at("property");
    rec.original = parseCaseString(f.at("original").get<std::string>());
    rec.shrunk = parseCaseString(f.at("shrunk").get<std::string>());
    rec.outcome = outcomeFromJson(f.at("outcome"));
    rec.shrink_steps = f.at("shrink_steps");
    rec.shrink_finished = f.value("shrink_finished", false);
    rec.as_found = f.value("as_found", false);
    rec.case_index = f.at("case_index");
    rec.seconds_to_detect = f.at("seconds_to_detect");
    rec.corpus_file = f.at("corpus_file");
    rec.perturb_schedule = f.at("perturb_schedule");
    rec.repeats = f.at("repeats");
    rec.case_timeout_s = f.at("case_timeout_s");
    r.failures.push_back(std::move(rec));
  }
  for (const auto& [kernel, paths] : j.at("paths").items())
    r.paths[kernel] = paths.get<std::map<std::string, int64_t>>();
  return r;
}

void mergeCampaignResult(CampaignResult& total, const CampaignResult& part, const std::string& who) {
  const bool first = total.cells.empty() && total.judged.empty() && total.cases_run == 0 && total.regression_cases == 0;
  if (total.op.empty()) total.op = part.op;
  total.seed = part.seed;  // every share draws from the run's seed
  total.cases_run += part.cases_run;
  total.regression_cases += part.regression_cases;
  total.topped_up_cases += part.topped_up_cases;
  total.planned_cases = std::max(total.planned_cases, part.planned_cases);  // every share makes the same plan
  total.per_cell = part.per_cell;
  total.plan_reached_target = (first || total.plan_reached_target) && part.plan_reached_target;
  total.stopped_by_time |= part.stopped_by_time;
  total.seconds = std::max(total.seconds, part.seconds);
  if (!part.fatal_error.empty())
    total.fatal_error += (total.fatal_error.empty() ? "" : "\n") + who + ": " + part.fatal_error;
  for (const auto& [key, c] : part.cells) {
    CellStats& s = total.cells[key];
    s.cases += c.cases, s.passed += c.passed, s.failed += c.failed, s.expected += c.expected;
    s.skipped += c.skipped, s.inconclusive += c.inconclusive, s.faulted += c.faulted, s.hung += c.hung;
    s.max_ulp = std::max(s.max_ulp, c.max_ulp);
    s.max_ratio = std::max(s.max_ratio, c.max_ratio);
    s.seconds += c.seconds;
    for (const auto& [tensor, d] : c.errors) s.errors[tensor].merge(d);
  }
  for (const auto& [pair, n] : part.judged) total.judged[pair] += n;
  total.applicable_cells.insert(part.applicable_cells.begin(), part.applicable_cells.end());
  for (const auto& [cell, n] : part.cell_targets) total.cell_targets[cell] += n;
  if (first) total.inapplicable_properties = part.inapplicable_properties;  // the same selection everywhere
  total.failures.insert(total.failures.end(), part.failures.begin(), part.failures.end());
  for (const auto& [kernel, paths] : part.paths)
    for (const auto& [path, n] : paths) total.paths[kernel][path] += n;
}

}  // namespace ulpcheck
