// Double-word ("double-double") arithmetic with proven error bounds, and the
// certification of a value known within a bound: the fast oracles'
// arithmetic (oracles/rmsnorm.cpp, "The certified fast path").
//
// A double word is an unevaluated sum h + l of doubles with h = RN(h + l).
// The algorithms and their relative error bounds, u = 2^-53, are those of
// Joldes, Muller & Popescu, "Tight and rigorous error bounds for basic
// building blocks of double-word arithmetic", ACM TOMS 44(2), 2017:
//   DWPlusFP (Alg. 4)          2 u^2
//   AccurateDWPlusDW (Alg. 6)  3 u^2 + 13 u^3
//   DWTimesFP3 (Alg. 9)        2 u^2
//   DWTimesDW3 (Alg. 12)       4 u^2 (their Theorem 5.3)
//   DWDivDW3 (Alg. 18)         9.8 u^2
// and the square root of Lefèvre, Louvet, Muller, Picot & Rideau, "Accurate
// calculation of Euclidean norms using double-word arithmetic", ACM TOMS
// 49(1), 2023 (SQRTDWtoDW): 25/8 u^2. They hold without underflow or
// overflow; the callers keep every value in [2^-900, 2^900] or give up
// (kDoubleWordRange) and fall back to MPFR. Every function compiles for
// the GPU too (oracles/rmsnorm_device.cu), built without contracted
// multiply-adds there as here (-fmad=false, -ffp-contract=off).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/hd.h"

namespace ulpcheck::dw {

/// u^2 for binary64, u = 2^-53: the unit of the bounds above.
inline constexpr double kU2 = 0x1p-106;
/// The magnitudes inside which the bounds hold (no underflow of a low word,
/// no overflow): a value outside makes the caller fall back.
inline constexpr double kMinMagnitude = 0x1p-900, kMaxMagnitude = 0x1p900;

struct DW {
  double h = 0, l = 0;
};

ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE DW fastTwoSum(double a, double b) {  // |a| >= |b| or a = 0
  const double s = a + b, z = s - a;
  return {s, b - z};
}
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE DW twoSum(double a, double b) {
  const double s = a + b, bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE DW twoProd(double a, double b) {
  const double p = a * b;
  return {p, std::fma(a, b, -p)};
}
/// Alg. 4: (x + y), relative error <= 2 u^2.
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE DW plus(DW x, double y) {
  const DW s = twoSum(x.h, y);
  return fastTwoSum(s.h, x.l + s.l);
}
/// The same sum, and the exact size of what it drops (`dropped`; 0 where
/// the sum is exact): Alg. 4 rounds only x.l + s.l, whose error twoSum
/// gives, and its fastTwoSum is exact. Far tighter than 2 u^2 where y
/// dominates x (a bias beside a tiny product) or the sum is exact.
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE DW plus(DW x, double y, double& dropped) {
  const DW s = twoSum(x.h, y), t = twoSum(x.l, s.l);
  dropped = std::fabs(t.l);
  return fastTwoSum(s.h, t.h);
}
/// Alg. 6: (x + y), relative error <= 3 u^2 + 13 u^3.
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE DW plus(DW x, DW y) {
  const DW s = twoSum(x.h, y.h), t = twoSum(x.l, y.l);
  const DW v = fastTwoSum(s.h, s.l + t.h);
  return fastTwoSum(v.h, t.l + v.l);
}
/// Alg. 9: x y, relative error <= 2 u^2.
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE DW times(DW x, double y) {
  const DW c = twoProd(x.h, y);
  return fastTwoSum(c.h, std::fma(x.l, y, c.l));
}
/// Alg. 12: x y, relative error <= 4 u^2.
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE DW times(DW x, DW y) {
  const DW c = twoProd(x.h, y.h);
  const double tl1 = std::fma(x.h, y.l, x.l * y.l);
  return fastTwoSum(c.h, c.l + std::fma(x.l, y.h, tl1));
}
/// Alg. 18: x / y, relative error <= 9.8 u^2.
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE DW divide(DW x, DW y) {
  const double th = 1.0 / y.h;
  const DW e = fastTwoSum(std::fma(-y.h, th, 1.0), -y.l * th);
  const DW m = plus(times(e, th), th);
  return times(x, m);
}
/// SQRTDWtoDW: sqrt(x), relative error <= 25/8 u^2 (x > 0).
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE DW sqrt(DW x) {
  const double sh = std::sqrt(x.h);
  const double rho = x.l + std::fma(-sh, sh, x.h);
  return fastTwoSum(sh, rho / (2.0 * sh));
}

/// Double-word sums of values that are all multiples of q (for stored
/// values, the smallest ulp among them) are exact while the sum of their
/// magnitudes stays below kExactSumQuanta q, in any order and grouping:
/// twoSum and fastTwoSum are exact, and each low part that plus() rounds
/// (x.l + s.l in plus(DW, double); s.l + t.h and t.l + v.l in plus(DW, DW))
/// is a multiple of q below 2^-51 of that sum < 2^49 q, so a double. (The
/// callers test a sum of magnitudes computed in double, a little off the
/// exact one; the argument holds up to 2^103 q.)
inline constexpr double kExactSumQuanta = 0x1p100;

/// The largest power of two a finite double is a multiple of (the place of
/// its lowest set bit); infinity for 0. Sums of values that are multiples
/// of q are exact below kExactSumQuanta q.
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE double quantum(double v) {
  if (v == 0.0) return INFINITY;
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  const int biased = int((b >> 52) & 0x7ff);
  const uint64_t fraction = b & ((uint64_t{1} << 52) - 1);
  const uint64_t significand = biased == 0 ? fraction : fraction | (uint64_t{1} << 52);
#if defined(__CUDA_ARCH__)
  const int zeros = __ffsll((long long)significand) - 1;
#else
  const int zeros = __builtin_ctzll(significand);
#endif
  return std::ldexp(1.0, (biased == 0 ? -1074 : biased - 1075) + zeros);
}

/// A bound computed in double, rounded up past its own rounding errors:
/// the callers sum a handful of nonnegative terms, each product and sum
/// rounding by at most 2^-53 relative, so 2^-48 of headroom covers them.
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE double up(double bound) { return bound * (1.0 + 0x1p-48); }

ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE bool inRange(const DW& v) {
  const double a = std::fabs(v.h);
  return a == 0.0 || (a >= kMinMagnitude && a <= kMaxMagnitude);
}

ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE uint64_t bitsOf(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE double fromBits(uint64_t b) {
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}

/// The gaps from a nonzero finite d to its neighbours above and below
/// (the neighbours' bit patterns are d's plus and minus one in magnitude).
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE void gaps(double d, double& up, double& down) {
  const double a = std::fabs(d);
  const uint64_t b = bitsOf(a);
  const double away = fromBits(b + 1) - a, toward = a - fromBits(b - 1);
  up = d > 0 ? away : toward;
  down = d > 0 ? toward : away;
}

/// The round-to-odd double of a value v with |v - (x.h + x.l)| <= e, if
/// every such v has the same one (oracles/mpfr_util.h toDoubleRoundToOdd of
/// any of them gives it). x must be normalised (x.h = RN(x.h + x.l)), as
/// every result above is. False where the interval may hold a double: the
/// value may be that double or lie on either side of it. The comparisons
/// of l -+ e with gaps (doubles) survive the rounding of l -+ e, which is
/// monotonic.
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE bool roundToOdd(DW x, double e, double& out) {
  if (!std::isfinite(x.h) || !std::isfinite(x.l) || !(e >= 0.0)) return false;
  if (e == 0.0 && x.l == 0.0) {  // v = x.h exactly
    out = x.h;
    return true;
  }
  if (x.h == 0.0) return false;
  double up, down;
  gaps(x.h, up, down);
  if (x.l - e > 0.0 && x.l + e < up) {  // x.h < v < its successor
    out = (bitsOf(x.h) & 1u) ? x.h : x.h + up;
    return true;
  }
  if (x.l + e < 0.0 && x.l - e > -down) {  // its predecessor < v < x.h
    out = (bitsOf(x.h) & 1u) ? x.h : x.h - down;
    return true;
  }
  return false;
}

/// The round-to-nearest double of every v with |v - (x.h + x.l)| <= e, if
/// they share it: the interval holds no midpoint between doubles (then it
/// is x.h, x being normalised), or e = 0 (a midpoint itself included: x.h
/// is RN(x.h + x.l) with ties to even, as MPFR's MPFR_RNDN rounds it).
ULPCHECK_HD inline ULPCHECK_ALWAYS_INLINE bool roundToNearest(DW x, double e, double& out) {
  if (!std::isfinite(x.h) || !std::isfinite(x.l) || !(e >= 0.0)) return false;
  if (e == 0.0) {  // v = x.h + x.l itself, whose nearest double (ties to even) is x.h, x being normalised
    out = x.h;
    return true;
  }
  if (x.h == 0.0) {
    if (x.l != 0.0 || e != 0.0) return false;
    out = x.h;
    return true;
  }
  double up, down;
  gaps(x.h, up, down);
  if (!(x.l + e < 0.5 * up && x.l - e > -0.5 * down)) return false;
  out = x.h;
  return true;
}

}  // namespace ulpcheck::dw
