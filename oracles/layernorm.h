// MPFR oracle of LayerNorm forward and backward, and the error budget of every
// output element. The spec is in kernels/layernorm/layernorm.h; the derivation
// of the budget is in layernorm.cpp.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "core/accuracy.h"
#include "core/datagen.h"
#include "core/norm_spec.h"
#include "core/parallel.h"
#include "oracles/column_sum.h"
#include "oracles/oracle_mode.h"
#include "oracles/reference.h"

namespace ulpcheck {

struct LayerNormInputs {
  const HostMatrix& x;      // M x N, row stride ld
  const HostMatrix& gamma;  // 1 x N, in the weight dtype (dgamma's and dbeta's too)
  const HostMatrix& beta;   // 1 x N, gamma's dtype
  const HostMatrix& dy;     // M x N, row stride ld
  float eps;
  Spec spec{};  // its stats: the dtype of the saved mean and rstd (the weight dtype is gamma's)
};

struct LayerNormReference {
  ReferenceTensor y, mean, rstd, dx, dgamma, dbeta;  // mean and rstd: M x 1, fp32 (or T under stats=T)
};

/// Exact values of the spec, each as a round-to-odd double, with budgets for
/// a kernel that honours `contract`. Parallel over rows; the result does not
/// depend on the number of threads. The oracle of the process's mode
/// (oracles/oracle_mode.h): the certified fast path, MPFR only, or both compared.
LayerNormReference layernormReference(const LayerNormInputs& in, const AccuracyContract& contract, ThreadPool& pool,
                                      OracleMode mode);

/// As layernormReference, but y and dx streamed (ReferenceTensor::rows_from,
/// oracles/reference.h): only the statistics and the column sums are held;
/// y's and dx's rows are made again, a block at a time, when read. For a
/// case whose reference would not fit in memory held whole; `in`'s matrices
/// must outlive the result. (Audit: held whole, compared as layernormReference.)
LayerNormReference layernormReferenceStreamed(const LayerNormInputs& in, const AccuracyContract& contract,
                                              ThreadPool& pool, OracleMode mode);

/// Every value at 160 bits (256 for dgamma and dbeta) in MPFR.
LayerNormReference layernormReferenceMpfr(const LayerNormInputs& in, const AccuracyContract& contract,
                                          ThreadPool& pool);

/// Double-word arithmetic with error bounds, MPFR where they do not decide
/// an element: bitwise layernormReferenceMpfr's result (layernorm.cpp, "The
/// certified fast path"). Counts go to `counts` if given; `widen` multiplies
/// every certified interval (1; more forces fallbacks, to test them).
LayerNormReference layernormReferenceFast(const LayerNormInputs& in, const AccuracyContract& contract, ThreadPool& pool,
                                          FastOracleCounts* counts = nullptr, double widen = 1.0);

/// A few rows of a case (`in` holds only them: a GPU judge's undecided and
/// worst rows) as the fast path makes them: their y, mean, rstd and dx, and
/// per row the nearest x-hat_j and Dx_j (N each, row major) and the rstd r
/// that dgamma's magnitudes read. Statistics saved in fp32 only. Parallel
/// over rows.
struct LayerNormFastRows {
  LayerNormReference ref;  // dgamma and dbeta empty
  std::vector<double> xhat, dxh, r;
};
LayerNormFastRows layernormRowsFast(const LayerNormInputs& in, const AccuracyContract& contract, ThreadPool& pool,
                                    FastOracleCounts* counts);

/// dgamma from double-word chunk sums formed elsewhere (the GPU judge,
/// oracles/layernorm_device.h; columnChunkCount's chunking of the M rows)
/// and the bounds of the orders the contract declares, finished as the fast
/// path finishes its own: a column the sums do not decide is summed by MPFR
/// over `whole()`'s inputs (asked for only then). `shape`: x and dy need
/// only their shapes; gamma and beta are read.
ReferenceTensor layernormDgammaFromChunks(const LayerNormInputs& shape, const AccuracyContract& contract,
                                          const mp::WordColumnFold& chunks,
                                          const std::vector<mp::OrderedColumnBound>& ordered, double widen,
                                          const std::function<const LayerNormInputs&()>& whole,
                                          FastOracleCounts* counts);

/// y, rstd (two-pass statistics only) and dx bounded about what a run's
/// saved statistics give, for a variant that declares it forms them from
/// those (ReductionDepths::uses_saved_statistics; derivation in
/// layernorm.cpp, "Judged on the saved statistics"); fp32 statistics only.
/// The matrices `in` refers to must outlive the result.
std::unique_ptr<ConditionalBounds> layernormSavedStatisticsBounds(const LayerNormInputs& in,
                                                                  const AccuracyContract& contract,
                                                                  std::vector<double> saved_mean,
                                                                  std::vector<double> saved_rstd);

/// The reference's tensors in output order (y, mean, rstd, dx, dgamma, dbeta).
std::vector<const ReferenceTensor*> layernormTensors(const LayerNormReference& r);

}  // namespace ulpcheck
