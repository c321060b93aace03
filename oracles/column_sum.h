// Exact column sums over the rows of a tensor (dW, dgamma, dbeta), shared by
// the oracles: each chunk of rows accumulates at the oracle's accumulator
// precision, and chunks are combined in chunk order, so the result is exact
// and does not depend on the number of threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "oracles/mpfr_util.h"
#include "oracles/tolerances.h"

namespace ulpcheck::mp {

/// The column sums of one chunk of rows, with two per-column magnitudes the
/// budget needs (what they hold is the oracle's choice, e.g. sum |terms|).
struct ColumnSumChunk {
  explicit ColumnSumChunk(int64_t N) : sum(size_t(N), tolerance::kOracleAccumulatorBits), abs_terms(N, 0.0), gain(N, 0.0) {}
  RealArray sum;
  std::vector<double> abs_terms;
  std::vector<double> gain;
};

using ColumnSumChunks = std::vector<std::unique_ptr<ColumnSumChunk>>;

/// A fixed chunking of M rows of N columns: it bounds the accumulators'
/// memory (about 2^22 per chunk set) and never depends on the thread count.
inline int64_t columnChunkCount(int64_t M, int64_t N) {
  return std::min<int64_t>(M, std::clamp<int64_t>((int64_t{1} << 22) / N, 1, 64));
}

struct ColumnTotal {
  double exact = 0;      // round-to-odd
  double abs_terms = 0;  // summed over chunks
  double gain = 0;
};

/// Column j of the sum of all chunks, combined in chunk order.
inline ColumnTotal combineColumn(const ColumnSumChunks& chunks, int64_t j, Real& scratch) {
  ColumnTotal t;
  mpfr_set_zero(scratch, 1);
  for (const auto& chunk : chunks) {
    mpfr_add(scratch, scratch, chunk->sum[size_t(j)], MPFR_RNDN);
    t.abs_terms += chunk->abs_terms[size_t(j)];
    t.gain += chunk->gain[size_t(j)];
  }
  t.exact = toDoubleRoundToOdd(scratch);
  return t;
}

}  // namespace ulpcheck::mp
