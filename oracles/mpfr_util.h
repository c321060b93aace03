// Small RAII helpers over MPFR for the oracles.
#pragma once

#include <mpfr.h>

#include <cmath>
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
