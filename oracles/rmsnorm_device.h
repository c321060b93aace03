// The RMSNorm oracle and judge on the GPU: the certified fast path of
// oracles/rmsnorm.cpp ("The certified fast path") run where the inputs and
// the kernel's outputs already are, judging every element of y, rstd and
// dx there; only per-row figures, bucketed error distributions and the
// pieces of dW come back. A row whose values the double words do not
// decide is left to the host (MPFR), as the host fast path leaves it.
//
// What makes the verdicts the host's: every exact value taken here is a
// double the interval decides (the round-to-odd of the exact value, the
// nearest r and c), the same whichever order the sums ran in; every budget
// is computed from such doubles by the functions the host calls
// (oracles/rmsnorm_budgets.h), in the same order, without contracted
// multiply-adds (this file is built with -fmad=false); each element is
// judged as properties/accuracy.cpp judges it, its buckets those of
// core/error_buckets.h. The sums whose order matters to a budget
// (m's sum |a x|, dW's magnitudes, the ordered bound's partial sums) run in
// the host's order. What may differ: rms_ulp's sum of squares (added by
// rows here), which no verdict reads.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/accuracy.h"
#include "core/dtype.h"
#include "oracles/device_judge.h"

namespace ulpcheck::gpu_oracle {

/// One RMSNorm case on the device (pointers are device memory, row stride
/// ld for x, dy, y and dx), plain rounding, rstd saved in fp32, no bias.
struct RmsNormDeviceCase {
  DType T = DType::BF16;  // x, dy, y, dx
  DType W = DType::BF16;  // w
  int64_t M = 0, N = 0, ld = 0;
  float eps = 0;
  double offset = 0;  // the weight offset: the effective weight is offset + w
  const void* x = nullptr;
  const void* w = nullptr;
  const void* dy = nullptr;
  const void* y = nullptr;
  const float* rstd = nullptr;
  const void* dx = nullptr;
  // The budget's constants (rmsnorm_budget::Constants, no bias).
  DType acc = DType::F32;
  double d_row = 1, delta_r = 0, w_units = 0;
  // A black box on data the random-rounding model fits is also held to the
  // probabilistic budget (properties/accuracy.h referenceWithStatisticalBudgets):
  // the same budgets at the effective row depth.
  bool statistical = false;
  double d_row_statistical = 1, delta_r_statistical = 0;
  double widen = 1;  // multiplies every certified interval (1; more forces host fallbacks, to test them)
};

inline constexpr int kTensors = 3;  // y, rstd, dx
inline constexpr const char* kTensorNames[kTensors] = {"y", "rstd", "dx"};

struct RowsJudged {
  std::vector<uint8_t> undecided;                         // per row: 1 where the host must compute the row
  std::array<std::vector<RowFigures>, kTensors> figures;  // per tensor and row (zeros where undecided)
  std::array<Distribution, kTensors> distribution;        // over the decided rows
  // Per row, where decided: r as a double word with its relative error
  // bound, the nearest double to r, and the round-to-odd double (rstd's exact value).
  std::vector<double> r_hi, r_lo, rel_r, r_near, r_odd;
  double seconds = 0;
};

/// Certifies and judges y, rstd and dx of every row.
RowsJudged judgeRows(const RmsNormDeviceCase& c);

/// What the host fast path's Setup derives from a contract: d_row and rstd's error in units of u.
inline double rstdUnits(double d_row, double rsqrt_units) { return (d_row + 3.0) / 2.0 + rsqrt_units; }

/// dW's chunk sums as the host fast path forms them (mp::WordColumnChunk, chunk
/// k holding rows [M k / chunks, M (k + 1) / chunks)), from every row's r
/// (double word, relative bound, nearest): arrays of chunks x N, chunk major.
struct DwChunkSums {
  int64_t chunks = 0;
  std::vector<double> sum_hi, sum_lo, err, abs_terms, gain, sq_terms, spread;
};
DwChunkSums dwChunkSums(const RmsNormDeviceCase& c, int64_t chunks, const std::vector<double>& r_hi,
                        const std::vector<double>& r_lo, const std::vector<double>& rel_r,
                        const std::vector<double>& r_near);

/// The padded sum_v |s_v| of each column in `order` (mp::orderedColumnBound's
/// partial_abs, same loop), leaves dy x rstd_backward[i]; depth as
/// mp::orderedColumnShape gives it.
std::vector<double> orderedPartialAbs(const RmsNormDeviceCase& c, const ColumnOrder& order, int64_t depth,
                                      const std::vector<double>& rstd_backward);

}  // namespace ulpcheck::gpu_oracle
