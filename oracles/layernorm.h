// MPFR oracle of LayerNorm forward and backward, and the error budget of every
// output element. The spec is in kernels/layernorm/layernorm.h; the derivation
// of the budget is in layernorm.cpp.
#pragma once

#include "harness/core/accuracy.h"
#include "harness/core/datagen.h"
#include "harness/core/norm_spec.h"
#include "harness/core/parallel.h"
#include "oracles/reference.h"

namespace ulpcheck {

struct LayerNormInputs {
  const HostMatrix& x;      // M x N, row stride ld
  const HostMatrix& gamma;  // 1 x N, in the weight dtype (dgamma's and dbeta's too)
  const HostMatrix& beta;   // 1 x N, gamma's dtype
  const HostMatrix& dy;     // M x N, row stride ld
  float eps;
  NormSpec spec{};          // its stats: the dtype of the saved mean and rstd (the weight dtype is gamma's)
};

struct LayerNormReference {
  ReferenceTensor y, mean, rstd, dx, dgamma, dbeta;  // mean and rstd: M x 1, fp32 (or T under stats=T)
};

/// Exact values of the spec, each as a round-to-odd double, with budgets for
/// a kernel that honours `contract`. Parallel over rows; the result does not
/// depend on the number of threads.
LayerNormReference layernormReference(const LayerNormInputs& in, const AccuracyContract& contract, ThreadPool& pool);

}  // namespace ulpcheck
