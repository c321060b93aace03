// The statistical check for black-box kernels: how far random rounding can
// take a sum, as opposed to how far any order of rounding can.
//
// ---------------------------------------------------------------------------
// Why: a black box declares no reduction depths, so its rigorous budget takes
// the worst any order does, D u sum|terms| with D = N along a row and D = M
// down a column. That bound is sound, but it grows with D, while the error of
// an fp32 sum of random-signed rounding errors grows with sqrt(D): at
// D = 65536 a dW whose 132 partials were summed in bf16 (an effective depth of
// 10^4 to 10^5 fp32 units, see ../shared/research) still fits inside it.
//
// ---------------------------------------------------------------------------
// The model (Higham & Mary, "A New Approach to Probabilistic Rounding Error
// Analysis", SIAM J. Sci. Comput. 41(5), 2019, Theorems 2.4 and 3.1): the
// rounding errors delta_k of one computation are independent random variables
// of mean zero with |delta_k| <= u. Then the n-fold product of (1 + delta_k)
// satisfies |prod - 1| <= gamma~_n(lambda) := exp(lambda sqrt(n) u + n u^2 /
// (1 - u)) - 1 with probability at least 1 - 2 exp(-lambda^2 (1 - u)^2 / 2),
// and a sum or inner product of n terms computed in any order satisfies the
// classical bound with gamma_n replaced by gamma~_n(lambda), with probability
// at least 1 - 2 n exp(-lambda^2 (1 - u)^2 / 2) (a union over its n partial
// products). Every first-order bound of the oracles (rmsnorm.cpp,
// layernorm.cpp) is built from such sums: replacing each depth D by the
// effective depth gamma~_D(lambda) / u gives the probabilistic budget.
//
// Calibration: a case judges E elements, each built from at most
// D_row + D_col + kOtherRoundings such sums' roundings; the union bound over
// all of them puts the probability that any element of a correct kernel
// exceeds its probabilistic budget at most
//   2 E (D_row + D_col + kOtherRoundings) exp(-lambda^2 (1 - u)^2 / 2) = p
// with p = tolerance::kStatisticalFalseAlarm (10^-6 per case), so
//   lambda = sqrt(2 ln(2 E (D_row + D_col + kOtherRoundings) / p)) / (1 - u).
// For E D up to 10^13 this is lambda <= 9.5: the effective depth of a sum of
// D = 4096 is 9.5 * 64 = 608 instead of 4096, of D = 65536 2432 instead of
// 65536. Below D = lambda^2 (~ 80) the rigorous depth is already smaller and
// is kept.
//
// Where the model does not hold (statisticalModelHolds in properties/
// accuracy.h): rows of equal values (every rounding error the same, not
// random), single outlier columns and subnormal data (errors then come from
// one term or from underflow, not from many roundings), rows whose mean dwarfs
// their spread. There the rigorous budget alone judges. The check is applied
// to the values ulpcheck draws from zero-mean normals (with or without rows or
// elements of zeros), where the research notes measured correct libraries at
// effective depths <= 4 (dx) and < 1 (dW): far inside the probabilistic budget.
//
// A flag fails the accuracy property like any element over budget: at 10^-6
// per case a CI run of a few thousand cases has a false alarm below 1% in
// the worst case the union bound allows, and in practice none (the bound is
// loose by orders of magnitude); the finding says which budget it exceeded.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/accuracy.h"
#include "oracles/tolerances.h"

namespace ulpcheck::probabilistic {

/// Roundings of an element outside its row and column sums (squares,
/// products, the division, rsqrt's steps, the final rounding), counted
/// generously for the union bound.
inline constexpr double kOtherRoundings = 32.0;

/// lambda of Higham & Mary's bound for a case of `elements` outputs built
/// from sums of the given depths, at a false-alarm probability p per case.
inline double lambda(double elements, const ReductionDepths& d, double u,
                     double p = tolerance::kStatisticalFalseAlarm) {
  const double events = std::max(1.0, elements) * (double(d.row) + double(d.col) + kOtherRoundings);
  return std::sqrt(2.0 * std::log(2.0 * events / p)) / (1.0 - u);
}

/// The effective depth gamma~_D(lambda) / u of a sum of depth D, never more
/// than D (the rigorous depth).
inline int64_t effectiveDepth(int64_t D, double lambda, double u) {
  const double n = double(D);
  const double gamma = std::expm1(lambda * std::sqrt(n) * u + n * u * u / (1.0 - u));
  return std::min<int64_t>(D, int64_t(std::ceil(gamma / u)));
}

/// The depths the probabilistic budget replaces a black box's depths with.
inline ReductionDepths effectiveDepths(const ReductionDepths& rigorous, double elements, double u) {
  const double l = lambda(elements, rigorous, u);
  ReductionDepths d = rigorous;
  d.row = effectiveDepth(rigorous.row, l, u);
  d.col = effectiveDepth(rigorous.col, l, u);
  return d;
}

}  // namespace ulpcheck::probabilistic
