// A property: one check over one case, usable from ctest and from the CLI.
// Each property registers itself; adding one touches one file.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "properties/case_context.h"

namespace ulpcheck {

enum class Verdict {
  Pass,
  Fail,
  Expected,  // the check saw a difference the kernel's contract allows (e.g. a nondeterministic variant)
  Skip,      // does not apply to this case (the reason says why)
};
const char* verdictName(Verdict v);

/// One offending (or worst) element.
struct Finding {
  std::string tensor;
  int64_t row = 0, col = 0;
  double got = 0, exact = 0, correctly_rounded = 0;
  double ulp = 0;           // |got - exact| in ulps of the exact value's binade
  double budget_ulp = 0;    // the budget in the same ulps
  double ratio = 0;         // |got - exact| / budget
  std::string note;         // e.g. "unwritten (poison)", "differs from run 2: 0x3f80 vs 0x3f81"
  std::string inputs;       // hex of the inputs it depends on
};

/// Per-tensor accuracy figures, for reports.
struct TensorStats {
  std::string tensor;
  int64_t elements = 0, wrong = 0;
  double max_ulp = 0, rms_ulp = 0, max_ratio = 0;
};

struct Outcome {
  Verdict verdict = Verdict::Pass;
  std::string summary;
  std::vector<Finding> findings;   // worst first
  std::vector<TensorStats> stats;
  bool passed() const { return verdict == Verdict::Pass || verdict == Verdict::Expected || verdict == Verdict::Skip; }
};

struct Property {
  std::string name;
  std::string description;
  std::function<Outcome(CaseContext&)> check;
  // Its failures show on some runs of a case only (races, arrival order).
  // Such a failure is kept as found, not shrunk: a smaller case that happened
  // to fail once or twice often never fails again, and a reproduction that
  // does not reproduce is worth less than a large one that does.
  bool intermittent_failures = false;
};

std::vector<Property>& propertyRegistry();
const Property* findProperty(const std::string& name);
bool registerProperty(Property p);

nlohmann::json toJson(const Finding& f);
nlohmann::json toJson(const TensorStats& s);
nlohmann::json toJson(const Outcome& o);

}  // namespace ulpcheck
