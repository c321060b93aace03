// MPFR oracle of RMSNorm forward and backward, and the error budget of every
// output element. The derivation of the budget is in rmsnorm.cpp.
#pragma once

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
};

struct RmsNormReference {
  ReferenceTensor y, rstd, dx, dw;
};

/// Exact y, rstd (fp32), dx and dw of the spec, with budgets for a kernel
/// that honours `contract`. Parallel over rows; the result does not depend on
/// the number of threads.
RmsNormReference rmsnormReference(const RmsNormInputs& in, const AccuracyContract& contract, ThreadPool& pool);

}  // namespace ulpcheck
