// MPFR oracle of RMSNorm forward and backward, and the error budget of every
// output element. The derivation of the budget is in rmsnorm.cpp.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/accuracy.h"
#include "core/datagen.h"
#include "core/norm_spec.h"
#include "core/parallel.h"
#include "oracles/column_sum.h"
#include "oracles/double_word.h"
#include "oracles/oracle_mode.h"
#include "oracles/reference.h"

namespace ulpcheck {

struct RmsNormInputs {
  const HostMatrix& x;   // M x N, row stride ld
  const HostMatrix& w;   // 1 x N, in the spec's weight dtype (dw's too)
  const HostMatrix& dy;  // M x N, row stride ld
  float eps;
  Spec spec;                      // rounding points and weight offset (the weight dtype is w's)
  const HostMatrix* b = nullptr;  // 1 x N in w's dtype where the spec has a bias: y = xhat (offset + w) + b
  // y's dtype where it is not x's: allreduce_rmsnorm normalises an fp32
  // residual_out (res=fp32) into activations of its own dtype.
  std::optional<DType> y_dtype;
  // Fused add + RMSNorm's backward (kernels/fused_add_rmsnorm): the gradient
  // reaching residual_out, M x N, added to every dx (one fp32 add), and the
  // same sum again as dresidual in the residual's dtype.
  const HostMatrix* dx_addend = nullptr;
  std::optional<DType> dresidual_dtype;
  // The rows rstd is taken of where they are not x's: quack's fused add
  // normalises the fp32 sum but saves the rounded residual_out, its backward
  // reading x-hat = residual_out rstd(fp32 sum). M x N like x.
  const HostMatrix* rstd_of = nullptr;
};

struct RmsNormReference {
  ReferenceTensor y, rstd, dx, dw;
  ReferenceTensor db;         // under the spec's bias (kRmsBias): sum_i dy_ij in w's dtype; else empty
  ReferenceTensor dresidual;  // with dresidual_dtype: dx's exact values in that dtype; else empty
};

/// Exact y, rstd (fp32), dx and dw of the spec, with budgets for a kernel
/// that honours `contract`. Parallel over rows; the result does not depend on
/// the number of threads.
/// The oracle of the process's mode (oracles/oracle_mode.h): the certified
/// fast path, MPFR only, or both compared.
RmsNormReference rmsnormReference(const RmsNormInputs& in, const AccuracyContract& contract, ThreadPool& pool,
                                  OracleMode mode);

/// As rmsnormReference, but y, dx and dresidual streamed
/// (ReferenceTensor::rows_from, oracles/reference.h): a sweep over the rows
/// keeps rstd and the column sums only, and the judge asks for y's, dx's and
/// dresidual's rows a block at a time, made again by the same arithmetic.
/// For a case whose reference would not fit in memory held whole: the
/// matrices `in` refers to must outlive the reference (an op's cached
/// inputs), or be among `owned`, which the rows keep. Under
/// OracleMode::Audit the reference is held (the audit compares whole tensors).
RmsNormReference rmsnormReferenceStreamed(const RmsNormInputs& in, const AccuracyContract& contract, ThreadPool& pool,
                                          OracleMode mode, std::vector<std::shared_ptr<const HostMatrix>> owned = {});

/// Every value at 160 bits (256 for dW) in MPFR.
RmsNormReference rmsnormReferenceMpfr(const RmsNormInputs& in, const AccuracyContract& contract, ThreadPool& pool);

/// Double-word arithmetic with error bounds, MPFR where they do not decide
/// an element: bitwise rmsnormReferenceMpfr's result (rmsnorm.cpp). Counts
/// go to `counts` if given; `widen` multiplies every certified interval
/// (1; more forces fallbacks, to test them).
RmsNormReference rmsnormReferenceFast(const RmsNormInputs& in, const AccuracyContract& contract, ThreadPool& pool,
                                      FastOracleCounts* counts = nullptr, double widen = 1.0);

// ---------------------------------------------------------------------------
// Pieces of the fast path for the GPU oracle (oracles/rmsnorm_device.h),
// which makes the pass over all rows on the device and hands the host what
// is left: rows it did not decide, and dW from its chunk sums.

/// The rstd of rows `rows` of in.x from 160 bits, as double words within
/// 2^-104 of it (relative): what the fast path's dW sums use for a row the
/// double words did not decide.
std::vector<dw::DW> rmsnormRstdWords(const RmsNormInputs& in, const AccuracyContract& contract,
                                     const std::vector<int64_t>& rows);

/// dW of the spec (plain rounding) from a pass over all rows made elsewhere:
/// the chunks' sums and the ordered bounds of contract.depths.col_orders
/// (empty where the column reduction flushes subnormals or fixes no order).
/// Only in.w and the shapes of in.x and in.dy are read; a column the chunk
/// sums do not decide is summed by MPFR over whole(), the case's inputs.
ReferenceTensor rmsnormDwFromPass(const RmsNormInputs& in, const AccuracyContract& contract,
                                  const mp::WordColumnFold& chunks, const std::vector<mp::OrderedColumnBound>& ordered,
                                  double widen, const std::function<const RmsNormInputs&()>& whole,
                                  FastOracleCounts* counts);

}  // namespace ulpcheck
