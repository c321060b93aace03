// Memory operations on the GPU behind Buffer. Defined in cuda_ops.cu when the
// build has CUDA, and in cuda_ops_none.cpp (throwing a clear error) otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ulpcheck::cudaops {

void* allocate(size_t bytes);  // throws OutOfMemory
void release(void* p) noexcept;
void setBytes(void* p, uint8_t value, size_t bytes);
void fillPattern(void* p, size_t bytes, uint32_t pattern, int element_bytes);
void copyToDevice(void* dst, const void* src, size_t bytes);
void copyToHost(void* dst, const void* src, size_t bytes);
/// Scratch on the calling thread's stream (cudaMallocAsync): releasing it
/// does not synchronise the whole device as cudaFree does, which would
/// stall every other case checked at once on it. The device's pool keeps
/// up to 256 MiB of freed memory for the next use. Throws OutOfMemory.
void* allocateOnStream(size_t bytes);
void releaseOnStream(void* p) noexcept;
/// One Buffer's block on the current device: `red_zone` bytes of canaries,
/// the payload, `red_zone` more.
struct BlockView {
  const void* base = nullptr;
  size_t payload_bytes = 0;
};
/// For each block, in one launch and one download: the bytesDigest
/// (core/buffer.h) of its
/// payload and how many of its canary bytes no longer hold `canary`. A run
/// inspects all its buffers at once: on a GPU shared by several processes
/// every synchronising call waits for a time slice.
void inspectBlocks(const BlockView* blocks, size_t n, size_t red_zone, uint8_t canary, uint64_t* digests,
                   uint64_t* damaged);

/// CUDA IPC: the handle of an allocation's base (hex of cudaIpcMemHandle_t),
/// and another process opening it (on the current device) and closing it.
std::string ipcHandle(void* base);
void* openIpcHandle(const std::string& hex);
void closeIpcHandle(void* p) noexcept;

/// The calling thread's current device, and setting it (multi-GPU ops put
/// each rank's buffers and work on its own device).
int currentDevice();
void setDevice(int device);
/// Lets every pair of the first `devices` GPUs read and write each other's
/// memory (peer access); once per process, idempotent.
void enablePeerAccess(int devices);

/// Makes `device` current for its lifetime (no-op for device < 0: host).
class DeviceScope {
 public:
  explicit DeviceScope(int device) : previous_(device >= 0 ? currentDevice() : -1) {
    if (device >= 0) setDevice(device);
  }
  ~DeviceScope() {
    if (previous_ >= 0) try {
        setDevice(previous_);
      } catch (...) {
      }
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_;
};

}  // namespace ulpcheck::cudaops
