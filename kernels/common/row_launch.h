// The shape and launch environment shared by the row-wise norm ops (rmsnorm,
// layernorm): M rows of N elements with row stride ld, and where a variant runs.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/norm_spec.h"

namespace ulpcheck {

struct RowShape {
  DType dtype = DType::F32;  // activations: x, dy, y, dx
  int64_t M = 1, N = 1, ld = 1;
  float eps = 1e-6f;
  Spec spec;  // the case's spec (core/spec.h): weight dtype (w, dw), rounding points, weight offset, ...
  DType wdtype() const { return weightDtype(dtype, spec); }
};

/// Where a variant runs: the device's multiprocessor count (the host port
/// emulates one), an optional CTA-count override from the case, the stream.
inline constexpr double kDefaultCallTimeoutSeconds = 300;

struct LaunchEnv {
  int sm_count = 132;
  int ctas_override = 0;
  void* stream = nullptr;  // cudaStream_t for CUDA variants
  // Run beside a schedule-perturbing load (core/schedule_noise.h):
  // the op adapter starts it for in-process variants, a worker for remote ones.
  bool perturb_schedule = false;
  // The longest one call of a variant that runs in a worker process
  // (kernels/plugin/remote.h) may take before it counts as hung: the worker
  // is killed and the call fails (a run's --case-timeout).
  double call_timeout_s = kDefaultCallTimeoutSeconds;
  // A multi-rank op's call in a rank's worker process (kernels/plugin/
  // remote.h): which rank of how many this process is, and the call's
  // generation, strictly increasing over every call of the run and the same
  // on every rank (a flag protocol's epoch: a variant that waits for its
  // peers' flags to reach it needs to reset nothing between calls).
  int rank = 0, ranks = 1;
  uint64_t generation = 0;
};

}  // namespace ulpcheck
