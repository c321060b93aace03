// The LayerNorm budgets of one row and its elements, as functions the host
// oracle (oracles/layernorm.cpp, where every term is derived) and the GPU
// oracle (oracles/layernorm_device.cu) both call: each is a double computed
// from doubles both sides agree on (decided exact values, the nearest d_j,
// x-hat_j, r, c1, c2, and row sums taken in column order on both sides), so
// the two give the same double only if they evaluate the same expressions
// in the same order, without contracted multiply-adds (-ffp-contract=off on
// the host, -fmad=false on the GPU).
#pragma once

#include <cmath>

#include "core/accuracy.h"
#include "core/dtype.h"
#include "core/hd.h"
#include "oracles/double_word.h"
#include "oracles/reference.h"
#include "oracles/tolerances.h"

namespace ulpcheck::layernorm_budget {

// std::min and std::max as they are (NaN handling included), on both sides.
ULPCHECK_HD inline double smaller(double a, double b) { return b < a ? b : a; }
ULPCHECK_HD inline double larger(double a, double b) { return a < b ? b : a; }

// ---------------------------------------------------------------------------
// The certified fast path's exactness tests (oracles/layernorm.cpp, "The
// certified fast path"), which the GPU oracle repeats.

/// The bound of a value the double words hold exactly (d = x - mean formed
/// by twoSum about an exact double mean; V where varianceWordsExact): MPFR's
/// 160-bit value is exact too unless its bits span more than 160 (from
/// v.h's first to v.l's last: at most ilogb(v.h) - ilogb(v.l) + 53); there
/// it is within `slack` |v| of it.
ULPCHECK_HD inline double exactWordBound(const dw::DW& v, double slack) {
  if (v.l == 0.0) return 0.0;
  // A word that is not finite holds nothing exactly (and ilogb of it, an
  // extreme int, would overflow the difference: UBSan's find).
  if (!std::isfinite(v.h) || !std::isfinite(v.l)) return INFINITY;
  return ilogb(v.h) - ilogb(v.l) <= 100 ? 0.0 : slack * fabs(v.h);
}

/// A deviation's share of the exact-variance test (varianceWordsExact):
/// where d is a double held exactly (b_d = 0, d.l = 0), its quantum (its
/// square is a multiple of the quantum's square); 0, failing the test, where
/// it is not; infinity for d = 0. The row's Q is the smallest of its
/// elements'.
ULPCHECK_HD inline double squareQuantum(const dw::DW& d, double b_d) {
  return b_d != 0.0 || d.l != 0.0 ? 0.0 : dw::quantum(d.h);
}

/// Whether V = squares / n + eps, formed as dw::plus(dw::divide(squares,
/// n), eps) = plus(quotient, eps), is exact, every d_j being an exact double
/// that is a multiple of Q (the smallest squareQuantum): the squares are
/// exact twoProds, multiples of Q^2, so their double-word sum is exact below
/// dw::kExactSumQuanta Q^2 (Q >= 2^-450 keeps every low part, and the
/// quotient's, clear of underflow for n <= 2^50); dividing by a power of two
/// is exact (dw::divide's reciprocal and products are); and plus(quotient,
/// eps) rounds only quotient.l + twoSum(quotient.h, eps).l, tested here.
/// MPFR's squares, sum and quotient are then exact at 160 bits too, and its
/// V where exactWordBound says so. The exact V often sits on a midpoint
/// between doubles (16-bit rows of N = 2^k): there only a zero bound decides
/// its nearest double.
ULPCHECK_HD inline bool varianceWordsExact(double Q, const dw::DW& squares, double n, const dw::DW& quotient,
                                           double eps) {
  int exponent = 0;
  const bool power_of_two = frexp(n, &exponent) == 0.5 && n <= 0x1p50;
  const bool squares_exact = Q >= 0x1p-450 && squares.h < dw::kExactSumQuanta * (Q * Q);
  return power_of_two && squares_exact && dw::twoSum(quotient.l, dw::twoSum(quotient.h, eps).l).l == 0.0;
}

/// The constants of a case that its budgets read (oracles/layernorm.cpp's Setup).
struct Constants {
  DType T = DType::F32;    // y's and dx's dtype
  DType S = DType::F32;    // the saved statistics' dtype
  DType acc = DType::F32;  // the declared accumulation precision
  double u = 0, K = 0, eta = 0;
  double D = 1;  // declared row depth
  double eps = 0;
  // ReductionDepths' declarations about the statistics.
  bool mean_is_rounded_quotient = false, mean_of_plain_sum = false, two_pass_statistics = false;
  double row_lambda = 0;
  // Running means of a declared shape: chains of at most this many Welford
  // updates, then this many levels of merges (0: not declared).
  double running_chain = 0, running_merges = 0;
  bool running_update_merges = false;  // ... merged in the update form (exact where the means are equal)
  ULPCHECK_HD bool runningShape() const { return !two_pass_statistics && running_chain > 0; }
};

/// A case's constants: y and dx in T, statistics saved in S, the variant's contract, eps.
inline Constants constantsOf(DType T, DType S, const AccuracyContract& c, float eps) {
  return Constants{T,
                   S,
                   c.accumulation,
                   unitRoundoff(c.accumulation),
                   tolerance::kBudgetSafety,
                   tolerance::kUnderflowHalfUlps * minSubnormal(c.accumulation),
                   double(c.depths.row),
                   double(eps),
                   c.depths.mean_is_rounded_quotient,
                   c.depths.mean_of_plain_sum,
                   c.depths.two_pass_statistics,
                   c.depths.row_lambda,
                   double(c.depths.running_chain),
                   double(c.depths.running_merges),
                   c.depths.running_update_merges};
}

/// The mean's error bound Dm, and what the variance's bound reads of the deviations.
struct StatisticsError {
  double Dm = 0, A_d = 0, DV_running = 0;
};

/// The statistics' error from a row's sums in column order: sum |x_j|
/// (abs_x), q (the smallest ulp in T among its values), the round-to-odd
/// mean, the nearest deviations' sum |d_j|, max |d_j| and sum d_j^2, and
/// V = var + eps. The derivation is oracles/layernorm.cpp's.
ULPCHECK_HD inline StatisticsError statisticsError(const Constants& k, double n, double abs_x, double q,
                                                   double mean_odd, double abs_d, double max_d, double sq_d, double V) {
  const double u = k.u, K = k.K, D = k.D;
  const double A = abs_x / n, A_d = abs_d / n;
  const bool exact_sum = k.acc == DType::F32 && n < 0x1p24 && abs_x < 0x1p24 * q;
  double Dm = K * ((D + 1.0) * u * A + k.eta);
  if (exact_sum && k.mean_is_rounded_quotient)
    Dm = fabs(roundToFormat(DType::F32, mean_odd) - mean_odd) + 0x1p-52 * fabs(mean_odd);
  else if (exact_sum && k.mean_of_plain_sum)
    // The exact sum divided within 2 ulp of fp32 (an approximate divide) or
    // times fl(1/N) (two roundings): 4 u |mean|, or 2 ulps where the mean is subnormal in fp32.
    Dm = 4.0 * u * fabs(mean_odd) + 4.0 * minSubnormal(DType::F32) + 0x1p-52 * fabs(mean_odd);
  // Running means (Welford, Chan's merges: PyTorch's CUDA LayerNorm): a
  // tree of merges of height H; see the derivation. Their own mean error,
  // and the variance's share of the merges' mean errors: the telescoped
  // cross term, their squares, Welford's x - m~_k form.
  double DV_running = 0.0;
  if (k.runningShape() && k.running_update_merges && max_d == 0.0) {
    // A constant row (max|d| = 0: the nearest d_j of a row that is not
    // constant are not 0) whose merges take the update form: its statistics
    // are exact; see "Merges of the update form" in the derivation.
    Dm = 0.0;
  } else if (k.runningShape()) {
    // Running means of a declared shape: chains of at most c Welford updates
    // (the update form), then at most h levels of merges (either form; a
    // merge with an empty side exact), of which a row of n has at most n - 1
    // on a path; see "Running means of a declared shape" in the derivation.
    const double c = k.running_chain, h = smaller(k.running_merges, n - 1.0), abs_mean = fabs(mean_odd);
    const double Vp = larger(V - k.eps, 0.0);
    const double steps = c > 1.0 ? 1.0 : 0.0, merges = h > 0.0 ? 1.0 : 0.0;  // whether there are any
    const double chain_weight = (c + 1.0) / 2.0 - 1.0 / c;  // of |mean| per element: sum_{k=2}^{c} k / c
    // Every chain prefix's mean, computed or exact, lies between the row's
    // smallest and largest value, within 2 max|d| of each other (the nearest
    // d_j are within 2^-52 of the exact ones).
    const double spread = 2.0 * max_d * (1.0 + 0x1p-50);
    // A chain prefix's error: its updates' roundings, u (c + 7) / 2 of its own
    // error carried by their operands (second order).
    const double carried = 1.0 - u * (c + 7.0) / 2.0;
    const double chain_sub = smaller(
        (u * (abs_mean * chain_weight + (c - 1.0 + 6.0 * steps) * max_d) + 4.0 * (c - 1.0) * k.eta) / carried, spread);
    const double chain_root = smaller(
        u * (abs_mean * chain_weight + (c - 1.0 + 3.0 * steps) * A_d + 3.0 * steps * max_d) + 4.0 * (c - 1.0) * k.eta +
            u * (c + 7.0) / 2.0 * chain_sub,
        spread);
    // A node's, the merges' roundings added (each 12 u of its operands' errors).
    const double Dm_sub = (chain_sub + u * h * (4.0 * abs_mean + 12.0 * max_d) + 4.0 * h * k.eta) /
                          (1.0 - 12.0 * u * h);
    const double Dm_root = chain_root + u * h * (4.0 * abs_mean + 12.0 * (A_d + Dm_sub)) + 4.0 * h * k.eta;
    Dm = K * Dm_root;
    const double R = 4.0 * abs_mean + 12.0 * (max_d + Dm_sub);  // any node's |rho| <= u R (+ 4 eta)
    const double nodes = c - 1.0 + h;                           // on a path
    const double cross =
        2.0 * u *
            (abs_mean * A_d * (c - 1.0 + 4.0 * h) + (2.5 * (c - 1.0) + 1.5 * steps + 8.0 * h + 4.0 * merges) * Vp) +
        24.0 * u * Dm_sub * nodes * A_d + 8.0 * k.eta * nodes * A_d;
    DV_running = K * (cross + chain_sub * chain_sub + h * Dm_sub * Dm_sub + steps * u * R * (A_d + max_d));
  } else if (!k.two_pass_statistics) {
    const double H = smaller(D, n - 1.0), L = smaller(H, (n + 1.0) / 2.0), abs_mean = fabs(mean_odd);
    const double lambda = k.row_lambda;  // > 0: D is an effective depth
    const double S_d = lambda > 0 ? sqrt(sq_d / n) : A_d, Vp = larger(V - k.eps, 0.0);
    const double Dm_sub = u * L * (4.0 * abs_mean + 12.0 * max_d) + 4.0 * L * k.eta;
    const double Dm_root = u * (lambda > 0 ? D : L) * (4.0 * abs_mean + 12.0 * S_d) + 4.0 * L * k.eta;
    Dm = larger(Dm, K * Dm_root);
    const double R = 4.0 * abs_mean + 12.0 * (max_d + Dm_sub);  // |rho| <= u R (+ 4 eta)
    const double cross = (lambda > 0 ? 2.0 * sqrt(12.0) * u *
                                           sqrt(16.0 * abs_mean * abs_mean * D * D * Vp +
                                                (16.0 * D * D + 128.0 * lambda * lambda) * Vp * Vp)
                                     : 2.0 * u * (4.0 * abs_mean * L * A_d + (8.0 * H + 4.0) * Vp)) +
                         24.0 * u * Dm_sub * L * S_d + 8.0 * k.eta * L * S_d;
    DV_running = K * (cross + Dm_sub * Dm_sub * log2(n) + u * R * (A_d + max_d));
  }
  return {Dm, A_d, DV_running};
}

/// Dd_j, the bound of d~_j = fl(x_j - mean~) about d_j, from the mean's Dm.
ULPCHECK_HD inline double deviationError(const Constants& k, double Dm, double d) {
  return Dm + k.K * k.u * (fabs(d) + Dm);
}

/// rstd~'s interval: r_hi, and Dr, its widest distance from r.
struct RstdError {
  double r_hi = 0, Dr = 0;
};

/// From V = var + eps, r, Dm, A_d, mean_j Dd_j^2 (summed in column order,
/// then divided by N) and the running means' share of the variance's error.
ULPCHECK_HD inline RstdError rstdError(const Constants& k, double V, double r, double Dm, double A_d, double mean_dd2,
                                       double DV_running) {
  const double u = k.u, K = k.K, D = k.D;
  // Running means of a declared shape never subtract the row's mean~ from
  // x (no mean_j Dd_j^2: their merges' mean errors are DV_running's); their
  // M2's roundings are those of its chains and merges, c + h + 5 along a path.
  const bool running = k.runningShape();
  const double Dv = running ? larger(D, k.running_chain + k.running_merges + 1.0) : D;
  const double DV = K * ((Dv + 4.0) * u * V + 2.0 * u * Dm * A_d + k.eta) +
                    (running ? 0.0 : (1.0 + K * (D + 1.0) * u) * mean_dd2) + DV_running;
  const double rsqrt_rel = K * tolerance::kRsqrtUnits * u;
  RstdError e;
  e.r_hi = (1.0 + rsqrt_rel) / sqrt(larger(V - DV, k.eps));
  const double r_lo = (1.0 - rsqrt_rel) / sqrt(V + DV);
  e.Dr = larger(e.r_hi - r, r - r_lo);
  return e;
}

/// Dx_j, x-hat_j's error bound.
ULPCHECK_HD inline double xhatError(const Constants& k, double r_hi, double Dr, double d, double dd) {
  const double ad = fabs(d);
  return r_hi * dd + ad * Dr + k.K * k.u * (ad + dd) * r_hi;
}

/// y_j's budget about `exact` from gamma_j, Dx_j and the rstd r the budgets read.
ULPCHECK_HD inline double yBudget(const Constants& k, double exact, double gamma, double dxh, double r) {
  const double ag = fabs(gamma);
  return budgetFromError(k.T, exact, ag * dxh + k.K * (k.u * (fabs(exact) + ag * dxh) + k.eta * (1.0 + r)));
}

/// The sums over a row (in column order) that bound c1 = mean(a) and c2 = mean(a x-hat), a = gamma dy.
struct BackwardSums {
  double p1 = 0, p2 = 0, a_dx = 0, da_sum = 0, dc2_prop = 0;
};

ULPCHECK_HD inline void addBackwardTerms(const Constants& k, BackwardSums& s, double a, double xh, double dxh) {
  const double da = k.K * (k.u * fabs(a) + k.eta);
  s.p1 += fabs(a);
  s.p2 += fabs(a * xh);
  s.a_dx += fabs(a) * dxh;
  s.da_sum += da;
  s.dc2_prop += fabs(a) * dxh + (fabs(xh) + dxh) * da;
}

/// Dc1 and Dc2 from a row's BackwardSums.
struct BackwardError {
  double Dc1 = 0, Dc2 = 0;
};

ULPCHECK_HD inline BackwardError backwardError(const Constants& k, double n, const BackwardSums& s) {
  return {k.K * (k.D + 1.0) * k.u * (s.p1 / n) + s.da_sum / n,
          s.dc2_prop / n + k.K * ((k.D + 1.0) * k.u * (s.p2 / n + s.a_dx / n) + 2.0 * k.eta)};
}

/// dx_j's budget about `exact` from the nearest a - c1 - xhat c2 (`inner`) and the row's bounds.
ULPCHECK_HD inline double dxBudget(const Constants& k, double exact, double a, double xh, double Dx, double c1,
                                   double c2, const BackwardError& b, double r_hi, double Dr, double inner) {
  const double u = k.u, K = k.K;
  const double Da = K * (u * fabs(a) + k.eta);
  const double Di = Da + b.Dc1 + (fabs(xh) + Dx) * b.Dc2 + fabs(c2) * Dx +
                    K * (u * (2.0 * (fabs(a) + fabs(c1)) + fabs(xh * c2)) + 2.0 * k.eta);
  return budgetFromError(k.T, exact, r_hi * Di + fabs(inner) * Dr + K * (u * r_hi * (fabs(inner) + Di) + k.eta));
}

/// The sizes of the terms (ReferenceTensor::magnitude): y = xhat gamma + beta, dx = r (a - c1 - xhat c2).
ULPCHECK_HD inline double yMagnitude(double xhat, double gamma, double beta) { return fabs(xhat * gamma) + fabs(beta); }
ULPCHECK_HD inline double dxMagnitude(double r, double a, double c1, double xhat, double c2) {
  return r * (fabs(a) + fabs(c1) + fabs(xhat * c2));
}

}  // namespace ulpcheck::layernorm_budget
