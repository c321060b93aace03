// A campaign's whole result as JSON and back, and the sum of several: how a
// worker process (one per GPU, `ulpcheck run --gpus`) hands its share of a
// campaign to the coordinator, which adds the shares into the one result it
// reports (same table, same exit code as one process would give).
#pragma once

#include <nlohmann/json.hpp>

#include "harness/runner/campaign.h"

namespace ulpcheck {

nlohmann::json campaignResultToJson(const CampaignResult& r);
/// A cell's error distributions by tensor (ErrorDistribution::toJson each).
nlohmann::json errorsJson(const CellStats& c);
/// Throws nlohmann::json::exception or CaseParseError on a malformed record.
CampaignResult campaignResultFromJson(const nlohmann::json& j);

/// Adds `part` (another share of the same campaign) into `total`: counts and
/// tallies add up, failures are listed together, the wall time is the
/// longest share's, a fatal error of any share is kept (named by `who`).
void mergeCampaignResult(CampaignResult& total, const CampaignResult& part, const std::string& who);

}  // namespace ulpcheck
