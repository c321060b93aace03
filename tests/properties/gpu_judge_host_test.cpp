// The host side of the GPU judges (properties/gpu_judge.h): the rows the
// host re-judges are gathered in few copies and judged in runs, and give the
// figures and findings that judging and merging them one row at a time gave.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include "core/buffer.h"
#include "properties/gpu_judge.h"

namespace ulpcheck {
namespace {

/// Bits at the storage width of t, as a download leaves them.
PackedBits packed(const std::vector<uint32_t>& bits, DType t) {
  PackedBits p(storageBytes(t), bits.size());
  for (size_t i = 0; i < bits.size(); ++i) p[i] = bits[i];
  return p;
}

/// A tensor of M x N elements: exact values of several binades, budgets of
/// about an ulp, outputs within them; `failing`: some over (by up to 8x the
/// budget) and a few NaN, so that rows hold failures and near misses alike.
struct JudgedTensor {
  ReferenceTensor ref;
  OutputTensor out;
};

JudgedTensor randomTensor(int64_t M, int64_t N, uint64_t seed, bool failing) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  JudgedTensor t;
  t.ref = ReferenceTensor::zeros("y", DType::BF16, M, N, true);
  t.out = OutputTensor{"y", DType::BF16, M, N, N, true, {}};
  std::vector<uint32_t> bits(size_t(M * N));
  for (int64_t i = 0; i < M * N; ++i) {
    const double exact = std::ldexp(unit(rng) - 0.5, int(unit(rng) * 8) - 4);
    const double ulp = ulpOf(DType::BF16, exact);
    const bool over = failing && unit(rng) < 0.02;
    double got = roundToFormat(DType::BF16, exact + ulp * (unit(rng) * 2 - 1) * (over ? 8.0 : 1.0));
    // err/budget in (0.5, 1] where the element is not meant to be over.
    const double budget = over ? 0.5 * ulp : std::max(std::fabs(got - exact), 1e-3 * ulp) / (0.5 + 0.5 * unit(rng));
    if (failing && unit(rng) < 0.001) got = NAN;
    t.ref.exact[size_t(i)] = exact;
    t.ref.budget[size_t(i)] = budget;
    bits[size_t(i)] = doubleToBits(DType::BF16, got);
  }
  t.out.bits = packed(bits, DType::BF16);
  return t;
}

/// Rows `rows` of a tensor: row k of the result is rows[k] of t's.
JudgedTensor subRows(const JudgedTensor& t, const std::vector<int64_t>& rows) {
  JudgedTensor s;
  const int64_t N = t.ref.cols;
  s.ref = ReferenceTensor::zeros(t.ref.name, t.ref.dtype, int64_t(rows.size()), N, true);
  s.out = OutputTensor{t.out.name, t.out.dtype, int64_t(rows.size()), N, N, true, {}};
  std::vector<uint32_t> bits;
  for (size_t k = 0; k < rows.size(); ++k)
    for (int64_t j = 0; j < N; ++j) {
      const size_t from = size_t(rows[k] * N + j), to = k * size_t(N) + size_t(j);
      s.ref.exact[to] = t.ref.exact[from];
      s.ref.budget[to] = t.ref.budget[from];
      bits.push_back(t.out.at(rows[k], j));
    }
  s.out.bits = packed(bits, DType::BF16);
  return s;
}

/// The findings an outcome shows (accuracyVerdict's): the kReportedFindings
/// worst failures, or without any the worst elements within budget.
std::vector<std::tuple<double, int64_t, int64_t, uint32_t>> shown(const TensorJudgment& j) {
  std::vector<Finding> v = j.failures.empty() ? j.worst : j.failures;
  std::sort(v.begin(), v.end(), [](const Finding& a, const Finding& b) {
    if (a.ratio != b.ratio) return a.ratio > b.ratio;
    return std::tie(a.row, a.col) < std::tie(b.row, b.col);
  });
  v.resize(std::min(v.size(), kReportedFindings));
  std::vector<std::tuple<double, int64_t, int64_t, uint32_t>> r;
  for (const Finding& f : v) r.emplace_back(f.ratio, f.row, f.col, doubleToBits(DType::F32, f.got));
  return r;
}

TEST(GpuJudgeHostRows, RunsOfRowsGiveWhatRowByRowGaveFiguresSumsAndFindings) {
  const int64_t M = 300, N = 37;
  for (const bool failing : {true, false}) {
    SCOPED_TRACE(failing ? "with failures" : "all within budget");
    const JudgedTensor whole = randomTensor(M, N, 0x5eed, failing);
    // The GPU's per-row figures (its max_ratio is the host's, bit for bit:
    // the judge audit compares them), and rows it left undecided: runs and
    // single rows.
    std::vector<gpu_oracle::RowFigures> figures(static_cast<size_t>(M)), other(static_cast<size_t>(M));
    std::vector<uint8_t> undecided(size_t(M), 0);
    for (int64_t i = 0; i < M; ++i) {
      undecided[size_t(i)] = (i % 7 == 3) || (i >= 40 && i < 90);
      figures[size_t(i)].max_ratio = judgeTensorRows(whole.ref, whole.out, i, i + 1).st.max_ratio;
      other[size_t(i)].max_ratio = double((i * 37) % M);  // another tensor's worst rows: more rows on the host
    }
    std::vector<int64_t> rows;
    const int64_t undecided_rows = hostRows(undecided, {&figures, &other}, rows);
    ASSERT_GT(undecided_rows, 50);
    ASSERT_GT(int64_t(rows.size()), undecided_rows + int64_t(kReportedFindings));  // the other tensor's rows too
    const JudgedTensor sub = subRows(whole, rows);

    // As mergeHostRows judged them before: each row alone, all its figures
    // or only its findings.
    TensorJudgment before;
    before.st.tensor = "y";
    before.sum_sq_ulp = 0x1.23456789abcdp-3;  // the GPU rows' sum: the host rows' add to it in order
    TensorJudgment after = before;
    for (size_t r = 0; r < rows.size(); ++r) {
      TensorJudgment row = judgeTensorRows(sub.ref, sub.out, int64_t(r), int64_t(r) + 1, &rows, M);
      if (undecided[size_t(rows[r])]) {
        before.merge(std::move(row));
      } else {
        TensorJudgment findings;
        findings.failures = std::move(row.failures);
        findings.worst = std::move(row.worst);
        before.merge(std::move(findings));
      }
    }
    mergeHostRows(after, sub.ref, sub.out, rows, undecided, figures, M);

    EXPECT_EQ(after.st.elements, before.st.elements);
    EXPECT_EQ(after.st.wrong, before.st.wrong);
    EXPECT_EQ(after.st.wrong > 0, failing);
    EXPECT_EQ(after.st.nonzero, before.st.nonzero);
    EXPECT_EQ(after.st.sharp, before.st.sharp);
    EXPECT_EQ(after.st.max_ratio, before.st.max_ratio);
    EXPECT_EQ(after.st.max_ulp, before.st.max_ulp);
    EXPECT_EQ(after.sum_sq_ulp, before.sum_sq_ulp);  // bit for bit: added row by row, in the same order
    EXPECT_EQ(after.finite_count, before.finite_count);
    EXPECT_EQ(after.st.errors.count, before.st.errors.count);
    EXPECT_EQ(after.st.errors.ratio, before.st.errors.ratio);
    EXPECT_EQ(after.st.errors.ulp_at_scale, before.st.errors.ulp_at_scale);
    EXPECT_EQ(shown(after), shown(before));
    EXPECT_EQ(shown(after).size(), kReportedFindings);
  }
}

TEST(GpuJudgeHostRows, EachRowsSumOfSquaresIsTheOneItsOwnJudgmentGives) {
  const JudgedTensor t = randomTensor(20, 11, 7, true);
  std::vector<double> row_sq;
  const TensorJudgment runs = judgeTensorRows(t.ref, t.out, 3, 17, nullptr, 0, nullptr, &row_sq);
  ASSERT_EQ(row_sq.size(), 14u);
  double total = 0;
  for (int64_t i = 3; i < 17; ++i) {
    const double alone = judgeTensorRows(t.ref, t.out, i, i + 1).sum_sq_ulp;
    EXPECT_EQ(row_sq[size_t(i - 3)], alone) << "row " << i;
    total += alone;
  }
  EXPECT_EQ(runs.sum_sq_ulp, total);
  EXPECT_EQ(runs.st.elements, 14 * 11);
}

TEST(GpuJudgeHostRows, DownloadedRowsAreTheRowsWhateverTheirSpacing) {
  // f32 rows of 300 (1200 bytes): rows 3 and 60 lie 68 KB apart, past the
  // gap one copy spans; 0..3 and 200..201 come in one copy each.
  for (const DType t : {DType::F32, DType::BF16}) {
    const int64_t M = 1200, cols = 7, ld = 300;
    const int w = storageBytes(t);
    std::vector<uint32_t> all(size_t(M * ld));
    for (size_t i = 0; i < all.size(); ++i) all[i] = doubleToBits(t, double(i % 4093) - 2000.0);
    const std::vector<uint8_t> bytes = packBits(packed(all, t), t);
    Buffer b(Backend::Host, bytes.size(), "y");
    b.upload(bytes.data(), bytes.size());
    for (const std::vector<int64_t>& rows :
         std::vector<std::vector<int64_t>>{{0, 1, 2, 3, 60, 200, 201, 1000, 1199}, {1199}, {5, 900}, {}}) {
      const OutputTensor got = downloadRows(b, "y", t, rows, cols, ld);
      ASSERT_EQ(got.rows, int64_t(rows.size()));
      for (size_t k = 0; k < rows.size(); ++k)
        for (int64_t j = 0; j < cols; ++j)
          EXPECT_EQ(got.at(int64_t(k), j), all[size_t(rows[k] * ld + j)])
              << dtypeName(t) << " row " << rows[k] << " col " << j << " (" << w << "-byte elements)";
    }
  }
}

}  // namespace
}  // namespace ulpcheck
