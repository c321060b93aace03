// Bitwise comparison of outputs: of two runs (determinism, batch invariance,
// fused vs unfused) or of two tensors of one run (rank consistency).
#pragma once

#include <functional>
#include <string>

#include "properties/property.h"

namespace ulpcheck {

struct BitwiseDiff {
  int64_t differing = 0;
  std::optional<Finding> first;  // tensor, row and col of a's element; got = b's value, exact = a's
};

/// Adds the differences between a and b (columns [0, cols)) to d. `row_map(r)`
/// gives the row of b that corresponds to row r of a, or -1 to skip row r.
void compareTensors(const OutputTensor& a, const OutputTensor& b, BitwiseDiff& d,
                    const std::function<int64_t(int64_t)>& row_map = nullptr);

/// Compares the output tensors present in both runs (those `include` accepts,
/// when given). With a row map only per-row tensors are compared.
BitwiseDiff compareBitwise(const RunResult& a, const RunResult& b,
                           const std::function<int64_t(int64_t)>& row_map = nullptr,
                           const std::function<bool(const std::string&)>& include = nullptr);

}  // namespace ulpcheck
