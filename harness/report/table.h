// Text reports in the style of nccl-tests: a fixed-width table with a #wrong
// column, plus failure blocks with the shrunk case and its repro command.
#pragma once

#include <string>
#include <vector>

#include <array>

#include "core/phase_timer.h"
#include "harness/runner/campaign.h"

namespace ulpcheck {

std::string formatCampaignTable(const CampaignResult& r);
/// Per property: cases judged (accuracy: with full power), inconclusive,
/// skipped; and the pairs that apply but judged nothing.
std::string formatJudgedSummary(const CampaignResult& r);
std::string formatFailure(const FailureRecord& f);
/// A failure in three lines: the case, what failed, its repro (a kernel x
/// property's later failures under --keep-going, its first one in full).
std::string formatFailureBriefly(const FailureRecord& f);
/// Code paths each kernel's cases took, naming the ones never reached.
std::string formatCoverage(const CampaignResult& r);
/// Worst elements of one outcome: index, inputs, got, exact, ULP, budget.
std::string formatFindings(const Outcome& o);
std::string formatStats(const Outcome& o);
nlohmann::json campaignSummaryJson(const CampaignResult& r);
/// Where `seconds` of wall time went (seconds per Phase, core/
/// phase_timer.h), one line; seconds < 0: the phases only.
std::string formatPhaseTimes(const std::array<double, size_t(Phase::kCount)>& phases, double seconds);

}  // namespace ulpcheck
