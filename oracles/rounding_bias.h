// The sums the rounding-bias statistic (properties/property.h, RoundingBias)
// is made of, element by element, on the host (properties/accuracy.cpp) and
// in the GPU judges (oracles/device_judge.cuh) alike.
//
// A kernel that rounds to nearest stores got = RN(v), where v, its value
// before the final rounding to the output dtype, is within E of the exact
// value x: E is the element's budget less that rounding's half ulp
// (oracles/reference.h, budgetFromError). RN is monotone, so
//   RN(x - E) <= got <= RN(x + E):
// got may differ from the correctly rounded cr = RN(x) only where a rounding
// boundary lies within E of x, and then only toward it. In ulps u of x, the
// element's miss m = (got - cr) / u lies in [-below, above], below =
// (cr - RN(x - E)) / u and above = (RN(x + E) - cr) / u: 0 or 1 over the
// elements counted (E <= kBiasSelectUlps u, x finite and not zero, RN(x +- E)
// finite). Their sum, and the sum of the misses away from zero (m times the
// sign of x), therefore lie within the sums of those bounds whatever the
// kernel's arithmetic does within E (an rstd a row shares may err one way
// for all of it): no model of the data, no false alarm.
//
// A kernel that truncates misses toward zero wherever x lies past the
// midpoint of its two neighbours, about half the elements: a mean of -1/2
// ulp away from zero, where rounding to nearest allows the share of
// elements within E of a boundary (E / u of them: at most a quarter, on
// 16-bit outputs of fp32 arithmetic ~1e-4). Such a kernel also has elements
// over their budget; the statistic names what their errors share.
//
// Also summed, for reports only: the mean error (got - x) / u and its
// mean away from zero, which a truncating kernel moves by -1/2 too.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/hd.h"
#include "oracles/tolerances.h"

namespace ulpcheck {

struct BiasSums {
  int64_t elements = 0;
  double error_ulp = 0, error_outward_ulp = 0;  // of (got - x) / u: reported
  double miss_ulp = 0, miss_outward_ulp = 0;    // of m: judged
  double below = 0, above = 0;                  // what rounding to nearest allows m
  double outward_below = 0, outward_above = 0;  // and m away from zero
  ULPCHECK_HD void add(const BiasSums& b) {
    elements += b.elements;
    error_ulp += b.error_ulp, error_outward_ulp += b.error_outward_ulp;
    miss_ulp += b.miss_ulp, miss_outward_ulp += b.miss_outward_ulp;
    below += b.below, above += b.above, outward_below += b.outward_below, outward_above += b.outward_above;
  }
};

/// Element (exact, its budget `rigorous`, got; unit = ulpOf(t, exact), which
/// the judges have at hand) into `sums`, where the statistic counts it.
ULPCHECK_HD inline void addBiasElement(DType t, double exact, double rigorous, double got, double unit,
                                       BiasSums& sums) {
  if (!(std::isfinite(exact) && exact != 0.0 && std::isfinite(got) && std::isfinite(rigorous))) return;
  const double bound = rigorous - 0.5 * unit;
  if (!(bound <= tolerance::kBiasSelectUlps * unit)) return;
  const double computed = bound > 0 ? bound : 0.0;
  const double nearest = roundToFormat(t, exact), low = roundToFormat(t, exact - computed),
               high = roundToFormat(t, exact + computed);
  if (!(std::isfinite(low) && std::isfinite(high))) return;
  const double below = (nearest - low) / unit, above = (high - nearest) / unit;
  const double error = (got - exact) / unit, miss = (got - nearest) / unit;
  const bool negative = std::signbit(exact);
  ++sums.elements;
  sums.error_ulp += error;
  sums.error_outward_ulp += negative ? -error : error;
  sums.miss_ulp += miss;
  sums.miss_outward_ulp += negative ? -miss : miss;
  sums.below += below;
  sums.above += above;
  sums.outward_below += negative ? above : below;
  sums.outward_above += negative ? below : above;
}

}  // namespace ulpcheck
