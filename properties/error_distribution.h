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
//               precision the element's terms were computed in.
#pragma once

#include <array>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace ulpcheck {

struct ErrorDistribution {
  // Log buckets, four per octave (quarters of the significand: 1, 1.25,
  // 1.5, 1.75), between 2^kLow and 2^kHigh; bucket 0 holds exact zeros,
  // bucket 1 what lies below 2^kLow, the last what lies at or above 2^kHigh
  // (infinities included).
  static constexpr int kPerOctave = 4;
  static constexpr int kRatioLow = -24, kRatioHigh = 8;
  static constexpr int kUlpLow = -8, kUlpHigh = 24;
  static constexpr int kRatioBuckets = (kRatioHigh - kRatioLow) * kPerOctave + 3;
  static constexpr int kUlpBuckets = (kUlpHigh - kUlpLow) * kPerOctave + 3;
  // The worst err/budget over a kGrid x kGrid partition of the tensor's
  // rows and columns (relative positions, so shapes of all sizes add up).
  static constexpr int kGrid = 16;
  // Error against scale: elements and worst err/budget per octave of the
  // element's scale, 2^kScaleLow .. 2^kScaleHigh (clamped).
  static constexpr int kScaleLow = -160, kScaleHigh = 130;

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
