// mp::streamedSum gives mpfr_sum's correctly rounded sum of the same terms,
// bit for bit and zero's sign included, with no array of them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "oracles/mpfr_util.h"

namespace ulpcheck::mp {
namespace {

/// mpfr_sum of the terms held in an array, and streamedSum of them, into
/// `prec`-bit results; true where both are the same value and sign.
bool sameAsMpfrSum(const std::vector<std::unique_ptr<Real>>& terms, mpfr_prec_t term_prec, mpfr_prec_t prec) {
  std::vector<mpfr_ptr> ptrs;
  for (const auto& t : terms) ptrs.push_back(*t);
  Real held(prec), streamed(prec);
  mpfr_sum(held, ptrs.data(), ptrs.size(), MPFR_RNDN);
  streamedSum(streamed, int64_t(terms.size()), term_prec,
              [&](int64_t j, mpfr_ptr t) { mpfr_set(t, *terms[size_t(j)], MPFR_RNDN); });
  if (mpfr_nan_p(held)) return mpfr_nan_p(streamed);
  return mpfr_equal_p(held, streamed) && mpfr_signbit(held) == mpfr_signbit(streamed);
}

std::vector<std::unique_ptr<Real>> termsOf(const std::vector<double>& values, mpfr_prec_t prec) {
  std::vector<std::unique_ptr<Real>> out;
  for (double v : values) {
    out.push_back(std::make_unique<Real>(prec));
    mpfr_set_d(*out.back(), v, MPFR_RNDN);
  }
  return out;
}

TEST(StreamedSum, IsMpfrSumsCorrectlyRoundedSumOfTheSameTerms) {
  // Edge cases: no terms, zeros of both signs, cancellation to zero and to
  // a bit far below the terms, a range of 2^2000, infinities and NaN.
  const std::vector<std::vector<double>> edges = {
      {},
      {-0.0},
      {-0.0, -0.0},
      {-0.0, 0.0},
      {1.0, -1.0},
      {-1.0, 1.0, -0.0},
      {0x1p1000, 0x1p-1000, -0x1p1000},
      {0x1p-1074, 0x1p1023, -0x1p1023, 0x1p-1074},
      {1.0, 0x1p-60, 0x1p-120, -1.0},
      {INFINITY, 1.0},
      {INFINITY, -INFINITY},
      {NAN, 1.0},
      {3.0, 0x1.fffffffffffffp-1, 0x1p-53, 0x1p-106},
  };
  for (const auto& values : edges)
    for (mpfr_prec_t prec : {mpfr_prec_t(24), mpfr_prec_t(53), mpfr_prec_t(160)})
      EXPECT_TRUE(sameAsMpfrSum(termsOf(values, 53), 53, prec)) << values.size() << " terms, prec " << prec;

  // Random 160-bit terms as a row's squared deviations: a wide exponent
  // range, ties for rounding (terms summing to a midpoint), signs mixed.
  std::mt19937_64 rng(0x5eed);
  std::normal_distribution<double> normal;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + int(rng() % 200);
    std::vector<std::unique_ptr<Real>> terms;
    for (int j = 0; j < n; ++j) {
      terms.push_back(std::make_unique<Real>(160));
      mpfr_set_d(*terms.back(), normal(rng), MPFR_RNDN);
      mpfr_mul_2si(*terms.back(), *terms.back(), long(rng() % 400) - 200, MPFR_RNDN);
      Real third(160);
      mpfr_set_ui(third, 1, MPFR_RNDN);
      mpfr_div_ui(third, third, 3, MPFR_RNDN);  // 160 significant bits
      if (trial % 2) mpfr_mul(*terms.back(), *terms.back(), third, MPFR_RNDN);
      if (trial % 5 == 0) mpfr_sqr(*terms.back(), *terms.back(), MPFR_RNDN);
    }
    if (trial % 7 == 0) {  // a sum exactly on a midpoint of 24-bit values
      mpfr_set_d(*terms[0], 1.0 + 0x1p-24, MPFR_RNDN);
      for (size_t j = 1; j < terms.size(); ++j) mpfr_set_zero(*terms[j], trial % 2 ? 1 : -1);
    }
    for (mpfr_prec_t prec : {mpfr_prec_t(24), mpfr_prec_t(160)})
      EXPECT_TRUE(sameAsMpfrSum(terms, 160, prec)) << "trial " << trial << ", prec " << prec;
  }
}

}  // namespace
}  // namespace ulpcheck::mp
