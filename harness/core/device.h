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
  CudaError(const std::string& what, int code, bool sticky)
      : std::runtime_error(what), code(code), sticky(sticky) {}
  int code;
  bool sticky;
};

/// Waits for all queued GPU work and converts a pending error into CudaError.
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
