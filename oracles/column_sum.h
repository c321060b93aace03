// Exact column sums over the rows of a tensor (dW, dgamma, dbeta), shared by
// the oracles: each chunk of rows accumulates at the oracle's accumulator
// precision, and chunks are combined in chunk order, so the result is exact
// and does not depend on the number of threads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "core/accuracy.h"
#include "core/datagen.h"
#include "core/parallel.h"
#include "oracles/double_word.h"
#include "oracles/mpfr_util.h"
#include "oracles/oracle_mode.h"
#include "oracles/probabilistic.h"
#include "oracles/reference.h"
#include "oracles/tolerances.h"

namespace ulpcheck::mp {

/// Which magnitudes a column sum keeps: all, or only sum |terms| and sum
/// terms^2 (a bias gradient's budget reads no other; the rest, 56 bytes a
/// column per chunk, are left empty and read as 0).
enum class Magnitudes { All, OfTermsOnly };

/// The per-column magnitudes the budget of a column sum needs, summed in
/// double over one chunk of rows (what they hold is the oracle's choice,
/// e.g. sum |terms|). The fast oracles keep them exactly as the MPFR ones do,
/// so their budgets are the same doubles.
struct ColumnMagnitudes {
  explicit ColumnMagnitudes(int64_t N, Magnitudes kept = Magnitudes::All)
      : abs_terms(N, 0.0),
        gain(other(N, kept), 0.0),
        sq_terms(N, 0.0),
        spread(other(N, kept), 0.0),
        coef_bound_sq(other(N, kept), 0.0),
        coef_bound_abs(other(N, kept), 0.0),
        coef_err_sq(other(N, kept), 0.0),
        coef_err_abs(other(N, kept), 0.0),
        fixed_err(other(N, kept), 0.0) {}
  std::vector<double> abs_terms;
  std::vector<double> gain;
  std::vector<double> sq_terms;  // sum of squared terms: sqrt of it is the sum's size under random signs
  // Sum of absolute (not relative) bounds on the terms' errors: a rounding
  // point of the spec that a kernel's value may fall on the other side of.
  std::vector<double> spread;
  // Of a sum of terms dy_i c_i (probabilistic::GradientColumn): sums of
  // b_i^2 and b_i (b_i bounding the kernel's coefficient), of e_i^2 and e_i
  // (e_i bounding its error), and the leaves' error not of the form dy e.
  std::vector<double> coef_bound_sq, coef_bound_abs, coef_err_sq, coef_err_abs, fixed_err;

  /// Adds the next chunk's magnitudes to these (the chunks before it,
  /// combined so far), column by column: combineMagnitudes' additions, one
  /// chunk at a time.
  void addMagnitudes(const ColumnMagnitudes& next) {
    for (auto field : kFields) {
      if ((next.*field).size() != (this->*field).size())
        throw std::logic_error("ColumnMagnitudes: chunks of one sum keep different magnitudes");
      for (size_t j = 0; j < (this->*field).size(); ++j) (this->*field)[j] += (next.*field)[j];
    }
  }
  /// Makes these the start of a combination: 0 + each, the first addition
  /// combineMagnitudes makes.
  void startMagnitudes() {
    for (auto field : kFields)
      for (double& v : this->*field) v = 0.0 + v;
  }
  /// Column j of one of these magnitudes (0 where it is not kept).
  static double at(const std::vector<double>& field, int64_t j) { return field.empty() ? 0.0 : field[size_t(j)]; }

 private:
  static size_t other(int64_t N, Magnitudes kept) { return kept == Magnitudes::All ? size_t(N) : 0; }
  static constexpr std::vector<double> ColumnMagnitudes::*kFields[] = {
      &ColumnMagnitudes::abs_terms,   &ColumnMagnitudes::gain,          &ColumnMagnitudes::sq_terms,
      &ColumnMagnitudes::spread,      &ColumnMagnitudes::coef_bound_sq, &ColumnMagnitudes::coef_bound_abs,
      &ColumnMagnitudes::coef_err_sq, &ColumnMagnitudes::coef_err_abs,  &ColumnMagnitudes::fixed_err};
};

/// The column sums of one chunk of rows, exact at the accumulator precision, with their magnitudes.
struct ColumnSumChunk : ColumnMagnitudes {
  explicit ColumnSumChunk(int64_t N, Magnitudes kept = Magnitudes::All)
      : ColumnMagnitudes(N, kept), sum(size_t(N), tolerance::kOracleAccumulatorBits) {}
  RealArray sum;

  /// ColumnFold's steps: the sums combined in chunk order at the
  /// accumulator precision, from +0 (combineColumn's), magnitudes beside.
  void startTotal() {
    startMagnitudes();
    for (size_t j = 0; j < sum.size(); ++j)
      if (mpfr_zero_p(sum[j])) mpfr_set_zero(sum[j], 1);  // +0 + v: v, but +0 for -0
  }
  void addChunk(const ColumnSumChunk& next) {
    addMagnitudes(next);
    for (size_t j = 0; j < sum.size(); ++j) mpfr_add(sum[j], sum[j], next.sum[j], MPFR_RNDN);
  }
};

/// The column sums of one chunk of rows in double words with error bounds
/// (the fast oracles: mp::columnChunkCount's chunking, rows in order), and
/// the magnitudes the budget reads.
struct WordColumnChunk : ColumnMagnitudes {
  explicit WordColumnChunk(int64_t N, Magnitudes kept = Magnitudes::All)
      : ColumnMagnitudes(N, kept), sum(size_t(N)), err(size_t(N), 0.0) {}
  std::vector<dw::DW> sum;
  std::vector<double> err;  // bound on |sum - the exact sum of the chunk's terms| (and the MPFR path's)

  /// ColumnFold's steps: the words added in chunk order from 0, each
  /// addition's error (3.01 u2 |partial|) and the chunk's own into err
  /// (decideWordColumn's bound), magnitudes beside.
  void startTotal() {
    startMagnitudes();
    for (size_t j = 0; j < sum.size(); ++j) {
      sum[j] = dw::plus(dw::DW{}, sum[j]);
      double total_err = 0;
      total_err += err[j] + 3.01 * dw::kU2 * std::fabs(sum[j].h);
      err[j] = total_err;
    }
  }
  void addChunk(const WordColumnChunk& next) {
    addMagnitudes(next);
    for (size_t j = 0; j < sum.size(); ++j) {
      sum[j] = dw::plus(sum[j], next.sum[j]);
      err[j] += next.err[j] + 3.01 * dw::kU2 * std::fabs(sum[j].h);
    }
  }
};

/// A column sum's chunks combined in chunk order as they come
/// (sweepChunksInOrder hands them over a wave at a time): the first becomes
/// the running total in place, each next one is added to it and freed. The
/// same doubles as combining every chunk at the end, in one chunk's memory
/// instead of all of them (64 chunks of 2^16 columns held 400 MB).
template <typename Chunk>
class ColumnFold {
 public:
  ColumnFold(int64_t chunks, int64_t N) : chunks_(chunks), N_(N) {}
  /// The next chunk in chunk order.
  void add(std::unique_ptr<Chunk> next) {
    if (!total_) {
      next->startTotal();
      total_ = std::move(next);
    } else {
      total_->addChunk(*next);
    }
    ++added_;
  }
  int64_t chunks() const { return chunks_; }  // the chunking's count, which an MPFR re-sum repeats
  /// Every chunk combined (its sum, err and magnitudes: the totals'), once all were added.
  const Chunk& total() const {
    if (added_ != chunks_) throw std::logic_error("ColumnFold: read before every chunk was added");
    if (!total_) {  // no rows: zero sums, made only if read (from one thread; an unused fold costs nothing)
      total_ = std::make_unique<Chunk>(N_);
      total_->startTotal();
    }
    return *total_;
  }

 private:
  int64_t chunks_ = 0, N_ = 0, added_ = 0;
  mutable std::unique_ptr<Chunk> total_;
};

using WordColumnFold = ColumnFold<WordColumnChunk>;
using ColumnSumFold = ColumnFold<ColumnSumChunk>;

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
  probabilistic::GradientColumn gradient;  // its coefficient sums; term_sq and leaf_error left 0
  double magnitude() const { return std::sqrt(sq_terms); }
};

/// The magnitudes of column j of a fold's total (exact left 0).
inline ColumnTotal magnitudesOf(const ColumnMagnitudes& total, int64_t j) {
  using M = ColumnMagnitudes;
  ColumnTotal t;
  t.abs_terms = M::at(total.abs_terms, j);
  t.gain = M::at(total.gain, j);
  t.sq_terms = M::at(total.sq_terms, j);
  t.spread = M::at(total.spread, j);
  t.gradient.coef_bound_sq = M::at(total.coef_bound_sq, j);
  t.gradient.coef_bound_abs = M::at(total.coef_bound_abs, j);
  t.gradient.coef_err_sq = M::at(total.coef_err_sq, j);
  t.gradient.coef_err_abs = M::at(total.coef_err_abs, j);
  t.gradient.fixed_err = M::at(total.fixed_err, j);
  return t;
}

/// Column j of the sum of all chunks, combined in chunk order.
inline ColumnTotal combineColumn(const ColumnSumFold& chunks, int64_t j) {
  const ColumnSumChunk& total = chunks.total();
  ColumnTotal t = magnitudesOf(total, j);
  t.exact = toDoubleRoundToOdd(total.sum[size_t(j)]);
  return t;
}

/// The round-to-odd sums of `columns` as the MPFR oracles form them: each
/// chunk of rows (`chunks` of columnChunkCount's chunking of M rows) summed
/// at 256 bits in row order, the chunks in chunk order; row(i) prepares row
/// i, term(out, i, j) sets `out` (256 bits) to row i's term of column j.
/// For the columns a fast path does not decide.
template <typename Row, typename Term>
std::vector<double> mpfrColumnSums(int64_t M, int64_t chunks, const std::vector<int64_t>& columns, Row row, Term term) {
  std::vector<std::unique_ptr<Real>> total, chunk_sum;
  for (size_t k = 0; k < columns.size(); ++k) {
    total.push_back(std::make_unique<Real>(tolerance::kOracleAccumulatorBits));
    chunk_sum.push_back(std::make_unique<Real>(tolerance::kOracleAccumulatorBits));
    mpfr_set_zero(*total[k], 1);
  }
  Real t(tolerance::kOracleAccumulatorBits);
  for (int64_t chunk = 0; chunk < chunks && !columns.empty(); ++chunk) {
    for (auto& p : chunk_sum) mpfr_set_zero(*p, 1);
    for (int64_t i = M * chunk / chunks; i < M * (chunk + 1) / chunks; ++i) {
      row(i);
      for (size_t k = 0; k < columns.size(); ++k) {
        term(static_cast<mpfr_ptr>(t), i, columns[k]);
        mpfr_add(*chunk_sum[k], *chunk_sum[k], t, MPFR_RNDN);
      }
    }
    for (size_t k = 0; k < columns.size(); ++k) mpfr_add(*total[k], *total[k], *chunk_sum[k], MPFR_RNDN);
  }
  std::vector<double> out;
  for (auto& v : total) out.push_back(toDoubleRoundToOdd(*v));
  return out;
}

/// Column j of double-word chunk sums combined in chunk order, with its
/// magnitudes: true with t.exact the round-to-odd value where the bound
/// (each chunk's, the combination's, and the MPFR path's distance from the
/// exact sum, `mpfr_slack` times sum |terms|; all times `widen`) decides it;
/// false where the caller must sum the column by MPFR.
inline bool decideWordColumn(const WordColumnFold& chunks, int64_t j, double mpfr_slack, double widen, ColumnTotal& t) {
  const WordColumnChunk& total = chunks.total();
  t = magnitudesOf(total, j);
  return dw::roundToOdd(total.sum[size_t(j)], widen * dw::up(total.err[size_t(j)] + mpfr_slack * t.abs_terms), t.exact);
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

// The distance of MPFR's 256-bit column sums of exact leaves from the exact
// ones, relative to sum |v| (decideExactLeafColumns).
inline constexpr double kLeafSumSlack = 0x1p-200;  // M <= 2^40 adds of 2^-256 relative each

/// Column j's exact sum where its leaves are exact doubles, each a multiple
/// of q (0: a leaf was not a double), and their magnitudes stay below
/// dw::kExactSumQuanta q: then each chunk's word sum is exact, and so is
/// their sum in words, whose round-to-odd double is decided with no bound
/// (below 2^53 q the sum itself is a double). t gets the column's
/// magnitudes either way.
inline bool decideExactLeafColumn(const WordColumnFold& words, int64_t j, double q, ColumnTotal& t) {
  t = magnitudesOf(words.total(), j);
  return t.abs_terms < dw::kExactSumQuanta * q && dw::roundToOdd(words.total().sum[size_t(j)], 0.0, t.exact);
}

/// The fast exact sums of columns whose leaves are exact doubles (a bias
/// gradient's dy, RMSNorm's Llama dW leaves dy q), from their chunk words
/// and each column's q, a power of two every leaf is a multiple of (over
/// every chunk): totals[j] with its magnitudes, and its exact value where
/// decided; the columns it leaves to MPFR are returned.
inline std::vector<int64_t> decideExactLeafColumns(const WordColumnFold& words, const std::vector<double>& q,
                                                   double widen, std::vector<ColumnTotal>& totals) {
  std::vector<int64_t> undecided;
  for (int64_t j = 0; j < int64_t(totals.size()); ++j) {
    ColumnTotal& t = totals[size_t(j)];
    if (decideExactLeafColumn(words, j, q[size_t(j)], t)) continue;
    if (!decideWordColumn(words, j, kLeafSumSlack, widen, t)) undecided.push_back(j);
  }
  return undecided;
}

/// biasGradientReference's tensor from its column totals (exact values and
/// magnitudes) and the bounds of the orders the contract declares.
inline ReferenceTensor biasGradientBudgets(std::string name, DType out, int64_t M, const AccuracyContract& contract,
                                           const std::vector<ColumnTotal>& totals,
                                           const std::vector<OrderedColumnBound>& ordered) {
  const int64_t N = int64_t(totals.size());
  const double K = tolerance::kBudgetSafety, u = unitRoundoff(contract.accumulation);
  const double Dc = double(contract.depths.col);
  const double eta = tolerance::kUnderflowHalfUlps * minSubnormal(contract.accumulation);
  const double ftz = contract.column_reduction_ftz ? K * Dc * std::ldexp(1.0, formatOf(contract.accumulation).emin)
                                                   : 0.0;
  ReferenceTensor ref = ReferenceTensor::zeros(std::move(name), out, 1, N, false);
  ref.withMagnitudes();  // sqrt(sum_i v^2)
  const probabilistic::ColumnLambdas lambdas = probabilistic::columnLambdas(double(M), double(N));
  if (contract.random_gradient.set()) ref.statistical_budget.assign(size_t(N), 0.0);
  // The gradient model's bound is not of depth D_c: a flush may come at any of the M adds.
  const double ftz_any_add = contract.column_reduction_ftz
                                 ? K * double(M) * std::ldexp(1.0, formatOf(contract.accumulation).emin)
                                 : 0.0;
  for (int64_t j = 0; j < N; ++j) {
    const ColumnTotal& t = totals[size_t(j)];
    double error = K * Dc * u * t.abs_terms + ftz;
    if (!ordered.empty()) {
      double worst = 0;
      for (const OrderedColumnBound& b : ordered)
        worst = std::max(worst, K * b.factor(u) * b.partial_abs[size_t(j)] + K * double(b.adds) * eta);
      error = std::min(worst, error);
    }
    if (contract.random_gradient.set()) {
      probabilistic::GradientColumn leaves;  // c_i = 1: the leaves are dy_i (rounded if the accumulator is narrower)
      leaves.coef_bound_sq = leaves.coef_bound_abs = double(M);
      leaves.term_sq = t.sq_terms;
      ref.statistical_budget[size_t(j)] = budgetFromError(
          out, t.exact,
          std::min(error, probabilistic::randomGradientColumnError(contract.random_gradient, lambdas, u, double(M),
                                                                   leaves, ftz_any_add)));
    }
    ref.exact[size_t(j)] = t.exact;
    ref.magnitude[size_t(j)] = t.magnitude();
    ref.budget[size_t(j)] = budgetFromError(out, t.exact, error);
  }
  return ref;
}

/// The gradient of a bias, sum_i v_ij over the rows of an M x N matrix of
/// exact values (LayerNorm's dbeta and RMSNorm's db: v = dy), named `name`
/// and rounded to `out`, with the budget of an fp32 column reduction as
/// `contract` declares it. The leaves are exact and their sums are of fp32
/// values (no underflow error), so
///   error <= K D_c u sum_i |v_ij|                 (any order of depth D_c)
///   error <= K F sum_v |s_v| + K adds eta          (a declared ColumnOrder, the smaller winning)
/// plus K D_c 2^-126 where the reduction flushes subnormals (fp32 atomics);
/// where `contract` carries the statistical check's gradient model, the
/// smaller of those and its bound is the statistical budget (c_i = 1;
/// oracles/probabilistic.h): only for v the gradient ulpcheck drew (the
/// caller's contract says so).
///
/// The exact sums: MPFR at 256 bits, each chunk of rows in row order, the
/// chunks in chunk order; or, `fast`, the same values certified (counted in
/// `counts` if given; `widen` as the fast oracles' own). A column whose
/// leaves are all multiples of q (the smallest ulp among them, in v's dtype)
/// with sum |v| < dw::kExactSumQuanta q (2^100 q) has its double-word sums
/// exact, so its round-to-odd sum is decided with no bound (one tiny dy in a
/// column of 65536 fp32 values makes q small enough that the sum, though a
/// double, was otherwise left to MPFR);
/// any other is summed in double words (DWPlusFP, 2 u2 |partial| each,
/// chunks combined by decideWordColumn; MPFR's 256-bit adds are within
/// kLeafSumSlack sum |v|), and summed by MPFR where that does not decide it.
inline ReferenceTensor biasGradientReference(std::string name, const HostMatrix& v, DType out,
                                             const AccuracyContract& contract, ThreadPool& pool, bool fast = false,
                                             FastOracleCounts* counts = nullptr, double widen = 1.0) {
  const int64_t M = v.rows, N = v.cols;
  const int64_t chunks = columnChunkCount(M, N);
  ColumnSumFold sums(fast ? 0 : chunks, N);
  WordColumnFold words(fast ? chunks : 0, N);
  std::vector<double> q(fast ? size_t(N) : 0, INFINITY);  // over every chunk (a min: any order)
  struct Chunk {
    std::unique_ptr<ColumnSumChunk> sums;
    std::unique_ptr<WordColumnChunk> words;
    std::vector<double> smallest_ulp;
  };
  sweepChunksInOrder(
      pool, chunks,
      [&](unsigned, int64_t chunk) {
        Chunk out;
        ColumnMagnitudes* magnitudes;
        if (fast) {
          out.words = std::make_unique<WordColumnChunk>(N, Magnitudes::OfTermsOnly);
          out.smallest_ulp.assign(size_t(N), INFINITY);
          magnitudes = out.words.get();
        } else {
          out.sums = std::make_unique<ColumnSumChunk>(N, Magnitudes::OfTermsOnly);
          magnitudes = out.sums.get();
        }
        for (int64_t i = M * chunk / chunks; i < M * (chunk + 1) / chunks; ++i)
          for (int64_t j = 0; j < N; ++j) {
            const double t = v.value(i, j);
            if (fast) {
              WordColumnChunk& w = *out.words;
              w.sum[size_t(j)] = dw::plus(w.sum[size_t(j)], t);
              w.err[size_t(j)] += 2.0 * dw::kU2 * std::fabs(w.sum[size_t(j)].h);
              double& chunk_q = out.smallest_ulp[size_t(j)];
              if (t != 0.0) chunk_q = std::min(chunk_q, ulpOf(v.dtype, t));
            } else {
              mpfr_add_d(out.sums->sum[size_t(j)], out.sums->sum[size_t(j)], t, MPFR_RNDN);  // exact at 256 bits
            }
            magnitudes->abs_terms[size_t(j)] += std::fabs(t);
            magnitudes->sq_terms[size_t(j)] += t * t;
          }
        return out;
      },
      [&](int64_t, Chunk chunk) {
        if (!fast) return sums.add(std::move(chunk.sums));
        words.add(std::move(chunk.words));
        for (int64_t j = 0; j < N; ++j) q[size_t(j)] = std::min(q[size_t(j)], chunk.smallest_ulp[size_t(j)]);
      });
  std::vector<OrderedColumnBound> ordered;
  if (!contract.column_reduction_ftz)
    for (const ColumnOrder& order : contract.depths.col_orders)
      ordered.push_back(orderedColumnBound(
          M, N, order,
          [&](int64_t i, int64_t j) {
            return Leaf{v.value(i, j), 0.0};
          },
          pool));

  std::vector<ColumnTotal> totals(static_cast<size_t>(N));
  std::vector<int64_t> undecided;
  if (fast) {
    undecided = decideExactLeafColumns(words, q, widen, totals);
  } else {
    for (int64_t j = 0; j < N; ++j) totals[size_t(j)] = combineColumn(sums, j);
  }
  const std::vector<double> exact = mpfrColumnSums(
      M, chunks, undecided, [](int64_t) {},
      [&](mpfr_ptr out, int64_t i, int64_t j) { mpfr_set_d(out, v.value(i, j), MPFR_RNDN); });  // exact
  for (size_t k = 0; k < undecided.size(); ++k) totals[size_t(undecided[k])].exact = exact[k];
  if (counts) {
    counts->fast += N - int64_t(undecided.size());
    counts->fell_back += int64_t(undecided.size());
  }
  return biasGradientBudgets(std::move(name), out, M, contract, totals, ordered);
}

}  // namespace ulpcheck::mp
