// Schedule perturbation for determinism runs: a concurrent load on another
// stream, so the kernel under test finds a different set of SMs busy on every
// run and its CTAs are scheduled (and, for atomics, arrive) in different
// orders. Without it, back-to-back runs on an idle GPU tend to repeat one
// schedule and hide order-dependent results. Defined in schedule_noise.cu when
// the build has CUDA, and in schedule_noise_none.cpp otherwise.
#pragma once

#include "core/buffer.h"

namespace ulpcheck {

/// While alive, a load kernel of pseudo-random shape (CTA count, threads,
/// shared memory, per-CTA spin time, with or without a stream of stores
/// through the memory system; different on every construction) runs on
/// a non-blocking stream of the calling thread's own, concurrently with the
/// kernels the thread launches on its default stream. Construct it right
/// before launching the kernels under test: the load is short (at most a few
/// hundred microseconds per CTA wave).
class ScheduleNoise {
 public:
  /// Only CUDA kernels have a schedule to perturb; host ports run in order.
  static bool applies(bool enabled, Backend backend) { return enabled && backend == Backend::Cuda; }

  /// Launches the load when applies(enabled, backend); `sm_count` sizes it.
  ScheduleNoise(bool enabled, Backend backend, int sm_count);
  /// Waits for the load; reports its CUDA error unless another exception is
  /// already unwinding the stack (that one says more).
  ~ScheduleNoise() noexcept(false);

  ScheduleNoise(const ScheduleNoise&) = delete;
  ScheduleNoise& operator=(const ScheduleNoise&) = delete;

 private:
  bool launched_ = false;
  void* stream_ = nullptr;  // cudaStream_t of the load
  int uncaught_at_launch_ = 0;
};

}  // namespace ulpcheck
