// What every format's rounding shares, below the formats themselves
// (core/dtype.h's three, core/fp8.h's two): a format's parameters, exact
// powers of two, and rounding to a grid of p significand bits.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/hd.h"

namespace ulpcheck {

struct FloatFormat {
  int storage_bits;  // 32, 16 or 8
  int precision;     // significand bits, hidden bit included
  int emin;          // exponent of the smallest normal
  int emax;          // exponent of the largest finite binade
};

/// 2^k for k in the normal range of double, [-1022, 1023], from its bits:
/// the oracles call the helpers below per element (no ldexp there).
ULPCHECK_HD inline double pow2(int k) {
  const uint64_t bits = uint64_t(k + 1023) << 52;
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

/// Rounds a double to the nearest number of `precision` significand bits
/// (hidden bit included) on the grid of a format whose smallest normal is
/// 2^emin, ties to even, with no largest exponent: the caller says what a
/// result past its largest finite value becomes (roundToFormat: Inf, as
/// IEEE 754 overflow; fp8's rounding: its spec's rule, core/fp8.h). Values
/// below half the smallest subnormal become a signed zero; NaN, Inf and
/// zeros come back as they are.
///
/// On the bits (the hot path of input generation: no frexp/ldexp). In the
/// normal range the value keeps p - 1 of the double's 52 fraction bits:
/// adding half a unit of the kept last place, less one where that place is
/// even, and truncating rounds to nearest with ties to even, a carry out of
/// the fraction stepping the exponent up exactly as the rounded value does.
/// Below the normal range the quantum is fixed at 2^(emin-p+1): scaling by
/// powers of two is exact there, and rint rounds ties to even.
ULPCHECK_HD inline double roundToGrid(double x, int precision, int emin) {
  if (!(x == x) || x == 0.0 || std::isinf(x)) return x;
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const uint64_t sign = bits & (uint64_t{1} << 63);
  uint64_t mag = bits ^ sign;
  const int exponent = int(mag >> 52) - 1023;  // floor(log2 |x|) for a normal double
  double rounded;
  if (exponent >= emin) {
    const int drop = 52 - (precision - 1);
    const uint64_t half = uint64_t{1} << (drop - 1);
    mag = (mag + half - 1 + ((mag >> drop) & 1)) & ~((uint64_t{1} << drop) - 1);
    std::memcpy(&rounded, &mag, sizeof rounded);
  } else {
    // Double subnormals (exponent field 0) lie far below half the smallest
    // subnormal of every format here and round to zero.
    const int quantum = emin - (precision - 1);
    double a;
    std::memcpy(&a, &mag, sizeof a);
    rounded = mag >> 52 == 0 ? 0.0 : std::rint(a * pow2(-quantum)) * pow2(quantum);
  }
  uint64_t out;
  std::memcpy(&out, &rounded, sizeof out);
  out |= sign;
  std::memcpy(&rounded, &out, sizeof rounded);
  return rounded;
}

}  // namespace ulpcheck
