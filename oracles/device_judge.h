// What a GPU judge (oracles/rmsnorm_device.h, oracles/layernorm_device.h)
// brings back of the tensors it judged on the device: per-row figures and
// bucketed error distributions, the host judge's (properties/accuracy.cpp
// judgeTensorRows) summed where the elements are.
#pragma once

#include <array>
#include <cstdint>

#include "core/error_buckets.h"
#include "oracles/rounding_bias.h"

namespace ulpcheck::gpu_oracle {

/// A tensor's figures over one row (TensorJudgment's, per row): its
/// elements' errors, and the rounding-bias statistic's sums over the row
/// (oracles/rounding_bias.h). Reduced over a CTA in two parts, each in the
/// scratch the kernels' other sums take.
struct ErrorFigures {
  double max_ratio = 0, max_ulp = 0, sum_sq_ulp = 0;
  int64_t elements = 0, finite = 0, wrong = 0, nonzero = 0, sharp = 0;
  int64_t nontrivial = 0;
  int64_t statistical_flags = 0;  // within the rigorous budget, over the probabilistic one
};
struct RowFigures : ErrorFigures {
  BiasSums bias;
};

/// ErrorDistribution's arrays (properties/error_distribution.h), as summed on the device.
struct Distribution {
  int64_t count = 0;
  double max_ulp_at_scale = 0;
  std::array<int64_t, error_buckets::kRatioBuckets> ratio{};
  std::array<int64_t, error_buckets::kUlpBuckets> ulp_at_scale{};
  std::array<float, error_buckets::kGrid * error_buckets::kGrid> worst_where{};
  std::array<int64_t, error_buckets::kScaleOctaves> scale_count{};
  std::array<float, error_buckets::kScaleOctaves> scale_worst{};
};

/// The most groups a column order may have on the device (its chains live in registers).
inline constexpr int kMaxOrderGroups = 64;

}  // namespace ulpcheck::gpu_oracle
