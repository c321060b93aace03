// The buckets of ErrorDistribution (properties/error_distribution.h) as
// functions the host judge and the GPU judge (oracles/rmsnorm_device.cu)
// both call, so an element lands in the same bucket on either side.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/hd.h"

namespace ulpcheck::error_buckets {

// Log buckets, four per octave (quarters of the significand: 1, 1.25, 1.5,
// 1.75), between 2^low and 2^high; bucket 0 holds exact zeros, bucket 1
// what lies below 2^low, the last what lies at or above 2^high (infinities
// included).
inline constexpr int kPerOctave = 4;
inline constexpr int kRatioLow = -24, kRatioHigh = 8;
inline constexpr int kUlpLow = -8, kUlpHigh = 24;
ULPCHECK_HD constexpr int bucketCount(int low_octave, int high_octave) {
  return (high_octave - low_octave) * kPerOctave + 3;
}
inline constexpr int kRatioBuckets = bucketCount(kRatioLow, kRatioHigh);
inline constexpr int kUlpBuckets = bucketCount(kUlpLow, kUlpHigh);
// The worst err/budget over a kGrid x kGrid partition of the tensor's rows
// and columns (relative positions, so shapes of all sizes add up).
inline constexpr int kGrid = 16;
// Error against scale: octaves 2^kScaleLow .. 2^kScaleHigh (clamped).
inline constexpr int kScaleLow = -160, kScaleHigh = 130;
inline constexpr int kScaleOctaves = kScaleHigh - kScaleLow;

/// The bucket of x >= 0 (or NaN, counted above the range), from the bits:
/// the exponent, then the top two bits of the significand.
ULPCHECK_HD inline int bucketOf(double x, int low_octave, int high_octave) {
  const int buckets = bucketCount(low_octave, high_octave);
  if (x == 0.0) return 0;
  if (!(x < INFINITY)) return buckets - 1;  // Inf and NaN
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  const int exponent = int((bits >> 52) & 0x7ff) - 1023;  // subnormal doubles lie far below every range here
  if (exponent < low_octave) return 1;
  if (exponent >= high_octave) return buckets - 1;
  const int quarter = int((bits >> 50) & 3);
  return 2 + (exponent - low_octave) * kPerOctave + quarter;
}

/// The grid cell of an element at (row, column) fractions in [0, 1).
ULPCHECK_HD inline int gridCell(double row_fraction, double col_fraction) {
  int r = int(row_fraction * kGrid), c = int(col_fraction * kGrid);
  r = r < 0 ? 0 : r > kGrid - 1 ? kGrid - 1 : r;
  c = c < 0 ? 0 : c > kGrid - 1 ? kGrid - 1 : c;
  return r * kGrid + c;
}

/// The octave slot of a scale > 0.
ULPCHECK_HD inline int scaleSlot(double scale) {
  int octave = scale < INFINITY ? std::ilogb(scale) : kScaleHigh - 1;
  octave = octave < kScaleLow ? kScaleLow : octave > kScaleHigh - 1 ? kScaleHigh - 1 : octave;
  return octave - kScaleLow;
}

/// What the float maps hold of an err/budget: at most FLT_MAX (JSON cannot
/// carry Inf; the reports say "beyond" there).
ULPCHECK_HD inline float shownRatio(double ratio) { return ratio <= FLT_MAX ? float(ratio) : FLT_MAX; }

}  // namespace ulpcheck::error_buckets
