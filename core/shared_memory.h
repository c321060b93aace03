// Memory another process can map. Every Buffer lives in one such region, so
// a kernel run in a worker process (kernels/plugin/remote.h) reads and
// writes the very bytes the coordinator uploaded, poisoned and checks:
// on the host a memfd (opened by the worker through /proc/<pid>/fd), on the
// GPU a cudaMalloc allocation (opened through its CUDA IPC handle).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "core/buffer.h"

namespace ulpcheck {

struct SharedRegion {
  uint64_t id = 0;
  Backend where = Backend::Host;
  int fd = -1;     // host: the memfd
  int device = 0;  // GPU: the device it lives on
  char* base = nullptr;
  size_t bytes = 0;
};

/// A zero-filled host allocation in a memfd, page aligned; throws OutOfMemory.
void* allocateSharedHost(size_t bytes, const std::string& name);
void releaseSharedHost(void* base) noexcept;
/// Records a device allocation so findRegion knows it.
void registerDeviceRegion(void* base, size_t bytes, int device);
void unregisterDeviceRegion(void* base) noexcept;

/// The region holding p, and p's offset in it.
std::optional<std::pair<SharedRegion, size_t>> findRegion(const void* p);

/// Maps a host region of another process (its pid and memfd number) into
/// this one; unmap with unmapForeignHost(p, bytes). Throws std::runtime_error.
void* mapForeignHost(int pid, int fd, size_t bytes);
void unmapForeignHost(void* p, size_t bytes) noexcept;

}  // namespace ulpcheck
