// The counter-based generator: pure function of (seed, tensor, row id, col),
// values exactly representable, each distribution in the regime it names.
#include <gtest/gtest.h>

#include "core/datagen.h"

namespace ulpcheck {
namespace {

TEST(DataGen, RowsKeepTheirValuesWhereverTheyArePlaced) {
  const DistParams d{Dist::Normal, 1.5, 0.0};
  const HostMatrix a = generateHost(d, DType::BF16, 99, TensorStream::X, {0, 1, 2, 3}, 13, 16, 0);
  const HostMatrix b = generateHost(d, DType::BF16, 99, TensorStream::X, {7, 2, 9}, 13, 13, 0);
  for (int64_t c = 0; c < 13; ++c) EXPECT_EQ(a.bits[2 * 16 + c], b.bits[1 * 13 + c]);
  const HostMatrix other_seed = generateHost(d, DType::BF16, 100, TensorStream::X, {2}, 13, 13, 0);
  const HostMatrix other_tensor = generateHost(d, DType::BF16, 99, TensorStream::GradOut, {2}, 13, 13, 0);
  int same_seed = 0, same_tensor = 0;
  for (int64_t c = 0; c < 13; ++c) {
    same_seed += other_seed.bits[c] == a.bits[2 * 16 + c];
    same_tensor += other_tensor.bits[c] == a.bits[2 * 16 + c];
  }
  EXPECT_LT(same_seed, 4);
  EXPECT_LT(same_tensor, 4);
  for (int64_t c = 13; c < 16; ++c) EXPECT_EQ(a.bits[c], 0u) << "padding keeps the pad bits";
}

HostMatrix sample(Dist kind, DType t, double sigma = 1.0, double mean = 0.0, int64_t rows = 64, int64_t cols = 64) {
  return generateHost(DistParams{kind, sigma, mean}, t, 5, TensorStream::X, identityRows(rows), cols, cols, 0);
}

TEST(DataGen, EveryValueIsRepresentableAndFinite) {
  for (DType t : kAllDTypes)
    for (int k = 0; k < static_cast<int>(Dist::kCount); ++k) {
      const HostMatrix m = sample(static_cast<Dist>(k), t);
      for (uint32_t bits : m.bits) {
        const double v = decodeBits(t, bits);
        ASSERT_TRUE(std::isfinite(v)) << distName(static_cast<Dist>(k));
        ASSERT_EQ(doubleToBits(t, v), bits);
      }
    }
}

TEST(DataGen, NormalHasItsScale) {
  const HostMatrix m = sample(Dist::Normal, DType::F32, 2.0, 0.0, 128, 128);
  double sum = 0, sum_sq = 0;
  for (uint32_t b : m.bits) {
    sum += decodeBits(DType::F32, b);
    sum_sq += decodeBits(DType::F32, b) * decodeBits(DType::F32, b);
  }
  const double n = double(m.bits.size()), mean = sum / n, sd = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(sd, 2.0, 0.05);
}

TEST(DataGen, RegimesLookLikeTheirNames) {
  // Zero rows: some rows entirely +0, the others not.
  const HostMatrix z = sample(Dist::ZeroRows, DType::F16);
  int zero_rows = 0;
  for (int64_t r = 0; r < z.rows; ++r) {
    bool all = true;
    for (int64_t c = 0; c < z.cols; ++c) all &= z.bits[r * z.ld + c] == 0;
    zero_rows += all;
  }
  EXPECT_GT(zero_rows, 10);
  EXPECT_LT(zero_rows, 54);
  // Constant rows: variance exactly 0 in every row.
  const HostMatrix k = sample(Dist::ConstantRows, DType::BF16);
  for (int64_t r = 0; r < k.rows; ++r)
    for (int64_t c = 1; c < k.cols; ++c) ASSERT_EQ(k.bits[r * k.ld + c], k.bits[r * k.ld]);
  // Signed zeros: both +0 and -0 appear.
  const HostMatrix s = sample(Dist::SignedZeros, DType::F32);
  int pos = 0, neg = 0;
  for (uint32_t b : s.bits) {
    pos += b == 0u;
    neg += b == 0x80000000u;
  }
  EXPECT_GT(pos, 100);
  EXPECT_GT(neg, 100);
  // Subnormals: every value is subnormal in its own format.
  for (DType t : kAllDTypes) {
    const HostMatrix sub = sample(Dist::Subnormal, t);
    for (uint32_t b : sub.bits) {
      const double v = std::fabs(decodeBits(t, b));
      ASSERT_GT(v, 0.0);
      ASSERT_LT(v, std::ldexp(1.0, formatOf(t).emin));
    }
  }
  // Near overflow: |x| in [2^14, 65504] (fp16's top binades).
  const HostMatrix o = sample(Dist::NearOverflow, DType::F16);
  for (uint32_t b : o.bits) {
    const double v = std::fabs(decodeBits(DType::F16, b));
    ASSERT_GE(v, 16384.0);
    ASSERT_LE(v, 65504.0);
  }
  // Large mean, small variance: every value within mean +- 3.5 sigma.
  const HostMatrix lm = sample(Dist::LargeMean, DType::F32, 1000.0 / 256, 1000.0);
  for (uint32_t b : lm.bits) ASSERT_NEAR(decodeBits(DType::F32, b), 1000.0, 3.47 * 1000.0 / 256);
  // Outlier channels: some columns 256x larger than the rest.
  const HostMatrix out = sample(Dist::OutlierChannels, DType::F32, 1.0, 0.0, 32, 256);
  int big_columns = 0;
  for (int64_t c = 0; c < out.cols; ++c) {
    double m = 0;
    for (int64_t r = 0; r < out.rows; ++r) m = std::max(m, std::fabs(out.value(r, c)));
    big_columns += m > 16.0;
  }
  EXPECT_GT(big_columns, 1);
  EXPECT_LT(big_columns, 32);
}

}  // namespace
}  // namespace ulpcheck
