// RMSNorm's use of the shared row plan (kernels/common/row_plan.h): the
// backward's workspace layout.
#pragma once

#include <cstddef>

#include "core/accuracy.h"
#include "kernels/common/row_launch.h"
#include "kernels/common/row_plan.h"

namespace ulpcheck::rmsnorm_plan {
using namespace row_plan;

/// The backward's workspace: C rows of fp32 partials (partialLd(N) each),
/// then at 256-byte boundaries the LastBlock ticket and the Atomic fp32 dW.
struct WorkspaceLayout {
  size_t ticket_offset = 0;
  size_t dw_fp32_offset = 0;
  size_t bytes = 0;
};
WorkspaceLayout workspaceLayout(const RowShape& s, const LaunchEnv& env);
size_t workspaceBytes(const RowShape& s, const LaunchEnv& env);
}  // namespace ulpcheck::rmsnorm_plan
