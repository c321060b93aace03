// The judge stage: turns each check's outcome into its cell's figures
// (CellStats: passed, failed, judged, worst errors), the code paths its case
// took, and what each value regime of a cell judged (the top-up draws where
// a cell can be judged). What the figures make of a campaign (its exit code,
// the cells below target) is CampaignResult's (campaign_result.h).
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "core/distribution.h"
#include "harness/runner/campaign_result.h"

namespace ulpcheck {

class Tally {
 public:
  /// (judged, run) cases of one value regime of a cell.
  using RegimeCounts = std::map<Dist, std::pair<int64_t, int64_t>>;

  /// Adds to `result`; `log` (may be empty) hears a cell's first skip and why.
  Tally(CampaignResult& result, std::function<void(const std::string&)> log);
  /// One property's outcome on one case.
  void add(const CaseSpec& spec, const std::string& property, const Outcome& out, double seconds);
  /// The code paths the case takes (KernelInfo::paths_taken) on `sm_count` SMs.
  void cover(const CaseSpec& spec, int sm_count);
  const RegimeCounts& regimes(const CellKey& cell) const;

 private:
  CampaignResult& result_;
  std::function<void(const std::string&)> log_;
  std::map<CellKey, RegimeCounts> judged_by_regime_;
  std::set<CellKey> said_skip_;  // cells whose first skip was said
};

}  // namespace ulpcheck
