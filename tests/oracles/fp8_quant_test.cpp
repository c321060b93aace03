// The quantizing norm's admissible values (oracles/fp8_quant.h) against
// brute force: every fp32 y and every fp32 scale (or reciprocal) of a box,
// pushed through the chain, lands in the range computed from the box's
// corners, and the range's ends are reached; per-token scales likewise, for
// every spec the libraries differ on (format, overflow rule, y rounded to T
// or not, reciprocal exact or approximate, or a division).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "oracles/fp8_quant.h"

namespace ulpcheck::fp8_quant {
namespace {

double next32(double v, int steps) {
  float f = float(v);
  for (int k = 0; k < std::abs(steps); ++k) f = std::nextafter(f, steps > 0 ? INFINITY : -INFINITY);
  return f;
}

/// Every spec the libraries' quantizing norms differ on.
std::vector<QuantSpec> everySpec() {
  std::vector<QuantSpec> out;
  for (Fp8Format f : {Fp8Format::E4M3FN, Fp8Format::E5M2})
    for (Fp8Overflow o : {Fp8Overflow::Saturate, Fp8Overflow::NonFinite})
      for (std::optional<DType> t :
           {std::optional<DType>{}, std::optional<DType>{DType::BF16}, std::optional<DType>{DType::F16}})
        for (int apply = 0; apply < 3; ++apply) {
          QuantSpec s;
          s.format = f, s.overflow = o, s.y_rounded_to = t;
          s.apply = apply == 2 ? Apply::Divide : Apply::Reciprocal;
          s.reciprocal_error = apply == 1 ? 0x1p-23 : 0.0;
          out.push_back(s);
        }
  return out;
}

/// The fp32 values from lo to hi: all of them, or past 64 the ends and 40
/// drawn between.
std::vector<double> fp32Values(double lo, double hi, std::mt19937_64& rng) {
  std::vector<double> v;
  for (float f = float(lo); double(f) <= hi && v.size() <= 64; f = std::nextafter(f, INFINITY)) v.push_back(f);
  if (v.size() <= 64) return v;
  v = {lo, hi};
  std::uniform_real_distribution<double> unit(0, 1);
  for (int k = 0; k < 40; ++k) v.push_back(std::clamp(double(float(lo + unit(rng) * (hi - lo))), lo, hi));
  return v;
}

/// An fp32 interval about `mid`: a point, a few ulps, or 2^-6 or 2^-3 of it each way.
Interval around(double mid, std::mt19937_64& rng) {
  switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
    case 0: return {mid, mid};
    case 1: {
      std::uniform_int_distribution<int> ulps(0, 20);
      return {next32(mid, -ulps(rng)), next32(mid, ulps(rng))};
    }
    case 2: return {double(float(mid - std::fabs(mid) * 0x1p-6)), double(float(mid + std::fabs(mid) * 0x1p-6))};
    default: return {double(float(mid - std::fabs(mid) * 0x1p-3)), double(float(mid + std::fabs(mid) * 0x1p-3))};
  }
}

TEST(Fp8Quant, EveryValueOfABoxIsAdmittedAndTheRangesEndsAreReached) {
  std::mt19937_64 rng(0xf8);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> exponent(-16, 10), y_exponent(-24, 26);
  int64_t boxes = 0, values = 0, overflowing = 0;
  for (const QuantSpec& spec : everySpec())
    for (int box = 0; box < 200; ++box) {
      // y around a random value (some past the format's range once scaled),
      // a scale around a random power of two times a random factor.
      const double y_mid = double(float(normal(rng) * std::ldexp(1.0, y_exponent(rng) / 2)));
      const double s_mid = double(float(std::ldexp(0.75 + 0.5 * std::fabs(normal(rng)), exponent(rng) / 3)));
      const Interval y = around(y_mid, rng), s = around(s_mid, rng);
      const Fp8Range r = admissible(spec, y, s);
      const Interval by = spec.apply == Apply::Reciprocal ? reciprocalRange(spec, s) : s;
      // The kernel's value for each fp32 y and each fp32 value it may scale by.
      double seen_lo = INFINITY, seen_hi = -INFINITY;
      bool seen_below = false, seen_above = false;
      const std::vector<double> bys = fp32Values(by.lo, by.hi, rng);
      for (const double yv : fp32Values(y.lo, y.hi, rng))
        for (const double b : bys) {
          const double q = quantize(spec, yv, b);
          ASSERT_TRUE(r.admits(spec.format, q))
              << "y " << yv << " by " << b << " gives " << q << ", range " << r.lo << ".." << r.hi;
          ++values;
          if (std::isfinite(q)) {
            seen_lo = std::min(seen_lo, q), seen_hi = std::max(seen_hi, q);
          } else {
            const bool below = std::isnan(q) ? yv < 0 : q < 0;
            (below ? seen_below : seen_above) = true;
          }
        }
      // Exact, not only sound: the ends and the overflows are reached.
      if (r.finite && std::isfinite(seen_lo)) {
        EXPECT_EQ(seen_lo, r.lo);
        EXPECT_EQ(seen_hi, r.hi);
      }
      EXPECT_EQ(seen_below, r.overflow_below);
      EXPECT_EQ(seen_above, r.overflow_above);
      overflowing += r.overflow_below || r.overflow_above;
      ++boxes;
    }
  std::printf("%lld boxes, %lld values, %lld boxes overflowing\n", (long long)boxes, (long long)values,
              (long long)overflowing);
  EXPECT_GT(overflowing, 20);  // the overflow rules were reached
}

TEST(Fp8Quant, TheLibrariesRoundingPointsGiveTheirOwnValues) {
  QuantSpec flashinfer;  // rmsnorm_quant: fp32 y times 1/scale, satfinite
  const Interval one_scale{0.5, 0.5};
  EXPECT_EQ(quantize(flashinfer, 1.0, 2.0), 2.0);
  EXPECT_EQ(quantize(flashinfer, 300.0, 2.0), 448.0);  // saturated
  QuantSpec torch_cast = flashinfer;
  torch_cast.overflow = Fp8Overflow::NonFinite;
  EXPECT_TRUE(std::isnan(quantize(torch_cast, 300.0, 2.0)));
  // 232 x 2 = 464, the tie of 448 and the NaN code, goes to 448's even code;
  // just above it, NaN.
  EXPECT_EQ(quantize(torch_cast, 232.0, 2.0), 448.0);
  EXPECT_TRUE(std::isnan(quantize(torch_cast, next32(232.0, 1), 2.0)));
  const Fp8Range at_edge = admissible(torch_cast, {232.0, next32(232.0, 1)}, one_scale);
  EXPECT_TRUE(at_edge.finite && at_edge.overflow_above && at_edge.hi == 448.0);
  const Fp8Range past = admissible(torch_cast, {300.0, 301.0}, one_scale);
  EXPECT_FALSE(past.finite);
  EXPECT_FALSE(past.admits(Fp8Format::E4M3FN, 448.0));
  EXPECT_TRUE(past.admits(Fp8Format::E4M3FN, NAN));
  // The allreduce fusion rounds y to T first: 1 + 2^-9 is 1 in bf16, and
  // 1 + 2^-4 lies halfway between e4m3's 1 and 1.125, so the two specs differ.
  QuantSpec rounded = flashinfer;
  rounded.y_rounded_to = DType::BF16;
  const double y = 1.0 + 0x1p-4 + 0x1p-9;
  EXPECT_EQ(quantize(flashinfer, y, 1.0), 1.125);
  EXPECT_EQ(quantize(rounded, y, 1.0), 1.0);
}

TEST(Fp8Quant, AnApproximateReciprocalWidensTheMultiplierByItsError) {
  QuantSpec exact, approx;
  approx.reciprocal_error = 0x1p-23;
  const Interval s{3.0, 3.0};
  const Interval m = reciprocalRange(exact, s), wide = reciprocalRange(approx, s);
  EXPECT_EQ(m.lo, double(1.0f / 3.0f));
  EXPECT_EQ(m.hi, m.lo);
  EXPECT_LE(wide.lo, (1.0 / 3.0) * (1 - 0x1p-23));
  EXPECT_GE(wide.hi, (1.0 / 3.0) * (1 + 0x1p-23));
  EXPECT_LE(wide.hi - wide.lo, 6 * std::ldexp(1.0, -25));  // a few fp32 ulps, no more
}

TEST(Fp8Quant, APerTokenScaleLiesInTheRangeOfItsRowsIntervals) {
  std::mt19937_64 rng(0x5ca1e);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> width(0, 30);
  const PerTokenScale rules[] = {
      {448, double(float(1.0 / (512 * 448))), 0, false, false},  // FlashInfer's dynamic quant
      {448, 0, 1e-4, true, false},                               // its block quant
      {448, 0, 0, false, true},                                  // by fl(1/448)
  };
  int64_t rows = 0;
  for (const QuantSpec& spec : everySpec())
    for (const PerTokenScale& rule : rules)
      for (int row = 0; row < 20; ++row) {
        std::vector<Interval> intervals;
        const double size = std::ldexp(1.0, int(normal(rng) * 8));
        for (int j = 0; j < 6; ++j) {
          const double mid = double(float(normal(rng) * size));
          intervals.push_back({next32(mid, -width(rng)), next32(mid, width(rng))});
        }
        const Interval s = perTokenScale(spec, rule, intervals);
        // The kernel's scale for random fp32 values of each element, and for
        // every element at its smallest and at its largest magnitude.
        std::uniform_real_distribution<double> unit(0, 1);
        const auto kernelScale = [&](const std::vector<double>& ys) {
          double amax = 0;
          for (double v : ys)
            amax = std::max(amax, std::fabs(spec.y_rounded_to ? roundToFormat(*spec.y_rounded_to, v) : v));
          if (rule.clamp_amax_first) amax = std::max(amax, rule.min_amax);
          const double q = roundToFormat(
              DType::F32, rule.by_reciprocal ? amax * roundToFormat(DType::F32, 1.0 / rule.fmax) : amax / rule.fmax);
          return rule.clamp_amax_first ? q : std::max(q, rule.min_scale);
        };
        for (int trial = 0; trial < 50; ++trial) {
          std::vector<double> ys;
          for (const Interval& e : intervals) ys.push_back(double(float(e.lo + unit(rng) * (e.hi - e.lo))));
          const double got = kernelScale(ys);
          EXPECT_GE(got, s.lo);
          EXPECT_LE(got, s.hi);
        }
        std::vector<double> small, large;
        for (const Interval& e : intervals) {
          const bool straddles = e.lo <= 0 && e.hi >= 0;
          small.push_back(straddles ? 0.0 : std::fabs(e.lo) < std::fabs(e.hi) ? e.lo : e.hi);
          large.push_back(std::fabs(e.lo) > std::fabs(e.hi) ? e.lo : e.hi);
        }
        EXPECT_EQ(kernelScale(small), s.lo);
        EXPECT_EQ(kernelScale(large), s.hi);
        ++rows;
      }
  EXPECT_EQ(rows, 36 * 3 * 20);
}

}  // namespace
}  // namespace ulpcheck::fp8_quant
