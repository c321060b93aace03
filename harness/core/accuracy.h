// The vocabulary of the accuracy contract shared by kernels (which declare
// it) and oracles (which turn it into per-element error budgets).
#pragma once

#include <cstdint>

#include "harness/core/dtype.h"

namespace ulpcheck {

/// The longest chain of additions from any term to the result in a kernel's
/// summation tree: a blocked sum with serial chains of length L per thread,
/// then a butterfly of depth 5 and a serial pass over W warp totals, has depth
/// L + 5 + W. Worst-case rounding error of the sum is depth * u * sum|terms|
/// (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., 4.2).
struct ReductionDepths {
  int64_t row = 1;  // reductions along a row (over N)
  int64_t col = 1;  // reductions down a column (over M), e.g. dW
};

/// What a kernel promises about its arithmetic: the precision it accumulates
/// in (u_acc of the budget) and the shape of its reductions.
struct AccuracyContract {
  DType accumulation = DType::F32;
  ReductionDepths depths;
  bool column_reduction_ftz = false;  // see Contracts::column_reduction_ftz
};

}  // namespace ulpcheck
