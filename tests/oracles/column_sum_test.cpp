// ColumnFold: chunks combined one at a time as they come give the very
// doubles of combining them all at the end, in chunk order (what the oracles
// did before a sweep held only one wave of chunks): the same decisions,
// exact values, error bounds and magnitudes, bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "oracles/column_sum.h"

namespace ulpcheck::mp {
namespace {

/// Chunk words of random terms: sums that cancel, a zero and a -0 column,
/// magnitudes in every field.
std::vector<std::unique_ptr<WordColumnChunk>> randomChunks(int64_t chunks, int64_t N, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<std::unique_ptr<WordColumnChunk>> out;
  for (int64_t k = 0; k < chunks; ++k) {
    auto c = std::make_unique<WordColumnChunk>(N);
    for (int64_t j = 0; j < N; ++j) {
      const size_t i = size_t(j);
      for (int row = 0; row < 3; ++row) {
        const double t = j == 0 ? 0.0 : j == 1 ? -0.0 : std::ldexp(normal(rng), int(j % 40) - 20);
        c->sum[i] = dw::plus(c->sum[i], t);
        c->err[i] += 2.0 * dw::kU2 * std::fabs(c->sum[i].h);
        c->abs_terms[i] += std::fabs(t);
        c->sq_terms[i] += t * t;
        c->gain[i] += std::fabs(normal(rng));
        c->spread[i] += 0x1p-30 * std::fabs(t);
        c->coef_bound_sq[i] += t * t * 3;
        c->coef_bound_abs[i] += std::fabs(t) * 3;
        c->coef_err_sq[i] += 0x1p-40 * t * t;
        c->coef_err_abs[i] += 0x1p-20 * std::fabs(t);
        c->fixed_err[i] += 0x1p-60;
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

bool same(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

TEST(ColumnFold, WordChunksFoldedAsTheyComeDecideAsAllCombinedAtTheEnd) {
  constexpr int64_t N = 97;
  for (int64_t chunks : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{64}}) {
    const auto reference = randomChunks(chunks, N, 0xc01d + uint32_t(chunks));
    auto copies = randomChunks(chunks, N, 0xc01d + uint32_t(chunks));
    WordColumnFold fold(chunks, N);
    for (auto& c : copies) fold.add(std::move(c));
    int64_t decided = 0;
    for (int64_t j = 0; j < N; ++j) {
      // The combination at the end, in chunk order (decideWordColumn before folds).
      ColumnTotal at_end;
      dw::DW sum;
      double err = 0;
      for (const auto& c : reference) {
        at_end.abs_terms += c->abs_terms[size_t(j)];
        at_end.gain += c->gain[size_t(j)];
        at_end.sq_terms += c->sq_terms[size_t(j)];
        at_end.spread += c->spread[size_t(j)];
        at_end.gradient.coef_bound_sq += c->coef_bound_sq[size_t(j)];
        at_end.gradient.coef_bound_abs += c->coef_bound_abs[size_t(j)];
        at_end.gradient.coef_err_sq += c->coef_err_sq[size_t(j)];
        at_end.gradient.coef_err_abs += c->coef_err_abs[size_t(j)];
        at_end.gradient.fixed_err += c->fixed_err[size_t(j)];
        sum = dw::plus(sum, c->sum[size_t(j)]);
        err += c->err[size_t(j)] + 3.01 * dw::kU2 * std::fabs(sum.h);
      }
      for (double widen : {1.0, 0x1p20}) {
        const bool end_decides = dw::roundToOdd(sum, widen * dw::up(err + 0x1p-100 * at_end.abs_terms), at_end.exact);
        ColumnTotal folded;
        EXPECT_EQ(decideWordColumn(fold, j, 0x1p-100, widen, folded), end_decides) << chunks << " chunks, column " << j;
        decided += end_decides;
        if (end_decides) {
          EXPECT_TRUE(same(folded.exact, at_end.exact)) << j;
        }
        for (auto [a, b] : {std::pair{folded.abs_terms, at_end.abs_terms}, std::pair{folded.gain, at_end.gain},
                            std::pair{folded.sq_terms, at_end.sq_terms}, std::pair{folded.spread, at_end.spread},
                            std::pair{folded.gradient.coef_bound_sq, at_end.gradient.coef_bound_sq},
                            std::pair{folded.gradient.coef_bound_abs, at_end.gradient.coef_bound_abs},
                            std::pair{folded.gradient.coef_err_sq, at_end.gradient.coef_err_sq},
                            std::pair{folded.gradient.coef_err_abs, at_end.gradient.coef_err_abs},
                            std::pair{folded.gradient.fixed_err, at_end.gradient.fixed_err}})
          EXPECT_TRUE(same(a, b)) << chunks << " chunks, column " << j << ": " << a << " vs " << b;
      }
    }
    EXPECT_GT(decided, N) << "the comparison must see decided columns";
  }
}

TEST(ColumnFold, MpfrChunksFoldedAsTheyComeAreTheirSumInChunkOrder) {
  constexpr int64_t N = 5, chunks = 4;
  ColumnSumFold fold(chunks, N);
  Real expected[N] = {Real(256), Real(256), Real(256), Real(256), Real(256)};
  for (auto& e : expected) mpfr_set_zero(e, 1);
  for (int64_t k = 0; k < chunks; ++k) {
    auto c = std::make_unique<ColumnSumChunk>(N);
    for (int64_t j = 0; j < N; ++j) {
      // Column 0 stays -0 (+0 in the sum); column 1 cancels to 2^-200, held only at 256 bits.
      const double v = j == 0 ? -0.0 : j == 1 ? (k % 2 ? -1.0 : 1.0) : std::ldexp(1.0 + double(k), int(j) * 7);
      mpfr_set_d(c->sum[size_t(j)], v, MPFR_RNDN);
      if (j == 1 && k == 3) mpfr_add_d(c->sum[size_t(j)], c->sum[size_t(j)], 0x1p-200, MPFR_RNDN);
      c->abs_terms[size_t(j)] = std::fabs(v);
      mpfr_add(expected[j], expected[j], c->sum[size_t(j)], MPFR_RNDN);
    }
    fold.add(std::move(c));
  }
  for (int64_t j = 0; j < N; ++j) {
    const ColumnTotal t = combineColumn(fold, j);
    EXPECT_TRUE(same(t.exact, toDoubleRoundToOdd(expected[j]))) << j << ": " << t.exact;
  }
  EXPECT_TRUE(same(combineColumn(fold, 0).exact, 0.0));
  EXPECT_EQ(combineColumn(fold, 1).exact, 0x1p-200);
}

TEST(ColumnFold, ReadBeforeEveryChunkIsAddedIsAnError) {
  WordColumnFold fold(3, 4);
  fold.add(std::make_unique<WordColumnChunk>(4));
  EXPECT_THROW(fold.total(), std::logic_error);
  WordColumnFold none(0, 4);  // no rows: zero sums
  ColumnTotal t;
  EXPECT_TRUE(decideWordColumn(none, 2, 0.0, 1.0, t));
  EXPECT_EQ(t.exact, 0.0);
}

}  // namespace
}  // namespace ulpcheck::mp
