// The LayerNorm oracle and judge on the GPU: the certified fast path of
// oracles/layernorm.cpp ("The certified fast path") run where the inputs
// and the kernel's outputs already are, judging every element of y, mean,
// rstd and dx there (and, where the variant declares it forms them from its
// saved statistics, y, rstd and dx about the values those give, as
// layernormSavedStatisticsBounds does on the host); only per-row figures,
// bucketed error distributions and the pieces of dgamma and dbeta come
// back. A row whose values the double words do not decide is left to the
// host, as the host fast path leaves it to MPFR.
//
// What makes the verdicts the host's: every exact value taken here is a
// double the interval decides (the round-to-odd exact values, the nearest
// d_j, V, r, x-hat_j, c1, c2, a - c1 - xhat c2), the same whichever order
// the sums ran in; every budget is computed from such doubles by the
// functions the host calls (oracles/layernorm_budgets.h), and the row sums
// a budget reads (sum |x|, sum x^2, sum |d|, sum d^2, sum Dd^2, the
// backward's five, the saved statistics' centers) run in column order, one
// thread adding a shared tile in order; this file is built with
// -fmad=false. Sums that only certify an interval run in a tree. What may
// differ: rms_ulp's sum of squares (added by rows here), which no verdict
// reads, and which rows and columns fall back to the host.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/accuracy.h"
#include "core/dtype.h"
#include "oracles/device_judge.h"
#include "oracles/layernorm_budgets.h"

namespace ulpcheck::gpu_oracle {

/// One LayerNorm case on the device (pointers are device memory, row stride
/// ld for x, dy, y and dx), statistics saved in fp32.
struct LayerNormDeviceCase {
  DType T = DType::BF16;  // x, dy, y, dx
  DType W = DType::BF16;  // gamma, beta
  int64_t M = 0, N = 0, ld = 0;
  const void* x = nullptr;
  const void* gamma = nullptr;  // null: 1 (affine=none)
  const void* beta = nullptr;   // null: 0 (affine=nobias, none)
  const void* dy = nullptr;
  const void* y = nullptr;
  const float* mean = nullptr;
  const float* rstd = nullptr;
  const void* dx = nullptr;
  layernorm_budget::Constants k;
  // ReductionDepths::uses_saved_statistics, with the run's mean and rstd to
  // read: y, dx (and rstd, two-pass) also judged about their values.
  bool on_saved_statistics = false;
  double widen = 1;  // multiplies every certified interval (1; more forces host fallbacks, to test them)
};

inline constexpr int kLayerNormTensors = 4;  // y, mean, rstd, dx
inline constexpr const char* kLayerNormTensorNames[kLayerNormTensors] = {"y", "mean", "rstd", "dx"};

/// A row's statistics as double words with their bounds (infinite where the
/// words cannot be trusted: dgamma's terms are then undecided), and what
/// its budgets read (decided rows; the host fills in the rows it computes).
struct LayerNormRowWords {
  double mean_h = 0, mean_l = 0, b_mean = INFINITY, r_h = 0, r_l = 0, b_r = INFINITY;
  double r = 0, r_hi = 0, Dr = 0, Dm = 0;  // RowDoubles' r, r_hi, Dr, Dm
  double mean_odd = 0, rstd_odd = 0;       // the exact statistics, rounded to odd
};

struct LayerNormRowsJudged {
  std::vector<uint8_t> undecided;                                  // per row: 1 where the host must compute it
  std::array<std::vector<RowFigures>, kLayerNormTensors> figures;  // per tensor and row (zeros where undecided)
  std::array<Distribution, kLayerNormTensors> distribution;        // over the decided rows
  std::vector<LayerNormRowWords> words;                            // per row
  double seconds = 0;
};

/// Certifies and judges y, mean, rstd and dx of every row.
LayerNormRowsJudged judgeLayerNormRows(const LayerNormDeviceCase& c);

/// dgamma's or dbeta's chunk sums as the host fast path forms them
/// (mp::WordColumnChunk, chunk k holding rows [M k / chunks, M (k + 1) /
/// chunks)): arrays of chunks x N, chunk major. dbeta's also carries each
/// column's smallest ulp of dy (over all chunks).
struct ColumnChunkSums {
  int64_t chunks = 0;
  std::vector<double> sum_hi, sum_lo, err, abs_terms, gain, sq_terms;
  std::vector<double> smallest_ulp;  // dbeta: per column
};

/// dgamma's: each row's words (host rows' r, r_hi, Dr, Dm set by the host),
/// and for the rows the host computed (host_row[i] = k >= 0, else -1) their
/// nearest x-hat and Dx (rows k of N each).
ColumnChunkSums dgammaChunkSums(const LayerNormDeviceCase& c, int64_t chunks,
                                const std::vector<LayerNormRowWords>& rows, const std::vector<int64_t>& host_row,
                                const std::vector<double>& host_xhat, const std::vector<double>& host_dxh);

/// dbeta's (the column sums of dy).
ColumnChunkSums dbetaChunkSums(const LayerNormDeviceCase& c, int64_t chunks);

/// The padded sum_v |s_v| of each column in `order` (mp::orderedColumnBound),
/// leaves as the host's: dgamma's dy (x - mean) rstd from each row's exact
/// statistics (round-to-odd doubles), with its error; dbeta's dy, exact.
std::vector<double> dgammaOrderedPartialAbs(const LayerNormDeviceCase& c, const ColumnOrder& order, int64_t depth,
                                            const std::vector<double>& mean, const std::vector<double>& rstd);
std::vector<double> dbetaOrderedPartialAbs(const LayerNormDeviceCase& c, const ColumnOrder& order, int64_t depth);

}  // namespace ulpcheck::gpu_oracle
