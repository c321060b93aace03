// Where the errors of a tensor lie, in buckets that add up across blocks,
// cases and worker processes: reports draw them (histograms, a heatmap over
// the tensor, error against the element's scale) and take percentiles from
// them, without keeping every element.
//
// Two measures of an element's error:
//   err/budget: |got - exact| over its budget (<= 1 passes);
//   ulp@scale:  |got - exact| in units in the last place, in the output
//               dtype, of the element's scale: max(|exact|, the size of the
//               terms it is made of, ReferenceTensor::magnitude). Unlike
//               ULPs of the exact value's own binade, this does not blow up
//               where a result cancels to nearly zero (dx, a column sum of
//               terms of both signs), so it reads the same across elements:
//               0.5 is a correctly rounded result, 3 is three units of the
//               precision the element's terms were computed in. An element
//               whose value and terms are all zero has no scale and no
//               ulp@scale (its err/budget is counted).
#pragma once

#include <array>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/error_buckets.h"

namespace ulpcheck {

struct ErrorDistribution {
  // The buckets: core/error_buckets.h.
  static constexpr int kPerOctave = error_buckets::kPerOctave;
  static constexpr int kRatioLow = error_buckets::kRatioLow, kRatioHigh = error_buckets::kRatioHigh;
  static constexpr int kUlpLow = error_buckets::kUlpLow, kUlpHigh = error_buckets::kUlpHigh;
  static constexpr int kRatioBuckets = error_buckets::kRatioBuckets;
  static constexpr int kUlpBuckets = error_buckets::kUlpBuckets;
  static constexpr int kGrid = error_buckets::kGrid;
  static constexpr int kScaleLow = error_buckets::kScaleLow, kScaleHigh = error_buckets::kScaleHigh;

  int64_t count = 0;
  double max_ulp_at_scale = 0;
  std::array<int64_t, kRatioBuckets> ratio{};
  std::array<int64_t, kUlpBuckets> ulp_at_scale{};
  std::array<float, kGrid * kGrid> worst_where{};
  std::array<int64_t, kScaleHigh - kScaleLow> scale_count{};
  std::array<float, kScaleHigh - kScaleLow> scale_worst{};

  /// One element: its err/budget and ulp@scale, its scale, and its place
  /// (row and column over the tensor's rows and columns, each in [0, 1)).
  void add(double ratio_value, double ulp_value, double scale, double row_fraction, double col_fraction);
  void merge(const ErrorDistribution& o);

  /// The upper edge of the bucket holding the q-quantile (q in [0, 1]) of
  /// err/budget or of ulp@scale: within a quarter of an octave above it.
  double ratioQuantile(double q) const;
  double ulpQuantile(double q) const;
  /// A bucket's upper edge (and lower, for plots).
  static double upperEdge(int bucket, int low_octave, int buckets);
  static double lowerEdge(int bucket, int low_octave);

  /// Sparse JSON (only what is not zero), and back.
  nlohmann::json toJson() const;
  static ErrorDistribution fromJson(const nlohmann::json& j);
};

}  // namespace ulpcheck
