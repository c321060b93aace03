// A property: one check over one case, usable from ctest and from the CLI.
// Each property registers itself; adding one touches one file.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "oracles/tolerances.h"
#include "properties/case_context.h"
#include "properties/error_distribution.h"

namespace ulpcheck {

enum class Verdict {
  Pass,
  Fail,
  Expected,      // the check saw a difference the kernel's contract allows (e.g. a nondeterministic variant)
  Skip,          // could not run here (out of memory, more ranks than GPUs; the reason says why)
  Inconclusive,  // ran, but could not have seen a gross error (a budget as wide as the value; nothing to compare)
};
const char* verdictName(Verdict v);

/// One offending (or worst) element.
struct Finding {
  std::string tensor;
  int64_t row = 0, col = 0;
  double got = 0, exact = 0, correctly_rounded = 0;
  double ulp = 0;         // |got - exact| in ulps of the exact value's binade
  double budget_ulp = 0;  // the budget in the same ulps
  double ratio = 0;       // |got - exact| / budget
  std::string note;       // e.g. "unwritten (poison)", "differs from run 2: 0x3f80 vs 0x3f81"
  std::string inputs;     // hex of the inputs it depends on
  // A bitwise property's finding: `got` is one run's (rank's, pipeline's)
  // value and `exact` the reference run's, compared bit for bit; no
  // correctly rounded value, ulp or budget applies.
  bool bitwise = false;
};

/// A tensor's rounding bias, the signed-error statistic (its bound:
/// oracles/rounding_bias.h), over the elements whose computation error bound
/// before the final rounding is at most tolerance::kBiasSelectUlps ulps: the
/// mean error in ulps, and the mean miss off the correctly rounded value,
/// which a kernel rounding to nearest keeps within what the elements whose
/// bound reaches a rounding boundary allow. Each also away from zero (times
/// the sign of the exact value): a kernel that truncates (aiter #5151: CK's
/// fp32 to bf16 conversion) misses by -1/2 ulp there on average.
struct RoundingBias {
  int64_t elements = 0;
  double error_ulp = 0, error_outward_ulp = 0;  // mean (got - exact) / ulp
  double miss_ulp = 0, miss_outward_ulp = 0;    // mean (got - correctly rounded) / ulp
  // What rounding to nearest allows the mean misses: [-below, above].
  double below = 0, above = 0, outward_below = 0, outward_above = 0;
  bool biased() const {
    return miss_ulp < -below || miss_ulp > above || miss_outward_ulp < -outward_below ||
           miss_outward_ulp > outward_above;
  }
};

/// Per-tensor accuracy figures, for reports.
struct TensorStats {
  std::string tensor;
  int64_t elements = 0, wrong = 0;
  double max_ulp = 0, rms_ulp = 0, max_ratio = 0;
  // Power: of the elements whose exact value is finite and not zero, how
  // many have a budget below tolerance::kPowerErrorFraction of it, or below
  // one ulp of the output there (so an error that size would be seen).
  // nonzero == 0: nothing to measure.
  int64_t nonzero = 0, sharp = 0;
  double power() const { return nonzero ? double(sharp) / double(nonzero) : 0.0; }
  // What makes a case inconclusive: fewer than tolerance::kMinTensorPower
  // of the nonzero elements judged sharply.
  bool withoutPower() const { return nonzero && power() < tolerance::kMinTensorPower; }
  // err/budget and ulp@scale of every element, in buckets (what reports plot).
  ErrorDistribution errors;
  RoundingBias bias;
};

struct Outcome {
  Verdict verdict = Verdict::Pass;
  std::string summary;
  std::vector<Finding> findings;  // worst first
  std::vector<TensorStats> stats;
  // The kernel itself failed to run: it crashed, aborted, hung, hit a sticky
  // CUDA error in its worker, or returned an error. A failure, but one that
  // does not stop its property judging the kernel's other cases.
  bool fault = false;
  bool hang = false;  // a fault: the kernel did not return within its time limit (exit code 5)
  bool passed() const { return verdict != Verdict::Fail; }
  /// The case was judged: it passed, failed, or showed what the contract allows.
  bool judged() const { return verdict == Verdict::Pass || verdict == Verdict::Fail || verdict == Verdict::Expected; }
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
  // When the property applies, the one rule every part of ulpcheck uses
  // (running, tables, JSON, exit codes): to a variant of an op (e.g.
  // fused_vs_unfused to fused variants), and to a case of it (e.g.
  // rank_consistency to cases with R > 1). Empty: always.
  std::function<bool(const OpAdapter&, const KernelInfo&)> applies_to_kernel;
  std::function<bool(const CaseSpec&)> applies_to_case;

  bool appliesTo(const OpAdapter& op, const KernelInfo& k) const {
    return !applies_to_kernel || applies_to_kernel(op, k);
  }
  bool appliesTo(const CaseSpec& c) const { return !applies_to_case || applies_to_case(c); }
};

std::vector<Property>& propertyRegistry();
const Property* findProperty(const std::string& name);
bool registerProperty(Property p);

nlohmann::json toJson(const Finding& f);
nlohmann::json toJson(const TensorStats& s);
nlohmann::json toJson(const Outcome& o);
/// The inverse of toJson(Outcome) (a worker's outcomes reach its coordinator
/// this way); throws nlohmann::json::exception on a malformed record.
Outcome outcomeFromJson(const nlohmann::json& j);

}  // namespace ulpcheck
