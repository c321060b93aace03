// The storage formats at the bit level: decoding, correctly rounded
// encoding (round to nearest, ties to even, with subnormals, signed zeros,
// overflow to Inf), the ulp of a value and ULP distances. fp32, fp16 and
// bf16 are the activation dtypes a case names (kAllDTypes); the two FP8
// formats (core/fp8.h) are output dtypes of quantizing norms only, stored a
// byte an element, whose overflow goes to the format's non-finite value (NaN
// in E4M3FN, which has no Inf) as torch's casts do; a spec that saturates
// says so where its values are judged (oracles/fp8_quant.h).
//
// Everything here is exact double arithmetic (power-of-two scaling and rint),
// so it gives identical bits on the host and on the GPU. Conversions start
// from double: every fp32/fp16/bf16 value is a double, and the oracle rounds
// its high-precision results to double with round-to-odd first, which makes
// the second rounding here correct (53 >= p + 2 for every format).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "core/float_grid.h"
#include "core/fp8.h"
#include "core/hd.h"

namespace ulpcheck {

enum class DType : uint8_t { F32 = 0, F16 = 1, BF16 = 2, E4M3 = 3, E5M2 = 4 };

ULPCHECK_HD constexpr bool isFp8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }
/// The FP8 format of an FP8 dtype.
ULPCHECK_HD constexpr Fp8Format fp8Of(DType t) { return t == DType::E4M3 ? Fp8Format::E4M3FN : Fp8Format::E5M2; }

ULPCHECK_HD constexpr FloatFormat formatOf(DType t) {
  return t == DType::F32    ? FloatFormat{32, 24, -126, 127}
         : t == DType::F16  ? FloatFormat{16, 11, -14, 15}
         : t == DType::BF16 ? FloatFormat{16, 8, -126, 127}
                            : fp8FormatOf(fp8Of(t));
}

/// The FP8 dtypes' conversions, out of line (ULPCHECK_NOINLINE): their
/// callers below are per-element hot paths of the other formats.
ULPCHECK_HD ULPCHECK_NOINLINE inline uint32_t encodeFp8DType(DType t, double v) { return encodeFp8(fp8Of(t), v); }
ULPCHECK_HD ULPCHECK_NOINLINE inline double decodeFp8DType(DType t, uint32_t bits) {
  return decodeFp8(fp8Of(t), static_cast<uint8_t>(bits));
}

ULPCHECK_HD constexpr int storageBytes(DType t) { return formatOf(t).storage_bits / 8; }

/// Unit roundoff 2^-p of a format: the relative error bound of one rounding.
ULPCHECK_HD inline double unitRoundoff(DType t) { return pow2(-formatOf(t).precision); }

/// Largest finite value of the format, (2 - 2^(1-p)) 2^emax (exact); FP8's
/// 1.75 x 2^emax (E4M3FN's top code is NaN).
ULPCHECK_HD inline double maxFinite(DType t) {
  if (isFp8(t)) return fp8MaxFinite(fp8Of(t));
  const FloatFormat f = formatOf(t);
  return (2.0 - pow2(1 - f.precision)) * pow2(f.emax);
}

/// Smallest positive normal, 2^emin.
ULPCHECK_HD inline double minNormal(DType t) { return pow2(formatOf(t).emin); }

/// Smallest positive subnormal, 2^(emin - p + 1).
ULPCHECK_HD inline double minSubnormal(DType t) {
  const FloatFormat f = formatOf(t);
  return pow2(f.emin - f.precision + 1);
}

/// roundToFormat's rare path: `rounded`, a grid value at or past the
/// format's top grid value `top`, is that largest finite value, or overflows
/// (FP8: core/fp8.h's non-finite rule, whose E4M3FN top grid value 480 is NaN).
ULPCHECK_HD ULPCHECK_NOINLINE inline double roundedPastTop(DType t, double rounded, double top) {
  if (isFp8(t)) return roundToFp8(fp8Of(t), rounded, Fp8Overflow::NonFinite);
  if (std::fabs(rounded) == top) return rounded;
  // (No std::copysign: device code may not call it.)
  return std::signbit(rounded) ? -double(INFINITY) : double(INFINITY);
}

/// Rounds a double to the nearest value of the format, ties to even. Values at
/// or beyond max + ulp/2 become Inf, as IEEE 754 overflow does (FP8: the
/// format's non-finite value, NaN in E4M3FN); values below half the smallest
/// subnormal become a signed zero.
ULPCHECK_HD inline double roundToFormat(DType t, double x) {
  const FloatFormat f = formatOf(t);
  const double rounded = roundToGrid(x, f.precision, f.emin);
  // The format's top grid value, (2 - 2^(1-p)) 2^emax: its largest finite
  // value (E4M3FN's is one code below). One comparison on the common path.
  const double top = (2.0 - pow2(1 - f.precision)) * pow2(f.emax);
  if (!(std::fabs(rounded) >= top)) return rounded;
  return roundedPastTop(t, rounded, top);
}

/// Encodes a value that is exactly representable in the format (as produced
/// by roundToFormat) into its storage bits. NaN becomes the format's default
/// quiet NaN with the sign of the input. fp32 and bf16 are read off the
/// float's bits (bf16 is its upper half); fp16 rebiases them.
ULPCHECK_HD inline uint32_t encodeBits(DType t, double v) {
  if (ULPCHECK_UNLIKELY(isFp8(t))) return encodeFp8DType(t, v);
  const FloatFormat f = formatOf(t);
  const int mant_bits = f.precision - 1;
  const int exp_bits = f.storage_bits - 1 - mant_bits;
  const uint32_t exp_all_ones = (1u << exp_bits) - 1u;
  const uint32_t sign = std::signbit(v) ? (1u << (f.storage_bits - 1)) : 0u;
  if (!(v == v)) return sign | (exp_all_ones << mant_bits) | (1u << (mant_bits - 1));
  const float vf = static_cast<float>(v);  // exact: every format here is a subset of fp32
  uint32_t b32;
  std::memcpy(&b32, &vf, sizeof b32);
  if (t == DType::F32) return b32;
  if (t == DType::BF16) return b32 >> 16;
  const uint32_t mag = b32 & 0x7fffffffu;
  if (mag >= 0x7f800000u) return sign | (exp_all_ones << mant_bits);  // Inf
  const int exponent = int(mag >> 23) - 127;
  if (exponent >= f.emin) return sign | (uint32_t(exponent + 15) << mant_bits) | ((mag & 0x7fffffu) >> 13);
  // Zero or subnormal: the significand counts units of 2^-24 (exact).
  return sign | static_cast<uint32_t>(std::fabs(v) * pow2(24));
}

/// Decodes storage bits to the exact double they represent. Every format is
/// widened exactly to fp32 by bit manipulation first (the hot path of the
/// oracle and the checks), then to double.
ULPCHECK_HD inline double decodeBits(DType t, uint32_t bits) {
  uint32_t f32 = bits;
  if (t == DType::BF16) {
    f32 = bits << 16;  // bf16 is the upper half of fp32
  } else if (ULPCHECK_UNLIKELY(isFp8(t))) {
    return decodeFp8DType(t, bits);
  } else if (t == DType::F16) {
    const uint32_t sign = (bits & 0x8000u) << 16, exp = (bits >> 10) & 0x1fu, frac = bits & 0x3ffu;
    if (exp == 0x1f) {
      f32 = sign | 0x7f800000u | (frac << 13);
    } else if (exp != 0) {
      f32 = sign | ((exp + 112u) << 23) | (frac << 13);  // rebias 15 -> 127
    } else if (frac == 0) {
      f32 = sign;
    } else {  // subnormal: frac * 2^-24, normal in fp32
      int shift = 0;
      uint32_t m = frac;
      while (!(m & 0x400u)) {
        m <<= 1;
        ++shift;
      }
      f32 = sign | (uint32_t(113 - shift) << 23) | ((m & 0x3ffu) << 13);
    }
  }
  float v;
  std::memcpy(&v, &f32, sizeof v);
  return static_cast<double>(v);
}

/// Correctly rounded conversion of a double to storage bits.
ULPCHECK_HD inline uint32_t doubleToBits(DType t, double x) { return encodeBits(t, roundToFormat(t, x)); }

/// ulp of a value in the format: the spacing of the format's values in the
/// binade of |x| (the subnormal spacing below the normal range, the top
/// binade's spacing at and beyond overflow, and the subnormal spacing at 0).
ULPCHECK_HD inline double ulpOf(DType t, double x) {
  const FloatFormat f = formatOf(t);
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits &= ~(uint64_t{1} << 63);  // |x|
  const int biased = int(bits >> 52);
  // The binade from the double's exponent field (a hot path of the oracles:
  // no frexp/ldexp): 0 for zero and double subnormals, which are below
  // every format's emin, and 0x7ff for Inf and NaN.
  int exponent = biased == 0       ? f.emin
                 : biased == 0x7ff ? (bits == uint64_t{0x7ff} << 52 ? f.emax : f.emin)
                                   : biased - 1023;
  if (exponent < f.emin) exponent = f.emin;
  if (exponent > f.emax) exponent = f.emax;
  return pow2(exponent - (f.precision - 1));  // >= 2^-149 for every format here
}

/// Distance in ulps of the exact value's binade between a stored value and an
/// exact (high-precision) value. NaN when either side is NaN or Inf.
ULPCHECK_HD inline double ulpDistance(DType t, double got, double exact) {
  return std::fabs(got - exact) / ulpOf(t, exact);
}

/// True for the bit patterns of NaN in the format.
ULPCHECK_HD inline bool isNanBits(DType t, uint32_t bits) { return decodeBits(t, bits) != decodeBits(t, bits); }

const char* dtypeName(DType t);
std::optional<DType> parseDType(std::string_view name);
/// The activation dtypes a case may name (parseDType's); the FP8 ones are outputs only.
inline constexpr DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16};

/// printf("%a") of a double: the exact value a person can paste back.
std::string hexFloat(double v);

}  // namespace ulpcheck
