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
/// bytesDigest (harness/core/buffer.h) of device memory, computed on the GPU.
uint64_t digest(const void* p, size_t bytes);

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
    if (previous_ >= 0) try { setDevice(previous_); } catch (...) {}
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_;
};

}  // namespace ulpcheck::cudaops
