// What an oracle produces for one output tensor: per element, the exact value
// of the spec (as a round-to-odd double, so rounding it to the output dtype is
// the correctly rounded result) and the element's error budget.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/core/dtype.h"
#include "oracles/tolerances.h"

namespace ulpcheck {

struct ReferenceTensor {
  std::string name;
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0;
  bool per_row = true;          // row i depends only on row i of the inputs (batch invariance applies)
  std::vector<double> exact;    // dense rows x cols
  std::vector<double> budget;   // absolute bound on |got - exact|

  double correctlyRounded(int64_t i) const { return roundToFormat(dtype, exact[i]); }
};

/// The budget of one element:
///   e = K * (u_acc * S + eta_acc * G),   budget = e + 0.5 ulp_T(|exact| + e)
/// S is the element's scale in units of u_acc (the forward error analysis of
/// the op), G its gain on underflowed products. The ulp is taken at
/// |exact| + e so that a computed value across a binade boundary from the
/// exact one is still allowed its final rounding.
inline double elementBudget(DType out, DType accumulation, double exact, double scale_units, double gain) {
  const double eta = tolerance::kUnderflowHalfUlps * minSubnormal(accumulation);
  const double e = tolerance::kBudgetSafety * (unitRoundoff(accumulation) * scale_units + eta * gain);
  return e + 0.5 * ulpOf(out, std::fabs(exact) + e);
}

}  // namespace ulpcheck
