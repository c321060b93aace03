// The FP8 formats of quantized outputs (OCP 8-bit floating point, as torch's
// float8_e4m3fn and float8_e5m2 and CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2
// store them) at the bit level: decoding, correctly rounded conversion from
// double under the overflow rule a library's cast applies, encoding, and the
// ulp of a value. The groundwork of quantized norm outputs (the FP8 issue):
// their oracle rounds its exact scaled value with these.
//
//   E4M3FN: 1 sign, 4 exponent (bias 7), 3 fraction bits; no infinities;
//           S.1111.111 is NaN (0x7f, 0xff), so the largest finite value is
//           1.75 x 2^8 = 448; subnormals down to 2^-9.
//   E5M2:   IEEE 754 binary16's upper byte: 1, 5 (bias 15), 2; Inf and NaN
//           at exponent 31; largest finite 1.75 x 2^15 = 57344; subnormals
//           down to 2^-16.
//
// Exact double arithmetic, as core/dtype.h: the same bits on the host and
// on the GPU.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/float_grid.h"
#include "core/hd.h"

namespace ulpcheck {

enum class Fp8Format : uint8_t { E4M3FN = 0, E5M2 = 1 };

/// floor(log2 a) of a positive normal double, from its exponent field.
ULPCHECK_HD inline int binadeOf(double a) {
  uint64_t bits;
  std::memcpy(&bits, &a, sizeof bits);
  return int((bits >> 52) & 0x7ff) - 1023;
}

/// What a value whose rounding lies past the largest finite one becomes
/// (round to nearest, ties to even, comes first in both):
///   Saturate:  +-max, as CUDA's cvt.rn.satfinite and FlashInfer's quantizing
///              norms give (an infinite input too; NaN stays NaN);
///   NonFinite: the format's overflow value, as torch's casts and CUDA's
///              __NV_NOSAT give: NaN in E4M3FN (it has no Inf), +-Inf in E5M2.
enum class Fp8Overflow : uint8_t { Saturate = 0, NonFinite = 1 };

ULPCHECK_HD constexpr FloatFormat fp8FormatOf(Fp8Format f) {
  // storage_bits, precision (hidden bit included), emin, emax.
  return f == Fp8Format::E4M3FN ? FloatFormat{8, 4, -6, 8} : FloatFormat{8, 3, -14, 15};
}

/// The largest finite value, 1.75 x 2^emax in both: 448 (E4M3FN, whose top
/// binade's last code, 1.875 x 2^8, is NaN), 57344 (E5M2, 2 - 2^-2 as IEEE's).
ULPCHECK_HD inline double fp8MaxFinite(Fp8Format f) { return 1.75 * pow2(fp8FormatOf(f).emax); }

/// The nearest value of the format to x, ties to even, with `overflow`'s
/// rule past the largest finite value. A value rounds past it when its
/// nearest grid point (the grid going on above max, ties to even) is above
/// max: E4M3FN from 464 up (464, the midpoint of 448 and the NaN code's
/// 480, goes to 448's even code), E5M2 from 61440 (its midpoint goes to
/// 2^16's even code).
ULPCHECK_HD inline double roundToFp8(Fp8Format f, double x, Fp8Overflow overflow) {
  const FloatFormat g = fp8FormatOf(f);
  const double rounded = roundToGrid(x, g.precision, g.emin);
  if (!(std::fabs(rounded) > fp8MaxFinite(f))) return rounded;  // NaN included
  // (No std::copysign: device code may not call it. Negation sets a NaN's
  // sign; a product by -1 need not.)
  const double magnitude = overflow == Fp8Overflow::Saturate ? fp8MaxFinite(f)
                           : f == Fp8Format::E4M3FN          ? double(NAN)
                                                             : double(INFINITY);
  return std::signbit(rounded) ? -magnitude : magnitude;
}

/// The bits of a value of the format (as roundToFp8 gives it): NaN becomes
/// S.1111.111 (E4M3FN) or S.11111.10 (E5M2, quiet) with NaN's sign; +-Inf
/// E5M2's S.11111.00 (E4M3FN has none: NaN).
ULPCHECK_HD inline uint8_t encodeFp8(Fp8Format f, double v) {
  const FloatFormat g = fp8FormatOf(f);
  const int mant_bits = g.precision - 1, bias = 1 - g.emin;
  const uint32_t sign = std::signbit(v) ? 0x80u : 0u;
  const uint32_t exp_all_ones = (1u << (7 - mant_bits)) - 1u;
  if (!(v == v) || (std::isinf(v) && f == Fp8Format::E4M3FN))
    return uint8_t(sign | (exp_all_ones << mant_bits) | (f == Fp8Format::E4M3FN ? 0x7u : 0x2u));
  if (std::isinf(v)) return uint8_t(sign | (exp_all_ones << mant_bits));
  const double a = std::fabs(v);
  if (a < pow2(g.emin))  // zero or subnormal: units of the smallest subnormal (exact)
    return uint8_t(sign | uint32_t(a * pow2(mant_bits - g.emin)));
  const int e = binadeOf(a);
  const uint32_t fraction = uint32_t(a * pow2(mant_bits - e)) - (1u << mant_bits);
  return uint8_t(sign | (uint32_t(e + bias) << mant_bits) | fraction);
}

/// The exact value of the format's bits.
ULPCHECK_HD inline double decodeFp8(Fp8Format f, uint8_t bits) {
  const FloatFormat g = fp8FormatOf(f);
  const int mant_bits = g.precision - 1, bias = 1 - g.emin;
  const uint32_t exp_all_ones = (1u << (7 - mant_bits)) - 1u;
  const uint32_t exponent = (bits >> mant_bits) & exp_all_ones, fraction = bits & ((1u << mant_bits) - 1u);
  const double sign = bits & 0x80u ? -1.0 : 1.0;
  if (f == Fp8Format::E4M3FN ? (bits & 0x7fu) == 0x7fu : exponent == exp_all_ones && fraction != 0)
    return bits & 0x80u ? -double(NAN) : double(NAN);  // negation: the sign bit, as a product need not set
  if (exponent == exp_all_ones && f == Fp8Format::E5M2) return sign * INFINITY;
  if (exponent == 0) return sign * double(fraction) * pow2(g.emin - mant_bits);
  return sign * double((1u << mant_bits) | fraction) * pow2(int(exponent) - bias - mant_bits);
}

/// ulp of a value in the format: the spacing of its values in the binade of
/// |x| (the subnormal spacing below the normal range and at 0, the top
/// binade's at and beyond the largest finite value).
ULPCHECK_HD inline double fp8Ulp(Fp8Format f, double x) {
  const FloatFormat g = fp8FormatOf(f);
  const double a = std::fabs(x);
  int e = g.emin;  // zero, subnormal, NaN
  if (std::isinf(a)) e = g.emax;
  else if (a >= pow2(g.emin)) e = binadeOf(a) < g.emax ? binadeOf(a) : g.emax;
  return pow2(e - (g.precision - 1));
}

}  // namespace ulpcheck
