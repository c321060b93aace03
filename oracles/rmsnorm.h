// MPFR oracle of RMSNorm forward and backward, and the error budget of every
// output element. The derivation of the budget is in rmsnorm.cpp.
#pragma once

#include <optional>

#include "harness/core/accuracy.h"
#include "harness/core/datagen.h"
#include "harness/core/norm_spec.h"
#include "harness/core/parallel.h"
#include "oracles/reference.h"

namespace ulpcheck {

struct RmsNormInputs {
  const HostMatrix& x;   // M x N, row stride ld
  const HostMatrix& w;   // 1 x N, in the spec's weight dtype (dw's too)
  const HostMatrix& dy;  // M x N, row stride ld
  float eps;
  NormSpec spec;         // rounding points and weight offset (the weight dtype is w's)
  const HostMatrix* b = nullptr;  // 1 x N in w's dtype under spec.bias: y = xhat (offset + w) + b
  // y's dtype where it is not x's: allreduce_rmsnorm normalises an fp32
  // residual_out (res=fp32) into activations of its own dtype.
  std::optional<DType> y_dtype;
};

struct RmsNormReference {
  ReferenceTensor y, rstd, dx, dw;
  ReferenceTensor db;  // under spec.bias: sum_i dy_ij in w's dtype; else empty
};

/// Exact y, rstd (fp32), dx and dw of the spec, with budgets for a kernel
/// that honours `contract`. Parallel over rows; the result does not depend on
/// the number of threads.
RmsNormReference rmsnormReference(const RmsNormInputs& in, const AccuracyContract& contract, ThreadPool& pool);

}  // namespace ulpcheck
