// The accuracy judgment, apart from running anything: outputs against the
// oracle's references, element by element, with the power of each tensor's
// budgets. The accuracy property applies it to a case's base run; tests
// apply it to injected outputs (a gross error in a regime, say) directly.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "properties/property.h"

namespace ulpcheck {

/// Names the inputs element (row, col) of a tensor depends on, for findings.
using DescribeInputs = std::function<std::string(const std::string& tensor, int64_t row, int64_t col)>;

/// Pass when every element is within its budget and every tensor is judged
/// with power (tolerance::kMinTensorPower); Fail on any element over budget
/// (whatever the power); Inconclusive when the budgets of some tensor are too
/// wide to see errors of tolerance::kPowerErrorFraction of its values, or
/// every exact value is zero.
Outcome judgeAccuracy(const RunResult& run, const std::vector<ReferenceTensor>& reference,
                      const DescribeInputs& describe);

}  // namespace ulpcheck
