// Small RAII helpers over MPFR for the oracles.
#pragma once

#include <mpfr.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"

namespace ulpcheck::mp {

/// An mpfr_t that frees itself.
class Real {
 public:
  explicit Real(mpfr_prec_t prec) { mpfr_init2(v_, prec); }
  ~Real() { mpfr_clear(v_); }
  Real(const Real&) = delete;
  Real& operator=(const Real&) = delete;
  Real(Real&& o) noexcept {
    std::memcpy(v_, o.v_, sizeof v_);
    mpfr_init2(o.v_, MPFR_PREC_MIN);
  }
  mpfr_ptr get() { return v_; }
  mpfr_srcptr get() const { return v_; }
  operator mpfr_ptr() { return v_; }
  operator mpfr_srcptr() const { return v_; }

 private:
  mpfr_t v_;
};

/// A vector of mpfr_t of one precision, with the pointer array mpfr_sum takes.
class RealArray {
 public:
  RealArray(size_t n, mpfr_prec_t prec) : values_(n), ptrs_(n) {
    for (size_t i = 0; i < n; ++i) {
      mpfr_init2(&values_[i], prec);
      mpfr_set_zero(&values_[i], 1);
      ptrs_[i] = &values_[i];
    }
  }
  ~RealArray() {
    for (auto& v : values_) mpfr_clear(&v);
  }
  RealArray(const RealArray&) = delete;
  RealArray& operator=(const RealArray&) = delete;
  mpfr_ptr operator[](size_t i) { return &values_[i]; }
  mpfr_srcptr operator[](size_t i) const { return &values_[i]; }
  size_t size() const { return values_.size(); }
  /// Correctly rounded sum of the first n elements into `out`.
  void sum(mpfr_ptr out, size_t n) { mpfr_sum(out, ptrs_.data(), n, MPFR_RNDN); }

 private:
  std::vector<__mpfr_struct> values_;  // never reallocated: the pointers stay valid
  std::vector<mpfr_ptr> ptrs_;
};

/// The sum of n terms, term(j, t) setting `t` (of precision `term_prec`)
/// to the j-th, correctly rounded to `out`'s precision (to nearest): what
/// mpfr_sum of them held in an array gives, zero's sign included, without
/// the array (a wide row's 160-bit terms are tens of bytes a column). A
/// first pass finds the terms' exponent range; a second adds them, in
/// order, at a precision that holds every partial sum exactly (each term
/// is a multiple of 2^lowest, every partial below n 2^highest); the exact
/// total is rounded once. Each term is made twice.
template <typename Term>
void streamedSum(mpfr_ptr out, int64_t n, mpfr_prec_t term_prec, Term term) {
  Real t(term_prec);
  mpfr_exp_t highest = LONG_MIN, lowest = LONG_MAX;
  bool finite = true;
  for (int64_t j = 0; j < n; ++j) {
    term(j, static_cast<mpfr_ptr>(t));
    if (!mpfr_number_p(t)) finite = false;
    if (!mpfr_regular_p(t)) continue;  // zeros add nothing; NaN and Inf are summed as they are
    highest = std::max(highest, mpfr_get_exp(t));
    lowest = std::min(lowest, mpfr_get_exp(t) - mpfr_get_prec(t));
  }
  int log2_n = 1;
  while ((int64_t{1} << log2_n) < n && log2_n < 62) ++log2_n;
  const mpfr_prec_t exact_prec = finite && highest != LONG_MIN
                                     ? std::max<mpfr_prec_t>(term_prec, highest - lowest + log2_n + 2)
                                     : term_prec;
  Real total(exact_prec);
  mpfr_set_zero(total, 1);  // no terms: +0
  for (int64_t j = 0; j < n; ++j) {
    term(j, static_cast<mpfr_ptr>(t));
    // From the first term (so that zeros all -0 sum to -0), then exact adds.
    if (j == 0) mpfr_set(total, t, MPFR_RNDN);
    else mpfr_add(total, total, t, MPFR_RNDN);
  }
  mpfr_set(out, total, MPFR_RNDN);
}

/// Rounds to double with round-to-odd: truncate, and if inexact force the last
/// significand bit to 1. A later round-to-nearest to any format of at most 51
/// bits then equals rounding the MPFR value directly (Boldo & Melquiond).
inline double toDoubleRoundToOdd(mpfr_srcptr x) {
  const double truncated = mpfr_get_d(x, MPFR_RNDZ);
  if (mpfr_cmp_d(x, truncated) == 0 || std::isinf(truncated)) return truncated;
  uint64_t bits;
  std::memcpy(&bits, &truncated, sizeof bits);
  bits |= 1u;
  double odd;
  std::memcpy(&odd, &bits, sizeof odd);
  return odd;
}

/// A rounding point of the spec: v rounded to T, where v is known exactly
/// but a kernel computes it within +-e. `spec` is the rounding of the exact
/// v; `spread` the largest distance between two values a correct kernel may
/// round to (0 when [v - e, v + e] holds no rounding boundary of T: every
/// correct kernel then rounds to `spec`; one ulp of T or so when it does).
struct RoundingPoint {
  double spec = 0, spread = 0;
};

/// The same from v's round-to-odd double (what the certified fast paths decide).
inline RoundingPoint roundingPointOfOdd(DType T, double odd, double e) {
  // The interval is widened by 2^-50 |v| for the double arithmetic below.
  const double wide = e + 0x1p-50 * std::fabs(odd);
  return RoundingPoint{roundToFormat(T, odd), roundToFormat(T, odd + wide) - roundToFormat(T, odd - wide)};
}
inline RoundingPoint roundingPoint(DType T, mpfr_srcptr v, double e) {
  return roundingPointOfOdd(T, toDoubleRoundToOdd(v), e);
}

}  // namespace ulpcheck::mp
