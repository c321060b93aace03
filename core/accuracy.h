// The vocabulary of the accuracy contract shared by kernels (which declare
// it) and oracles (which turn it into per-element error budgets).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace ulpcheck {

/// The longest chain of additions from any term to the result in a kernel's
/// summation tree: a blocked sum with serial chains of length L per thread,
/// then a butterfly of depth 5 and a serial pass over W warp totals, has depth
/// L + 5 + W. Worst-case rounding error of the sum is depth * u * sum|terms|
/// (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., 4.2).
/// The order in which a variant sums a column (dW, dgamma) over the M rows,
/// when it fixes one: row i goes to CTA i % ctas, each CTA adds its rows
/// serially in row order (an fma chain from 0), then the CTA partials are
/// added serially in CTA order (groups == 1), or in `groups` interleaved
/// serial chains (CTA c into chain c % groups) whose results are added
/// serially in chain order. Knowing it, the oracle bounds the sum's rounding
/// error by the exact partial sums of that very tree (oracles/column_sum.h),
/// far below depth * u * sum|terms| when the terms cancel as random signs do.
struct ColumnOrder {
  int64_t ctas = 1;
  int groups = 1;
  bool operator==(const ColumnOrder& o) const { return ctas == o.ctas && groups == o.groups; }
};

struct ReductionDepths {
  int64_t row = 1;  // reductions along a row (over N)
  int64_t col = 1;  // reductions down a column (over M), e.g. dW
  // Where the variant fixes the order of its column sums, the orders a
  // launch of this shape may take (the plan depends on pointer alignment);
  // empty where it does not (atomics: arrival order).
  std::vector<ColumnOrder> col_orders;
  // The row mean is one correctly rounded division of a plain fp32 sum by
  // N, so a row whose every partial sum is exact has a mean off by that one
  // rounding only. ulpcheck's own kernels declare it; a black box need not
  // (sum * (1/N) rounds twice, Triton's `/` is an approximate divide,
  // Welford rounds at every step).
  bool mean_is_rounded_quotient = false;
  // The row mean is a plain fp32 sum of the row's values (any order) divided
  // by N within 2 ulp or multiplied by fl(1/N): a black box's declaration
  // (plugin contract ULPCHECK_MEAN_OF_PLAIN_SUM, Python mean_of_plain_sum).
  // Not a sum of pre-scaled values x_j / N, not a running mean.
  bool mean_of_plain_sum = false;
  // The statistics are two-pass: one mean, then the sum of (x - mean)^2 with
  // that same mean subtracted from every x. Without it the LayerNorm budget
  // allows running means (Welford, Chan's merges: oracles/layernorm.cpp).
  bool two_pass_statistics = false;
  // The shape of running-means statistics, where a variant declares it
  // (Python running_means=(lanes, vector, levels), PyTorch's CUDA LayerNorm):
  // chains of at most running_chain elements, each Welford's update of one
  // element at a time, then a tree of merges at most running_merges levels
  // high. 0: not declared (any tree of merges of the row depth's height).
  // The budget is then the derivation's structured one (oracles/layernorm.cpp,
  // "Running means of a declared shape").
  int64_t running_chain = 0;
  int64_t running_merges = 0;
  // ... and every merge takes the update form, mean_a + (mean_b - mean_a) w
  // (an empty side exact), so two equal means merge exactly: a constant
  // row's statistics are then exact (Python running_merges="update", or
  // "update_unless_vectorized" on rows the vector does not divide).
  bool running_update_merges = false;
  // LayerNorm: y = (x - mean) rstd gamma + beta is formed from the very mean
  // and rstd the forward saves (x - mean and each product rounded once in
  // fp32), a two-pass variance from that saved mean, and the backward
  // rebuilds x-hat as (x - mean) rstd from the statistics it is given. The
  // judge then also bounds y, rstd and dx about the values the run's own
  // statistics give (oracles/layernorm.cpp, "Judged on the saved
  // statistics"). Python uses_saved_statistics, plugin contract
  // ULPCHECK_USES_SAVED_STATISTICS. PyTorch's CPU LayerNorm folds the mean
  // into a bias (x * (rstd gamma) + (beta - mean rstd gamma)) and must not.
  bool uses_saved_statistics = false;
  // > 0: the row depth is the statistical check's effective depth
  // gamma~_D(lambda) / u at this lambda (oracles/probabilistic.h), below the
  // rigorous one: a bound built as a sum of roundings with coefficients may
  // then add them as Azuma's inequality does (LayerNorm's running means).
  double row_lambda = 0;
};

/// The statistical check's model of the incoming gradient dy, whose column
/// sums (dgamma, dbeta) an oracle may bound by it (oracles/probabilistic.h,
/// "Column sums of a random gradient"): its elements drawn independently,
/// each within dy_bound of zero and of mean within dy_bias of zero. Set only
/// in a black box's contracts, by an op that opts in: the oracle then gives
/// those column sums a statistical budget beside the one the depths give
/// (dy_bound 0: not set).
struct RandomGradient {
  double dy_bound = 0, dy_bias = 0;
  bool set() const { return dy_bound > 0; }
};

/// What a kernel promises about its arithmetic: the precision it accumulates
/// in (u_acc of the budget) and the shape of its reductions.
struct AccuracyContract {
  DType accumulation = DType::F32;
  ReductionDepths depths;
  bool column_reduction_ftz = false;  // see Contracts::column_reduction_ftz
  RandomGradient random_gradient;     // the statistical check's, where set
};

}  // namespace ulpcheck
