// LayerNorm's use of the shared row plan (kernels/common/row_plan.h): the
// backward's workspace and the reduction depths of a launch. Both dgamma and
// dbeta are column sums finished like RMSNorm's Separate dW: per-CTA fp32
// partials, then a fixed-order second kernel.
#pragma once

#include <cstddef>

#include "core/accuracy.h"
#include "kernels/common/row_launch.h"
#include "kernels/common/row_plan.h"

namespace ulpcheck::layernorm_plan {
using namespace row_plan;

/// Each CTA's workspace row holds its dgamma partial, then its dbeta partial.
inline int64_t workspaceLd(int64_t N) { return 2 * partialLd(N); }

inline size_t workspaceBytes(const RowShape& s, const LaunchEnv& env) {
  return size_t(maxBackwardCtas(s, env)) * size_t(workspaceLd(s.N)) * sizeof(float);
}

/// Row sums (mean, variance, and the backward's two) all follow the row plan;
/// dgamma and dbeta the Separate column reduction.
inline ReductionDepths depths(const RowShape& s, const LaunchEnv& env) {
  return reductionDepths(s, env, DwStrategy::Separate);
}

}  // namespace ulpcheck::layernorm_plan
