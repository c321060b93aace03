// Helpers shared by the oracles' self-checks (tests/oracles/):
// the Boost.Multiprecision reference type, the round-to-odd decision for a
// high-precision value known to within an error bound, the bitwise/close
// agreement bookkeeping, and the MPFR central differences. Every constant
// carries its derivation here, so each self-check only adds the scales of
// its own op.
#pragma once

#include <boost/multiprecision/cpp_bin_float.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/dtype.h"
#include "core/parallel.h"
#include "oracles/double_word.h"
#include "oracles/mpfr_util.h"
#include "oracles/reference.h"

namespace ulpcheck::oracle_check {

namespace bmp = boost::multiprecision;

// 256 binary digits: inputs are at most 24-bit values, so every product of
// three inputs is exact and the only errors are a few 2^-256 roundings.
using Big = bmp::number<bmp::cpp_bin_float<256, bmp::digit_base_2>, bmp::et_off>;

// The oracle's exact values are round-to-odd doubles: at most one ulp of
// double (<= 2^-52 relative) from the true value; both high-precision
// references add errors of ~2^-150 of the element's scale. 2^-51 relative to
// the scale is therefore never exceeded by a correct oracle, yet any error
// above two ulps of double (of the scale) fails.
inline constexpr double kDoubleAgreement = 0x1p-51;

// Bound on the pre-rounding error of the oracle (160-bit arithmetic, ~10
// roundings of 2^-160 each) plus the Boost reference's (256 bits, sums of at
// most 2^13 terms), relative to the element's scale. When the interval of this
// half-width around the Boost value contains no double, the round-to-odd
// double of the true value is determined and the oracle must equal it bit for bit.
inline constexpr double kHighPrecisionSlack = 0x1p-140;

// A nonzero reference value within 2^-90 of a double (relative) is "near a
// double": an exact double (y = beta on a constant row, a sum of inputs) or a
// tiny perturbation of one. Its round-to-odd double is then not decided by the
// slack above, so such elements are checked by agreement (and closed forms)
// only, and are left out of the share that must be compared bitwise. A
// generic value is that close to a double with probability 2^-37.
inline constexpr double kNearDouble = 0x1p-90;

// Finite differences: a step h = 2^-100 of the quantity's natural scale makes
// the truncation error ~ (h/s)^2 = 2^-200 of the gradient's scale and the
// 400-bit rounding error ~2^-300; the oracle's own 160-bit error is ~2^-155
// of the scale. So the only sizeable difference is the round-to-odd
// conversion of the exact value (<= 2^-52 relative to it).
inline constexpr mpfr_prec_t kFdBits = 400;
inline constexpr int kFdStepLog2 = -100;
inline constexpr double kFdRelative = 0x1p-50;  // 4x the round-to-odd conversion's 2^-52
inline constexpr double kFdScale = 0x1p-100;    // 2^50 above the FD and oracle errors, far below 2^-52

using dw::bitsOf;  // a double's bit pattern, and back (oracles/double_word.h)
using dw::fromBits;

inline bool sameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

/// Largest double <= a, for a > 0 (convert_to rounds to nearest, so step).
inline double truncateToDouble(const Big& a) {
  double d = a.convert_to<double>();
  if (std::isinf(d)) d = DBL_MAX;
  while (d > 0.0 && Big(d) > a) d = std::nextafter(d, 0.0);
  for (;;) {
    const double up = std::nextafter(d, INFINITY);
    if (std::isinf(up) || Big(up) > a) return d;
    d = up;
  }
}

/// The round-to-odd double of a value known exactly (0 for 0).
inline double roundToOddExact(const Big& v) {
  if (v == 0) return 0.0;
  const Big a = bmp::abs(v);
  const double t = truncateToDouble(a);
  const double odd = Big(t) == a ? t : fromBits(bitsOf(t) | 1u);
  return v < 0 ? -odd : odd;
}

/// The round-to-odd double of every value within err of b, or nothing when
/// that interval contains a double (then the rounding is not determined).
inline std::optional<double> roundToOddOf(const Big& b, const Big& err) {
  const Big lo = b - err, hi = b + err;
  if (lo <= 0 && hi >= 0) return std::nullopt;  // contains 0
  const bool negative = b < 0;
  const Big a_lo = negative ? Big(-hi) : lo, a_hi = negative ? Big(-lo) : hi;
  const double t = truncateToDouble(a_lo);
  if (Big(t) == a_lo || truncateToDouble(a_hi) != t) return std::nullopt;
  const double odd = fromBits(bitsOf(t) | 1u);  // the odd one of t and its successor
  return negative ? -odd : odd;
}

/// Compares oracle values with high-precision reference values. Each check
/// returns an empty string when they agree, else a message.
struct Agreement {
  int64_t nonzero = 0;      // check(): reference values that are not 0
  int64_t near_double = 0;  // check(): of those, within kNearDouble of a double
  int64_t bitwise = 0;      // check(): compared bit for bit (round-to-odd determined)
  int64_t undecided = 0;    // check(): nonzero, not near a double, yet not determined
  int64_t exact = 0;        // checkExact(): exactly known values, compared bit for bit

  /// `boost` is within ~2^-150 slack_scale of the true value; `scale` bounds
  /// the magnitudes the value is made of (slack_scale >= scale: it may also
  /// carry magnitudes that cancel, e.g. |mean| in x - mean, which a 160-bit
  /// oracle and the reference may lose 2^-160 of).
  std::string check(const char* tensor, int64_t index, double oracle, const Big& boost, double scale,
                    double slack_scale = -1.0) {
    if (slack_scale < scale) slack_scale = scale;
    bool near = false;
    if (boost != 0) {
      ++nonzero;
      const Big nearest(boost.convert_to<double>());
      near = bmp::abs(boost - nearest) <= bmp::abs(boost) * kNearDouble;
      near_double += near;
    }
    const double diff = bmp::abs(Big(oracle) - boost).convert_to<double>();
    if (!(diff <= kDoubleAgreement * scale))
      return fmt::format("{}[{}]: oracle {} vs Boost {} (diff {:.3g}, {:.3g} of scale {:.3g})", tensor, index,
                         hexFloat(oracle), hexFloat(boost.convert_to<double>()), diff, diff / scale, scale);
    if (const auto expected = roundToOddOf(boost, Big(slack_scale) * kHighPrecisionSlack)) {
      ++bitwise;
      if (bitsOf(*expected) != bitsOf(oracle))
        return fmt::format("{}[{}]: oracle {} is not the round-to-odd double {} of the exact value", tensor, index,
                           hexFloat(oracle), hexFloat(*expected));
    } else if (boost != 0 && !near) {
      ++undecided;
    }
    return "";
  }

  /// `expected` is the round-to-odd double of an exactly known value: the
  /// oracle must equal it (a zero of either sign matches a zero).
  std::string checkExact(const char* tensor, int64_t index, double oracle, double expected) {
    ++exact;
    if (bitsOf(oracle) == bitsOf(expected) || (oracle == 0.0 && expected == 0.0)) return "";
    return fmt::format("{}[{}]: oracle {} but the exact value's round-to-odd double is {}", tensor, index,
                       hexFloat(oracle), hexFloat(expected));
  }

  /// The share of nonzero, not-near-a-double elements that were compared bitwise.
  double bitwiseShare() const {
    const int64_t decidable = nonzero - near_double;
    return decidable > 0 ? 1.0 - double(undecided) / double(decidable) : 1.0;
  }
};

/// Central difference (L(v + h) - L(v - h)) / 2h for one coordinate held in
/// `slot` with value v (a double), h = 2^h_exp so v +- h is exact at kFdBits.
template <typename Loss>
void centralDifference(mpfr_ptr out, mpfr_ptr slot, double v, mpfr_exp_t h_exp, Loss loss, mp::Real& lp, mp::Real& lm) {
  mp::Real h(kFdBits);
  mpfr_set_ui_2exp(h, 1, h_exp, MPFR_RNDN);
  mpfr_add_d(slot, h, v, MPFR_RNDN);
  loss(lp);
  mpfr_d_sub(slot, v, h, MPFR_RNDN);
  loss(lm);
  mpfr_set_d(slot, v, MPFR_RNDN);
  mpfr_sub(out, lp, lm, MPFR_RNDN);
  mpfr_div_2si(out, out, h_exp + 1, MPFR_RNDN);
}

/// |fd - exact| <= kFdRelative |exact| + kFdScale scale, or a message.
inline std::string compareFd(const char* tensor, int64_t i, int64_t j, mpfr_srcptr fd, double exact, double scale) {
  mp::Real diff(kFdBits);
  mpfr_sub_d(diff, fd, exact, MPFR_RNDN);
  const double d = std::fabs(mpfr_get_d(diff, MPFR_RNDN));
  if (d <= kFdRelative * std::fabs(exact) + kFdScale * scale) return "";
  return fmt::format("{}[{},{}]: oracle {} vs finite difference {} (diff {:.3g}, scale {:.3g})", tensor, i, j,
                     hexFloat(exact), hexFloat(mpfr_get_d(fd, MPFR_RNDN)), d, scale);
}

/// Runs `oracle(pool)` on 1, 3 and 4 threads: empty when the tensors that
/// `tensors(result)` lists hold bit-identical exact values and budgets in all
/// three results, else the ones that differ.
template <typename Oracle, typename Tensors>
std::string threadDependence(Oracle oracle, Tensors tensors) {
  ThreadPool pool1(1), pool3(3), pool4(4);
  const auto one = oracle(pool1);
  std::string differ;
  for (ThreadPool* pool : {&pool3, &pool4}) {
    const auto other = oracle(*pool);
    const std::vector<const ReferenceTensor*> a = tensors(one), b = tensors(other);
    for (size_t k = 0; k < a.size(); ++k) {
      const std::string where = fmt::format(" {} ({} threads)", a[k]->name, pool->size());
      if (!sameBits(a[k]->exact, b[k]->exact)) differ += " exact" + where;
      if (!sameBits(a[k]->budget, b[k]->budget)) differ += " budget" + where;
    }
  }
  return differ;
}

/// What every budget must satisfy: finite and positive for a finite exact
/// value, and admitting the correctly rounded result (overflow to Inf is
/// judged against the threshold, not the budget; `overflowing` counts those).
inline bool budgetAdmitsCorrectlyRounded(const ReferenceTensor& r, size_t e, int64_t& overflowing) {
  const double b = r.budget[e], exact = r.exact[e], cr = r.correctlyRounded(static_cast<int64_t>(e));
  overflowing += std::isinf(cr);
  return std::isfinite(b) && b > 0.0 && std::isfinite(exact) && (std::isinf(cr) || std::fabs(cr - exact) <= b);
}

/// "name[e]: exact ... budget ... correctly rounded ...", for a failure message.
inline std::string budgetElement(const ReferenceTensor& r, size_t e) {
  return fmt::format("{}[{}]: exact {} budget {} correctly rounded {}", r.name, e, hexFloat(r.exact[e]),
                     hexFloat(r.budget[e]), hexFloat(r.correctlyRounded(static_cast<int64_t>(e))));
}

/// round_T(v) for a value v that Boost knows to within err: both ends of
/// [v - err, v + err] rounded exactly (round-to-odd of the exact Big, then
/// to T: correct since 53 >= p + 2). Rounding is monotone, so equal ends
/// decide every value between; nothing when the interval holds a rounding
/// boundary of T (-0 and +0 compare equal: a rounding to zero is decided).
inline std::optional<double> roundToFormatOf(DType t, const Big& v, const Big& err) {
  const double lo = roundToFormat(t, roundToOddExact(v - err)), hi = roundToFormat(t, roundToOddExact(v + err));
  if (lo != hi) return std::nullopt;
  return roundToFormat(t, roundToOddExact(v));
}

}  // namespace ulpcheck::oracle_check
