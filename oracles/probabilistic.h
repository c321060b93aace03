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
// their spread. There the rigorous budget alone judges the row sums (the
// column sums of a random gradient, below, hold whatever x is). The check is applied
// to the values ulpcheck draws from zero-mean normals (with or without rows or
// elements of zeros), where the research notes measured correct libraries at
// effective depths <= 4 (dx) and < 1 (dW): far inside the probabilistic budget.
//
// ---------------------------------------------------------------------------
// Column sums of a random gradient (LayerNorm's dgamma and dbeta).
//
// Why: the bound above still multiplies the sum of |terms|. A column sum of
// M terms of random sign is ~ sqrt(M) times one term while sum |terms| is
// ~ M times it, so at M = 65536 rows a black box's dbeta budget is 6% of its
// value: no error of 1/64 of it would show (the case is inconclusive).
//
// The terms of these sums are t_i = dy_i c_i: the incoming gradient dy, which
// ulpcheck draws whatever x is, times a coefficient the kernel forms from x
// alone (dbeta: 1; dgamma: its x-hat, within |xhat_i| + Dx_i of the exact
// one's size). The generator draws every dy_i independently
// (core/distribution.h: sigma times a centred Irwin-Hall sum of four 32-bit
// uniforms, |z| <= 2 sqrt 3, rounded to the dtype), so |dy_i| <= B :=
// 2 sqrt(3) sigma (1 + u_T), and |E dy_i| <= 2^-28 sigma (the sum's centre is
// 2 of its 2^34 units off zero, 8e-10 sigma, and the rounding of a value so
// nearly symmetric adds less). A kernel sums a column in some tree of adds
// fixed by indices, not values (every GPU reduction): each add's exact
// result s_v is a subset sum of the leaves. Conditional on x, Hoeffding's
// inequality gives, for every one of the M adds of each of the N columns,
//   |s_v| <= P := lambda_d B sqrt(sum_i c~_i^2) + 2^-28 sigma sum_i |c~_i|
// with probability at least 1 - 2 N M exp(-lambda_d^2 / 2) in all. On that
// event each add's rounding error is delta_v s~_v with |s~_v| <= P (to first
// order), and in the model above (delta independent of mean zero,
// |delta| <= u) Azuma's inequality bounds their sum, with the leaves' own
// roundings (the products dy c~, at most |t_i| + tau_i each), by
//   lambda_r u sqrt(sum_i (|t_i| + tau_i)^2 + M P^2)
// with probability at least 1 - 2 N exp(-lambda_r^2 / 2) over the N columns
// (twice that: a leaf formed as (dy d) r rounds twice). To first order: the
// adds' operands carry the roundings below them, at most lambda_r u sqrt(M)
// of P, so P is taken over 1 - lambda_r u sqrt(M), and the model is left
// out where that exceeds 1/8 (a narrow accumulator over many rows).
// tau_i bounds |dy_i c~_i - t_i| (the propagated x-hat error, the column's
// `gain`). Their sum is rigorously at most sum_i tau_i, but c~_i - c_i is
// the kernel's arithmetic on x alone, so sum_i dy_i (c~_i - c_i) is again a
// sum of independent terms: at most lambda_d B sqrt(sum e_i^2) + 2^-28 sigma
// sum e_i for e_i >= |c~_i - c_i| (one more event per column), plus the
// leaves' underflow, which is not of that form. A large mean makes every
// row's x-hat err by about the same relative amount; summed with random
// signs that is sqrt(M) times one row's, not M times. At M = 65536 rows of
// 4 the bound is 0.47% of a dbeta's size (sqrt(sum dy^2)), not 6%; a serial
// fp32 chain down those rows, the deepest order, errs by at most 0.4% of
// the bound (tests/oracles/probabilistic_test.cpp).
// A reduction that flushes subnormals loses up to the smallest normal at
// any of its M adds (not a rounding of the model: added rigorously). dy
// drawn subnormal rounds by up to half T's smallest subnormal, added to B.
// lambda_d and lambda_r of each of a case's two column tensors take an
// eighth of its false-alarm probability; with the row sums' share this puts
// a case's at most 1.5 p.
// The bound needs no assumption on x, so it applies to every black-box case
// of an op that opts in (LayerNorm), whether or not x fits the model.
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
#include "core/dtype.h"
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

/// |z| of the generator's normal draws: the centred Irwin-Hall sum of four
/// 32-bit uniforms reaches 2^33 units of sqrt(3) 2^-32 (core/distribution.h).
inline constexpr double kNormalDrawBound = 3.4641016151377553;  // 2 sqrt 3, rounded up
/// |E dy| / sigma of those draws (the centre is 2 units of 2^-32 sqrt 3 off zero).
inline constexpr double kNormalDrawBias = 0x1p-28;

/// The gradient model of a case whose dy is drawn normal with scale sigma in
/// `dtype` (a subnormal draw rounds by up to half the smallest subnormal).
inline RandomGradient randomGradient(double sigma, DType dtype) {
  return RandomGradient{kNormalDrawBound * sigma * (1.0 + unitRoundoff(dtype)) + 0.5 * minSubnormal(dtype),
                        kNormalDrawBias * sigma};
}

/// lambda_d and lambda_r of one column tensor of a random gradient (M rows
/// of N columns), each at an eighth of the false-alarm probability p (a
/// case has two such tensors; lambda_d's events: every add of every column,
/// and each column's leaf deviations; lambda_r's: each column).
struct ColumnLambdas {
  double data = 0, rounding = 0;
};
inline ColumnLambdas columnLambdas(double M, double N, double p = tolerance::kStatisticalFalseAlarm) {
  const double share = p / 8.0;
  return ColumnLambdas{std::sqrt(2.0 * std::log(2.0 * std::max(1.0, N * (M + 1.0)) / share)),
                       std::sqrt(2.0 * std::log(2.0 * std::max(1.0, N) / share))};
}

/// What the gradient model's bound needs of one column sum of terms
/// t_i = dy_i c_i, the kernel forming dy_i c~_i.
struct GradientColumn {
  double coef_bound_sq = 0, coef_bound_abs = 0;  // sum_i b_i^2, sum_i b_i for b_i >= |c~_i|
  double term_sq = 0;                            // sum_i t_i^2
  double leaf_error = 0;                         // rigorous bound on |sum_i (dy_i c~_i - t_i)| (the column's gain)
  double coef_err_sq = 0, coef_err_abs = 0;      // sum_i e_i^2, sum_i e_i for e_i >= |c~_i - c_i|
  double fixed_err = 0;                          // the part of the leaves' error not of the form dy_i e_i
};

/// The error of such a column sum (any tree of adds) under the gradient
/// model, before its final rounding: the leaves' error, the smaller of its
/// rigorous bound and the model's (sum_i dy_i (c~_i - c_i) is a sum of
/// independent terms of mean ~0 too: lambda_d B sqrt(sum e^2) + bias sum e),
/// plus K times the adds' roundings (Azuma over them and the leaves'), plus
/// `rigorous` (the adds' underflow; a flushing reduction's losses). +inf
/// where the first-order step does not hold (lambda_r u sqrt(M) > 1/8).
inline double randomGradientColumnError(const RandomGradient& g, const ColumnLambdas& l, double u, double M,
                                        const GradientColumn& c, double rigorous) {
  const double carried = l.rounding * u * std::sqrt(M);  // the operands' own roundings, relative to P
  if (carried > 0.125) return INFINITY;
  const double node = (l.data * g.dy_bound * std::sqrt(c.coef_bound_sq) + g.dy_bias * c.coef_bound_abs) /
                      (1.0 - carried);
  const double leaf_error = std::min(
      c.leaf_error, l.data * g.dy_bound * std::sqrt(c.coef_err_sq) + g.dy_bias * c.coef_err_abs + c.fixed_err);
  const double leaves = 2.0 * (std::sqrt(c.term_sq) + c.leaf_error);  // up to two roundings each: (dy d) r
  return leaf_error + tolerance::kBudgetSafety * l.rounding * u * std::sqrt(leaves * leaves + M * node * node) +
         rigorous;
}

/// The depths the probabilistic budget replaces a black box's depths with.
inline ReductionDepths effectiveDepths(const ReductionDepths& rigorous, double elements, double u) {
  const double l = lambda(elements, rigorous, u);
  ReductionDepths d = rigorous;
  d.row = effectiveDepth(rigorous.row, l, u);
  d.col = effectiveDepth(rigorous.col, l, u);
  if (d.row < rigorous.row) d.row_lambda = l;
  return d;
}

}  // namespace ulpcheck::probabilistic
