// Exact column sums over the rows of a tensor (dW, dgamma, dbeta), shared by
// the oracles: each chunk of rows accumulates at the oracle's accumulator
// precision, and chunks are combined in chunk order, so the result is exact
// and does not depend on the number of threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "harness/core/accuracy.h"
#include "harness/core/datagen.h"
#include "harness/core/parallel.h"
#include "oracles/mpfr_util.h"
#include "oracles/reference.h"
#include "oracles/tolerances.h"

namespace ulpcheck::mp {

/// The per-column magnitudes the budget of a column sum needs, summed in
/// double over one chunk of rows (what they hold is the oracle's choice,
/// e.g. sum |terms|). The fast oracles keep them exactly as the MPFR ones do,
/// so their budgets are the same doubles.
struct ColumnMagnitudes {
  explicit ColumnMagnitudes(int64_t N) : abs_terms(N, 0.0), gain(N, 0.0), sq_terms(N, 0.0), spread(N, 0.0) {}
  std::vector<double> abs_terms;
  std::vector<double> gain;
  std::vector<double> sq_terms;  // sum of squared terms: sqrt of it is the sum's size under random signs
  // Sum of absolute (not relative) bounds on the terms' errors: a rounding
  // point of the spec that a kernel's value may fall on the other side of.
  std::vector<double> spread;
};

/// The column sums of one chunk of rows, exact at the accumulator precision, with their magnitudes.
struct ColumnSumChunk : ColumnMagnitudes {
  explicit ColumnSumChunk(int64_t N) : ColumnMagnitudes(N), sum(size_t(N), tolerance::kOracleAccumulatorBits) {}
  RealArray sum;
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
  double sq_terms = 0;
  double spread = 0;
  double magnitude() const { return std::sqrt(sq_terms); }
};

/// The magnitudes of column j over all chunks, summed in chunk order (exact left 0).
template <typename Chunks>
ColumnTotal combineMagnitudes(const Chunks& chunks, int64_t j) {
  ColumnTotal t;
  for (const auto& chunk : chunks) {
    t.abs_terms += chunk->abs_terms[size_t(j)];
    t.gain += chunk->gain[size_t(j)];
    t.sq_terms += chunk->sq_terms[size_t(j)];
    t.spread += chunk->spread[size_t(j)];
  }
  return t;
}

/// Column j of the sum of all chunks, combined in chunk order.
inline ColumnTotal combineColumn(const ColumnSumChunks& chunks, int64_t j, Real& scratch) {
  ColumnTotal t = combineMagnitudes(chunks, j);
  mpfr_set_zero(scratch, 1);
  for (const auto& chunk : chunks) mpfr_add(scratch, scratch, chunk->sum[size_t(j)], MPFR_RNDN);
  t.exact = toDoubleRoundToOdd(scratch);
  return t;
}

// ---------------------------------------------------------------------------
// The rounding error of a column sum computed in a known order.
//
// A kernel that sums a column in a fixed tree (ColumnOrder: per-CTA fma
// chains over rows, then chains over the CTA partials) rounds the result of
// each add v once: with s~_v the exact sum of the kernel's own leaf values
// under v and E_v the error of its computed value,
//   E_v <= E_a + E_b + u |s~_v + E_a + E_b|  <=  (1 + u)(E_a + E_b) + u |s~_v|
// (plus eta if the result lands in the subnormal range), so for a tree of
// depth D
//   |computed - sum_i t~_i| <= u (1 + u)^D sum_v |s~_v|  (+ adds * eta).
// The kernel's leaves t~_i differ from the exact terms t_i by tau_i (the
// caller's per-term bound), so |s~_v| <= |s_v| + sum_{i under v} tau_i, each
// leaf lying under at most D adds, and in all
//   |computed - sum_i t_i| <= u (1 + u)^D (sum_v |s_v| + D sum_i tau_i) + sum_i tau_i.
// The depth bound D u sum_i |t_i| replaces every |s_v| by the sum of all |t|;
// when terms of random sign cancel, the partial sums grow like sqrt(count)
// and this bound is sqrt-smaller: at M = 32768 over 4224 CTAs (an H100's
// grid for narrow rows) it is ~3e-4 of |dW| where the depth bound is ~9%, so
// one CTA's partial left out (~1.5% of |dW|) shows.
//
// sum_v |s_v| is computed here in double from terms accurate to within
// err_i (the caller's double evaluation of t_i): each partial sum in double is
// within sum_{under v} err_i + (D + 2) 2^-52 sum_{under v} |t_i| of s_v, so
// the sum over v is padded by D sum_i err_i + D (D + 2) 2^-52 sum_i |t_i|;
// both are multiplied by u in the bound, far below anything it decides.

/// One leaf of a column sum as the oracle evaluates it in double: the term
/// and a bound on that evaluation's error.
struct Leaf {
  double value = 0, err = 0;
};

/// What the bound needs of a column sum in one order.
struct OrderedColumnBound {
  std::vector<double> partial_abs;  // per column: sum over every add of |exact partial result| (padded, see above)
  int64_t depth = 0;                // D: the longest chain of adds from a leaf to the result
  int64_t adds = 0;                 // adds per column (each may add eta if its result underflows)
  /// u (1 + u)^D, the factor of partial_abs (and of D sum tau) in the bound,
  /// padded for the double roundings of summing partial_abs (`adds` of them)
  /// and of exp/log1p.
  double factor(double u) const {
    return u * std::exp(double(depth) * std::log1p(u)) * (1 + double(adds + 8) * 0x1p-51);
  }
};

/// The depth and adds of a column sum of M rows in `order` (partial_abs empty).
inline OrderedColumnBound orderedColumnShape(int64_t M, const ColumnOrder& order) {
  OrderedColumnBound b;
  const int64_t C = std::max<int64_t>(1, order.ctas), G = std::max(1, order.groups);
  const int64_t per_cta = (M + C - 1) / C;
  b.depth = per_cta + (G == 1 ? C : (C + G - 1) / G + G);
  b.adds = M + C + (G > 1 ? G : 0);
  return b;
}

/// sum_v |s_v| of every column of an M x N sum of leaf(i, j) in `order`.
/// (The GPU oracle, oracles/rmsnorm_device.cu, repeats this loop as it is.)
template <typename LeafFn>
OrderedColumnBound orderedColumnBound(int64_t M, int64_t N, const ColumnOrder& order, LeafFn leaf, ThreadPool& pool) {
  OrderedColumnBound b = orderedColumnShape(M, order);
  const int64_t C = std::max<int64_t>(1, order.ctas), G = std::max(1, order.groups);
  b.partial_abs.assign(size_t(N), 0.0);
  constexpr int64_t kColumnsPerTask = 64;
  const double d = double(b.depth);
  pool.forChunks((N + kColumnsPerTask - 1) / kColumnsPerTask, [&](unsigned, int64_t task_begin, int64_t task_end) {
    for (int64_t task = task_begin; task < task_end; ++task) {
      const int64_t j0 = task * kColumnsPerTask, j1 = std::min(N, j0 + kColumnsPerTask), w = j1 - j0;
      std::vector<double> chain(w), group(size_t(G * w), 0.0), abs_sum(w, 0.0), abs_terms(w, 0.0), errs(w, 0.0);
      for (int64_t c = 0; c < C; ++c) {
        std::fill(chain.begin(), chain.end(), 0.0);
        for (int64_t i = c; i < M; i += C)
          for (int64_t j = 0; j < w; ++j) {
            const Leaf t = leaf(i, j0 + j);
            chain[j] += t.value;
            abs_sum[j] += std::fabs(chain[j]);
            abs_terms[j] += std::fabs(t.value);
            errs[j] += t.err;
          }
        double* g = group.data() + (c % G) * w;
        for (int64_t j = 0; j < w; ++j) {
          g[j] += chain[j];
          abs_sum[j] += std::fabs(g[j]);
        }
      }
      for (int64_t j = 0; j < w; ++j) {
        if (G > 1) {
          double total = 0;
          for (int64_t k = 0; k < G; ++k) abs_sum[j] += std::fabs(total += group[size_t(k * w + j)]);
        }
        b.partial_abs[size_t(j0 + j)] = abs_sum[j] + d * errs[j] + d * (d + 2) * 0x1p-52 * abs_terms[j];
      }
    }
  });
  return b;
}

/// The gradient of a bias, sum_i v_ij over the rows of an M x N matrix of
/// exact values (LayerNorm's dbeta and RMSNorm's db: v = dy), named `name`
/// and rounded to `out`, with the budget of an fp32 column reduction as
/// `contract` declares it. The leaves are exact and their sums are of fp32
/// values (no underflow error), so
///   error <= K D_c u sum_i |v_ij|                 (any order of depth D_c)
///   error <= K F sum_v |s_v| + K adds eta          (a declared ColumnOrder, the smaller winning)
/// plus K D_c 2^-126 where the reduction flushes subnormals (fp32 atomics).
inline ReferenceTensor biasGradientReference(std::string name, const HostMatrix& v, DType out,
                                             const AccuracyContract& contract, ThreadPool& pool) {
  const int64_t M = v.rows, N = v.cols;
  const double K = tolerance::kBudgetSafety, u = unitRoundoff(contract.accumulation);
  const double Dc = double(contract.depths.col);
  const double eta = tolerance::kUnderflowHalfUlps * minSubnormal(contract.accumulation);
  const double ftz = contract.column_reduction_ftz ? K * Dc * std::ldexp(1.0, formatOf(contract.accumulation).emin) : 0.0;
  ReferenceTensor ref = ReferenceTensor::zeros(std::move(name), out, 1, N, false);
  ref.withMagnitudes();  // sqrt(sum_i v^2)

  const int64_t chunks = columnChunkCount(M, N);
  ColumnSumChunks sums(static_cast<size_t>(chunks));
  pool.forChunks(chunks, [&](unsigned, int64_t chunk_begin, int64_t chunk_end) {
    for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk) {
      auto c = std::make_unique<ColumnSumChunk>(N);
      for (int64_t i = M * chunk / chunks; i < M * (chunk + 1) / chunks; ++i)
        for (int64_t j = 0; j < N; ++j) {
          const double t = v.value(i, j);
          mpfr_add_d(c->sum[size_t(j)], c->sum[size_t(j)], t, MPFR_RNDN);  // exact at 256 bits
          c->abs_terms[size_t(j)] += std::fabs(t);
          c->sq_terms[size_t(j)] += t * t;
        }
      sums[size_t(chunk)] = std::move(c);
    }
  });
  std::vector<OrderedColumnBound> ordered;
  if (!contract.column_reduction_ftz)
    for (const ColumnOrder& order : contract.depths.col_orders)
      ordered.push_back(orderedColumnBound(M, N, order, [&](int64_t i, int64_t j) { return Leaf{v.value(i, j), 0.0}; }, pool));

  Real total(tolerance::kOracleAccumulatorBits);
  for (int64_t j = 0; j < N; ++j) {
    const ColumnTotal t = combineColumn(sums, j, total);
    double error = K * Dc * u * t.abs_terms + ftz;
    if (!ordered.empty()) {
      double worst = 0;
      for (const OrderedColumnBound& b : ordered)
        worst = std::max(worst, K * b.factor(u) * b.partial_abs[size_t(j)] + K * double(b.adds) * eta);
      error = std::min(worst, error);
    }
    ref.exact[size_t(j)] = t.exact;
    ref.magnitude[size_t(j)] = t.magnitude();
    ref.budget[size_t(j)] = budgetFromError(out, t.exact, error);
  }
  return ref;
}

}  // namespace ulpcheck::mp
