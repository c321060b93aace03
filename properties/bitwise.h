// Bitwise comparison of the outputs of two runs, for the determinism and
// batch-invariance properties.
#pragma once

#include <functional>

#include "properties/property.h"

namespace ulpcheck {

struct BitwiseDiff {
  int64_t differing = 0;
  std::optional<Finding> first;
};

/// Compares output tensors present in both runs (columns [0, cols) only).
/// `row_map(r)` gives the row of `b` that corresponds to row r of `a`, or -1
/// to skip row r; only per-row tensors are compared when a row map is given.
BitwiseDiff compareBitwise(const RunResult& a, const RunResult& b,
                           const std::function<int64_t(int64_t)>& row_map = nullptr);

}  // namespace ulpcheck
