// The RMSNorm budgets of one element, and the row sums they are made of, as
// functions the host oracle (oracles/rmsnorm.cpp) and the GPU oracle
// (oracles/rmsnorm_device.cu) both call: a budget is a double computed from
// doubles both sides agree on (decided exact values, the nearest r and c),
// so the two give the same double only if they evaluate the same
// expressions in the same order, without contracted multiply-adds
// (-ffp-contract=off on the host, -fmad=false on the GPU). The derivation
// of every term is in rmsnorm.cpp.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/hd.h"
#include "oracles/reference.h"

namespace ulpcheck::rmsnorm_budget {

/// The constants of a case that its element budgets read.
struct Constants {
  DType T = DType::F32;    // y's and dx's dtype
  DType acc = DType::F32;  // the declared accumulation precision
  double d_row = 1;        // declared row depth
  double delta_r = 0;      // rstd's relative error in units of u
  double delta_b = 0;      // the backward's rstd error (0 where it reads a saved T value exactly)
  double w_units = 0;      // 1 with a weight offset (offset + w rounds once more)
  bool bias = false;
};

// The MPFR path's distance from the exact value, relative to the magnitude
// of the terms (below 2^-150 of them; see rmsnorm.cpp "The certified fast
// path"): the certified interval is widened by this much, with room.
inline constexpr double kMpfrSlack = 0x1p-140;

// A row's sum of |(offset + w_j) dy_j x_j| (m = r / N times it): summed in
// 32 interleaved chains (chain k over the columns j = k mod 32, in column
// order), the chains then added in order. The order is the GPU's warp
// order, so a GPU warp and the host give the same double.
inline constexpr int kAbsSumChains = 32;

template <typename Term>
ULPCHECK_HD double chainedAbsSum(int64_t N, Term term) {
  double chain[kAbsSumChains];
  for (int k = 0; k < kAbsSumChains; ++k) chain[k] = 0.0;
  for (int64_t j = 0; j < N; ++j) chain[j % kAbsSumChains] += std::fabs(term(j));
  double total = 0.0;
  for (int k = 0; k < kAbsSumChains; ++k) total += chain[k];
  return total;
}

/// The rstd's budget: r~ within delta_r u r of r, saved in `saved`.
ULPCHECK_HD inline double rstd(const Constants& s, DType saved, double exact, double r) {
  return elementBudget(saved, s.acc, exact, s.delta_r * r, 0.0);
}

/// y = x r (offset + w) (+ b) under plain rounding; w is offset + w rounded to double.
ULPCHECK_HD inline double plainY(const Constants& s, double exact, double xhat, double w, double bias, double r) {
  // + b: one more fp32 rounding, of a sum as large as |xhat w| + |b|.
  const double bias_units = s.bias ? std::fabs(xhat * w) + std::fabs(bias) : 0.0;
  return elementBudget(s.T, s.acc, exact, (s.delta_r + 2.0 + s.w_units) * std::fabs(xhat * w) + bias_units,
                       1.0 + std::fabs(w) + r);
}

/// An element's error before its final rounding, as elementBudget reads it.
struct ElementError {
  double scale, gain, absolute;
};

/// dx = rb (a - xhat_b c)'s error, xhat_b = x rb, with the backward's rstd rb and its spread.
ULPCHECK_HD inline ElementError dxError(const Constants& s, double a, double xv, double c, double m, double rb,
                                        double spread_r) {
  const double xhat_b = xv * rb;
  const double scale_dx = rb * ((s.delta_b + 3.0 + s.w_units) * std::fabs(a) +
                                (2.0 * s.delta_b + 4.0) * std::fabs(xhat_b * c) +
                                (s.d_row + s.delta_b + 4.0 + s.w_units) * std::fabs(xhat_b) * m);
  const double spread_dx = spread_r *
                           (std::fabs(a) + std::fabs(xv * c) * (3.0 * rb + 3.0 * spread_r + spread_r * spread_r / rb));
  return {scale_dx, rb * (2.0 + std::fabs(c) + std::fabs(xhat_b)) + 1.0, spread_dx};
}

ULPCHECK_HD inline double dx(const Constants& s, double exact, double a, double xv, double c, double m, double rb,
                             double spread_r) {
  const ElementError e = dxError(s, a, xv, c, m, rb, spread_r);
  return elementBudget(s.T, s.acc, exact, e.scale, e.gain, e.absolute);
}

/// dx + g (fused add's backward, g the gradient reaching residual_out) stored
/// in `out`: dx's error, then one fp32 add, u |dx + g| (the sum's size, the
/// error above second order, within the safety factor).
ULPCHECK_HD inline double dxPlusGradient(const Constants& s, DType out, double exact, double a, double xv, double c,
                                         double m, double rb, double spread_r) {
  const ElementError e = dxError(s, a, xv, c, m, rb, spread_r);
  return elementBudget(out, s.acc, exact, e.scale + std::fabs(exact), e.gain, e.absolute);
}

/// The size of dx's terms, r (|a| + |xhat c|): dx cancels where they are equal.
ULPCHECK_HD inline double dxMagnitude(double a, double xv, double c, double rb) {
  const double xhat_b = xv * rb;
  return rb * (std::fabs(a) + std::fabs(xhat_b * c));
}

}  // namespace ulpcheck::rmsnorm_budget
