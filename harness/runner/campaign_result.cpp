#include "harness/runner/campaign_result.h"

#include <algorithm>

#include "harness/runner/exit_codes.h"

namespace ulpcheck {

std::vector<std::pair<std::string, std::string>> CampaignResult::unjudged() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [pair, n] : judged)
    if (n == 0) out.push_back(pair);
  return out;
}

std::set<std::pair<std::string, std::string>> CampaignResult::decidedByFailure() const {
  // A failure decides its (kernel, property): more cases would only cost
  // time (a failing run once topped up for a minute to end BELOW TARGET).
  // The kernel it was found on, and the one it shrank onto: a shrunk case
  // may name a sibling variant (FlashInfer's CUDA Gemma fused add shrank
  // onto its plain one as the offset shrank away, and the campaign, which
  // stops checking the kernel it was found on, topped up 1,098 cases on the
  // H100 for a cell it no longer checked).
  std::set<std::pair<std::string, std::string>> decided;
  for (const FailureRecord& f : failures)
    if (!f.outcome.fault) {
      decided.insert({f.original.kernel, f.property});
      decided.insert({f.shrunk.kernel, f.property});
    }
  return decided;
}

std::vector<std::pair<CellKey, int64_t>> CampaignResult::belowTarget() const {
  std::vector<std::pair<CellKey, int64_t>> out;
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

}  // namespace ulpcheck
