// JUnit XML of a run (`ulpcheck run --junit FILE`), so CI systems show
// ulpcheck's results natively: one <testsuite> per op, one <testcase> per
// kernel x property x dtype (a failure carries the shrunk case and its repro
// command; a cell that judged nothing is <skipped>, never a pass). The
// format is the one GitHub, GitLab and Jenkins read; harness/report/junit.xsd
// is its schema, and a test validates our output against it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "harness/runner/campaign.h"

namespace ulpcheck {

/// The whole document for the ops of one run: (op, its campaign's result).
std::string junitXml(const std::vector<std::pair<std::string, CampaignResult>>& ops);

/// Text made safe for XML attributes and content (escapes, and characters
/// XML 1.0 cannot hold dropped).
std::string xmlEscape(const std::string& text);

}  // namespace ulpcheck
