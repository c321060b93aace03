// What GPU, if any, this process can use, and the CUDA error type.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace ulpcheck {

struct DeviceInfo {
  bool available = false;
  std::string reason;  // why not, when unavailable
  std::string name;
  int ordinal = 0;
  int count = 0;  // GPUs visible to this process (multi-GPU ops put one rank on each)
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t free_bytes = 0, total_bytes = 0;
};

/// Queried once; later calls return the cached answer.
const DeviceInfo& queryDevice();
bool builtWithCuda();

/// A failed CUDA call. `sticky` errors (illegal address, launch failure,
/// timeouts) corrupt the context: nothing more can run in this process.
struct CudaError : std::runtime_error {
  CudaError(const std::string& what, int code, bool sticky) : std::runtime_error(what), code(code), sticky(sticky) {}
  int code;
  bool sticky;
};

/// While one lives, the calling thread's case shares the GPU with the other
/// cases this process runs at once (CampaignOptions::concurrent_cases). Its
/// launches, copies and fills go to the thread's own default stream (CUDA
/// code is compiled with --default-stream per-thread), so deviceSynchronize
/// and synchronizeVariant wait for that stream only: waiting for the whole
/// device would wait for the other cases' kernels and schedule-perturbing
/// loads. Cases that run alone (a plugin's or a Python variant, ranks on
/// several GPUs, nightly sizes: CaseGate in harness/runner/campaign.cpp)
/// never run under one.
class SharedGpuScope {
 public:
  SharedGpuScope();
  ~SharedGpuScope();
  SharedGpuScope(const SharedGpuScope&) = delete;
  SharedGpuScope& operator=(const SharedGpuScope&) = delete;

 private:
  bool outer_;
};
/// The calling thread is inside a SharedGpuScope.
bool sharesGpu();

/// Waits for the GPU work this thread queued (all queued work, outside a
/// SharedGpuScope) and converts a pending error into CudaError.
void deviceSynchronize(const char* what);

/// Waits for a kernel variant's queued GPU work. A fault throws CudaError. A
/// failed launch the variant never checked (its error still pending: Paddle
/// PR #74055) is cleared and returned as a description, so the run's outputs
/// are still collected and judged; empty when every launch went through.
/// Includes what a worker process reported (reportWorkerUncheckedLaunch).
std::string synchronizeVariant(const char* what);

/// An unchecked launch failure a worker process found after a variant's
/// call (kernels/plugin/remote.h): the worker's CUDA context is not this
/// process's, so the next synchronizeVariant here returns it.
inline std::string& workerUncheckedLaunches() {
  static std::string pending;
  return pending;
}
inline void reportWorkerUncheckedLaunch(const std::string& what) {
  std::string& pending = workerUncheckedLaunches();
  pending += (pending.empty() ? "" : "; ") + what;
}

}  // namespace ulpcheck
