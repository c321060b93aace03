// The float formats at the bit level, checked exhaustively (16-bit formats)
// or against MPFR rounding (fp32 and conversions from double).
#include <gtest/gtest.h>
#include <mpfr.h>

#include <random>

#include "core/dtype.h"

namespace ulpcheck {
namespace {

/// Independent reference: MPFR rounding to p bits with the format's exponent
/// range and subnormals.
double mpfrRound(DType t, double x) {
  const FloatFormat f = formatOf(t);
  const mpfr_exp_t old_emin = mpfr_get_emin(), old_emax = mpfr_get_emax();
  // MPFR exponents are one more than IEEE's (significand in [1/2, 1)).
  mpfr_set_emin(f.emin - f.precision + 2);
  mpfr_set_emax(f.emax + 1);
  mpfr_t v;
  mpfr_init2(v, f.precision);
  const int inexact = mpfr_set_d(v, x, MPFR_RNDN);
  mpfr_subnormalize(v, inexact, MPFR_RNDN);
  const double r = mpfr_get_d(v, MPFR_RNDN);
  mpfr_clear(v);
  mpfr_set_emin(old_emin);
  mpfr_set_emax(old_emax);
  return r;
}

TEST(DType, SixteenBitFormatsRoundTripEveryPattern) {
  for (DType t : {DType::F16, DType::BF16}) {
    for (uint32_t bits = 0; bits < 65536; ++bits) {
      const double v = decodeBits(t, bits);
      if (v != v) {
        EXPECT_TRUE(isNanBits(t, bits));
        continue;
      }
      ASSERT_EQ(encodeBits(t, v), bits) << dtypeName(t) << " pattern " << std::hex << bits;
      ASSERT_EQ(roundToFormat(t, v), v);
    }
  }
}

TEST(DType, RoundingMatchesMpfrOnRandomDoubles) {
  std::mt19937_64 rng(12345);
  for (DType t : kAllDTypes) {
    const FloatFormat f = formatOf(t);
    std::uniform_int_distribution<int> exponent(f.emin - f.precision - 3, f.emax + 2);
    std::uniform_real_distribution<double> mantissa(1.0, 2.0);
    for (int i = 0; i < 200000; ++i) {
      const double x = std::ldexp(mantissa(rng), exponent(rng)) * (i % 2 ? -1 : 1);
      ASSERT_EQ(roundToFormat(t, x), mpfrRound(t, x)) << dtypeName(t) << " x=" << hexFloat(x);
    }
    // Exact ties and their neighbours in every binade (fp32's too: the
    // exhaustive tie test below covers the 16-bit formats only), doubles far
    // outside the format's range, and double subnormals.
    std::uniform_int_distribution<uint64_t> significand(uint64_t{1} << (f.precision - 1),
                                                        (uint64_t{1} << f.precision) - 1);
    for (int i = 0; i < 200000; ++i) {
      const double tie = std::ldexp(double(2 * significand(rng) + 1), exponent(rng) - f.precision);
      for (const double x : {tie, std::nextafter(tie, 0.0), std::nextafter(tie, INFINITY), -tie})
        ASSERT_EQ(roundToFormat(t, x), mpfrRound(t, x)) << dtypeName(t) << " x=" << hexFloat(x);
    }
    for (const double x : {1e300, -1e300, 0x1.fffffffffffffp+1023, 1e-300, -1e-300, 0x1p-1074, -0x1p-1074, 0x1p-1022})
      ASSERT_EQ(roundToFormat(t, x), mpfrRound(t, x)) << dtypeName(t) << " x=" << hexFloat(x);
  }
}

TEST(DType, TiesGoToEvenIncludingSubnormalsAndOverflow) {
  for (DType t : {DType::F16, DType::BF16}) {
    for (uint32_t bits = 0; bits < 0x7fffu; ++bits) {
      const double a = decodeBits(t, bits), b = decodeBits(t, bits + 1);
      if (!std::isfinite(b)) break;
      const double mid = a + (b - a) / 2;  // exact in double
      const double even = (bits % 2 == 0) ? a : b;
      ASSERT_EQ(roundToFormat(t, mid), even) << dtypeName(t) << " between " << hexFloat(a) << " and " << hexFloat(b);
      ASSERT_EQ(roundToFormat(t, std::nextafter(mid, 0.0)), a);
      ASSERT_EQ(roundToFormat(t, std::nextafter(mid, INFINITY)), b);
    }
    // max + ulp/2 rounds to Inf (ties to even: max has an odd significand); just below stays max.
    const double max = maxFinite(t), half = ulpOf(t, max) / 2;
    EXPECT_TRUE(std::isinf(roundToFormat(t, max + half)));
    EXPECT_EQ(roundToFormat(t, max + half - half / 1024), max);
    EXPECT_EQ(roundToFormat(t, -(max + half)), -INFINITY);
  }
}

TEST(DType, SignedZerosAndSpecials) {
  for (DType t : kAllDTypes) {
    EXPECT_EQ(encodeBits(t, -0.0), 1u << (formatOf(t).storage_bits - 1));
    EXPECT_EQ(encodeBits(t, 0.0), 0u);
    EXPECT_TRUE(std::signbit(roundToFormat(t, -minSubnormal(t) / 4)));  // underflows to -0
    EXPECT_EQ(roundToFormat(t, minSubnormal(t) / 2), 0.0);              // tie to even: 0
    EXPECT_EQ(roundToFormat(t, minSubnormal(t) * 0.75), minSubnormal(t));
    EXPECT_TRUE(std::isinf(decodeBits(t, encodeBits(t, INFINITY))));
    EXPECT_TRUE(isNanBits(t, encodeBits(t, NAN)));
  }
  EXPECT_EQ(doubleToBits(DType::F32, 1.0), 0x3f800000u);
  EXPECT_EQ(doubleToBits(DType::BF16, 1.0), 0x3f80u);
  EXPECT_EQ(doubleToBits(DType::F16, 1.0), 0x3c00u);
  EXPECT_EQ(doubleToBits(DType::F16, 65504.0), 0x7bffu);
  EXPECT_EQ(decodeBits(DType::F16, 0x0001u), std::ldexp(1.0, -24));
}

TEST(DType, UlpOfEachBinade) {
  EXPECT_EQ(ulpOf(DType::F32, 1.0), std::ldexp(1.0, -23));
  EXPECT_EQ(ulpOf(DType::F32, 1.9999), std::ldexp(1.0, -23));
  EXPECT_EQ(ulpOf(DType::F32, 2.0), std::ldexp(1.0, -22));
  EXPECT_EQ(ulpOf(DType::BF16, 1.0), std::ldexp(1.0, -7));
  EXPECT_EQ(ulpOf(DType::F16, 65504.0), 32.0);
  EXPECT_EQ(ulpOf(DType::F16, 1e9), 32.0);  // beyond overflow: the top binade's spacing
  EXPECT_EQ(ulpOf(DType::F16, 0.0), std::ldexp(1.0, -24));
  EXPECT_EQ(ulpOf(DType::F16, 1e-7), std::ldexp(1.0, -24));  // subnormal spacing
  EXPECT_EQ(ulpOf(DType::F32, 1e-40), std::ldexp(1.0, -149));
  EXPECT_EQ(ulpDistance(DType::F32, 1.0 + std::ldexp(1.0, -23), 1.0), 1.0);
  EXPECT_DOUBLE_EQ(ulpDistance(DType::BF16, 1.0, 1.0 + std::ldexp(1.0, -9)), 0.25);
}

}  // namespace
}  // namespace ulpcheck
