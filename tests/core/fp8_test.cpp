// The FP8 formats (core/fp8.h) against their definitions, code by code, and
// rounding against a search over every code: the nearest value, ties to the
// even code, and past the largest finite value the overflow rule.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/fp8.h"
#include "core/packed_bits.h"

namespace ulpcheck {
namespace {

constexpr Fp8Format kFormats[] = {Fp8Format::E4M3FN, Fp8Format::E5M2};

const char* name(Fp8Format f) { return f == Fp8Format::E4M3FN ? "e4m3fn" : "e5m2"; }

/// A code's value from the OCP FP8 definition, written apart from
/// decodeFp8: (-1)^s 2^(E - bias) (1 + M / 2^m), or 2^(1 - bias) M / 2^m at
/// E = 0; E4M3FN: bias 7, m 3, only S.1111.111 NaN; E5M2: bias 15, m 2,
/// E = 31 Inf (M = 0) or NaN.
double definedValue(Fp8Format f, int code) {
  const int m = f == Fp8Format::E4M3FN ? 3 : 2, bias = f == Fp8Format::E4M3FN ? 7 : 15;
  const int E = (code & 0x7f) >> m, M = code & ((1 << m) - 1);
  const double sign = code & 0x80 ? -1.0 : 1.0;
  if (f == Fp8Format::E4M3FN && (code & 0x7f) == 0x7f) return NAN;
  if (f == Fp8Format::E5M2 && E == 31) return M == 0 ? sign * INFINITY : NAN;
  if (E == 0) return sign * std::ldexp(M, 1 - bias - m);
  return sign * std::ldexp(1.0 + M / double(1 << m), E - bias);
}

/// x rounded by a search over the codes: the nearest finite value, ties to
/// the code whose last fraction bit is 0; the grid point above the largest
/// finite value (E4M3FN's NaN code 480, E5M2's 2^16) is a candidate too,
/// and choosing it is overflow.
double searched(Fp8Format f, double x, Fp8Overflow overflow) {
  if (std::isnan(x)) return NAN;
  const double max = f == Fp8Format::E4M3FN ? 448.0 : 57344.0;
  const double beyond = f == Fp8Format::E4M3FN ? 480.0 : 65536.0;
  const bool beyond_even = f == Fp8Format::E5M2;  // 2^16's fraction is 0; 480's is 111
  double best = NAN, best_distance = INFINITY;
  bool best_even = false, over = false;
  const auto consider = [&](double v, bool even, bool is_over) {
    const double d = std::fabs(std::fabs(x) - v);
    if (d < best_distance || (d == best_distance && even && !best_even))
      best = v, best_distance = d, best_even = even, over = is_over;
  };
  for (int code = 0; code < 0x80; ++code) {
    const double v = definedValue(f, code);
    if (std::isfinite(v)) consider(v, (code & 1) == 0, false);
  }
  consider(beyond, beyond_even, false);
  // At and past the grid point above max, the nearest value is that point or
  // one beyond it (|x| - v is not exact there: decide without it).
  if (best == beyond || std::fabs(x) >= beyond) over = true;
  const double sign = std::signbit(x) ? -1.0 : 1.0;
  if (!over) return sign * best;
  if (overflow == Fp8Overflow::Saturate) return sign * max;
  return f == Fp8Format::E4M3FN ? NAN : sign * INFINITY;
}

bool sameValue(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
}

TEST(Fp8, EveryCodeDecodesToItsDefinedValueAndEncodesBack) {
  for (const Fp8Format f : kFormats) {
    int nans = 0;
    for (int code = 0; code < 256; ++code) {
      const double v = decodeFp8(f, uint8_t(code)), defined = definedValue(f, code);
      EXPECT_TRUE(sameValue(v, defined)) << name(f) << " code " << code << ": " << v << " vs " << defined;
      if (std::isnan(v)) {
        ++nans;
        EXPECT_EQ(std::isnan(decodeFp8(f, encodeFp8(f, v))), true);
        EXPECT_EQ(encodeFp8(f, v) & 0x80, code & 0x80) << "NaN keeps its sign";
        continue;
      }
      EXPECT_EQ(encodeFp8(f, v), code) << name(f) << " " << v;
    }
    EXPECT_EQ(nans, f == Fp8Format::E4M3FN ? 2 : 6) << name(f);
  }
  EXPECT_EQ(encodeFp8(Fp8Format::E4M3FN, NAN), 0x7f);
  EXPECT_EQ(encodeFp8(Fp8Format::E4M3FN, -INFINITY), 0xff);  // no Inf: NaN with its sign
  EXPECT_EQ(encodeFp8(Fp8Format::E5M2, INFINITY), 0x7c);
  EXPECT_EQ(encodeFp8(Fp8Format::E5M2, -0.0), 0x80);
}

TEST(Fp8, TheFormatsLimitsAreTheOnesTheLibrariesUse) {
  EXPECT_EQ(fp8MaxFinite(Fp8Format::E4M3FN), 448.0);
  EXPECT_EQ(fp8MaxFinite(Fp8Format::E5M2), 57344.0);
  EXPECT_EQ(decodeFp8(Fp8Format::E4M3FN, 0x7e), 448.0);
  EXPECT_EQ(decodeFp8(Fp8Format::E4M3FN, 0x01), 0x1p-9);
  EXPECT_EQ(decodeFp8(Fp8Format::E4M3FN, 0x08), 0x1p-6);
  EXPECT_EQ(decodeFp8(Fp8Format::E5M2, 0x01), 0x1p-16);
  EXPECT_EQ(decodeFp8(Fp8Format::E5M2, 0x04), 0x1p-14);
  // torch's cast (c10's fp8e4m3fn_from_fp32_value): 464 is a tie to 448's
  // even code; above it the NaN code; CUDA's satfinite: 448.
  EXPECT_EQ(roundToFp8(Fp8Format::E4M3FN, 464.0, Fp8Overflow::NonFinite), 448.0);
  EXPECT_TRUE(std::isnan(roundToFp8(Fp8Format::E4M3FN, 464.25, Fp8Overflow::NonFinite)));
  EXPECT_TRUE(std::isnan(roundToFp8(Fp8Format::E4M3FN, -1e30, Fp8Overflow::NonFinite)));
  EXPECT_EQ(roundToFp8(Fp8Format::E4M3FN, -1e30, Fp8Overflow::Saturate), -448.0);
  EXPECT_EQ(roundToFp8(Fp8Format::E4M3FN, INFINITY, Fp8Overflow::Saturate), 448.0);
  EXPECT_TRUE(std::isnan(roundToFp8(Fp8Format::E4M3FN, NAN, Fp8Overflow::Saturate)));
  EXPECT_EQ(roundToFp8(Fp8Format::E5M2, 61440.0, Fp8Overflow::NonFinite), INFINITY);  // tie to 2^16's even code
  EXPECT_EQ(roundToFp8(Fp8Format::E5M2, 61439.0, Fp8Overflow::NonFinite), 57344.0);
  EXPECT_EQ(roundToFp8(Fp8Format::E5M2, -1e30, Fp8Overflow::Saturate), -57344.0);
}

TEST(Fp8, RoundingIsTheNearestCodeTiesToEvenUnderEitherOverflowRule) {
  for (const Fp8Format f : kFormats) {
    // Every code's value, the midpoints between neighbours (ties) and a
    // double step either side of each, and random values over the range
    // and past it, of both signs.
    std::vector<double> xs{0.0, -0.0, INFINITY, -INFINITY, 1e-300, 1e300};
    std::vector<double> finite;
    for (int code = 0; code < 0x80; ++code)
      if (std::isfinite(decodeFp8(f, uint8_t(code)))) finite.push_back(decodeFp8(f, uint8_t(code)));
    finite.push_back(f == Fp8Format::E4M3FN ? 480.0 : 65536.0);
    for (size_t k = 0; k < finite.size(); ++k) {
      xs.push_back(finite[k]);
      if (k + 1 < finite.size()) {
        const double mid = 0.5 * (finite[k] + finite[k + 1]);
        for (const double x : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, INFINITY)}) xs.push_back(x);
      }
    }
    std::mt19937_64 rng(0xf8);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (int k = 0; k < 20000; ++k) xs.push_back(std::ldexp(1.0 + unit(rng), int(unit(rng) * 40) - 24));
    for (const double x : std::vector<double>(xs)) xs.push_back(-x);
    for (const Fp8Overflow overflow : {Fp8Overflow::Saturate, Fp8Overflow::NonFinite})
      for (const double x : xs) {
        const double got = roundToFp8(f, x, overflow), want = searched(f, x, overflow);
        ASSERT_TRUE(sameValue(got, want)) << name(f) << (overflow == Fp8Overflow::Saturate ? " saturate " : " ")
                                          << std::hexfloat << x << ": " << got << " vs " << want;
      }
  }
}

TEST(Fp8, AnUlpIsTheSpacingOfTheCodesInTheValuesBinade) {
  for (const Fp8Format f : kFormats) {
    for (int code = 0; code + 1 < 0x80; ++code) {
      const double v = decodeFp8(f, uint8_t(code)), next = decodeFp8(f, uint8_t(code + 1));
      if (!std::isfinite(next)) break;
      // The spacing above v is v's ulp, but at a binade's first value
      // the one below it is also from the binade below: compare above.
      EXPECT_EQ(fp8Ulp(f, v), next - v) << name(f) << " " << v;
      EXPECT_EQ(fp8Ulp(f, -v), next - v);
    }
    EXPECT_EQ(fp8Ulp(f, fp8MaxFinite(f) * 4), fp8Ulp(f, fp8MaxFinite(f)));  // the top binade's beyond max
    EXPECT_EQ(fp8Ulp(f, INFINITY), fp8Ulp(f, fp8MaxFinite(f)));
    EXPECT_EQ(fp8Ulp(f, 0.0), decodeFp8(f, 1));  // the subnormal spacing at 0
  }
}

TEST(Fp8, AsOutputDTypesTheyAreTheFormatsWithTheNonFiniteOverflow) {
  // DType::E4M3 and E5M2 (core/dtype.h): every code decodes and encodes as
  // core/fp8.h's, rounding is its non-finite rule, the limits and ulps its,
  // a byte an element; not an activation dtype a case may name.
  std::mt19937_64 rng(0xd7);
  std::normal_distribution<double> normal;
  for (const DType t : {DType::E4M3, DType::E5M2}) {
    const Fp8Format f = fp8Of(t);
    EXPECT_EQ(storageBytes(t), 1);
    EXPECT_EQ(maxFinite(t), fp8MaxFinite(f));
    EXPECT_EQ(minSubnormal(t), decodeFp8(f, 1));
    EXPECT_EQ(minNormal(t), std::ldexp(1.0, fp8FormatOf(f).emin));
    for (int code = 0; code < 0x100; ++code) {
      const double v = decodeFp8(f, uint8_t(code));
      EXPECT_TRUE(decodeBits(t, uint32_t(code)) == v || (std::isnan(v) && std::isnan(decodeBits(t, uint32_t(code)))));
      if (std::isfinite(v)) {
        EXPECT_EQ(encodeBits(t, v), encodeFp8(f, v));
        EXPECT_EQ(ulpOf(t, v), fp8Ulp(f, v)) << dtypeName(t) << " " << v;
      }
    }
    for (int k = 0; k < 20000; ++k) {
      const double x = normal(rng) * std::ldexp(1.0, int(normal(rng) * 8));
      const double want = roundToFp8(f, x, Fp8Overflow::NonFinite), got = roundToFormat(t, x);
      EXPECT_TRUE(got == want || (std::isnan(got) && std::isnan(want))) << x;
      EXPECT_EQ(doubleToBits(t, x), uint32_t(encodeFp8(f, want)));
    }
    EXPECT_FALSE(parseDType(dtypeName(t)).has_value());
    PackedBits bytes(storageBytes(t), 3, poisonBits(t));
    bytes[1] = doubleToBits(t, -1.5);
    EXPECT_EQ(bytes.bytes().size(), 3u);
    EXPECT_TRUE(std::isnan(decodeBits(t, bytes[0])));  // the poison is a NaN code
    EXPECT_EQ(decodeBits(t, bytes[1]), -1.5);
  }
  EXPECT_STREQ(dtypeName(DType::E4M3), "e4m3");
  EXPECT_STREQ(dtypeName(DType::E5M2), "e5m2");
}

}  // namespace
}  // namespace ulpcheck
