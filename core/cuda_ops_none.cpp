// The CPU-only build: GPU buffers and devices do not exist, and say so.
#include <string>
#include <utility>

#include "core/cuda_ops.h"
#include "core/device.h"

namespace ulpcheck {

namespace {
[[noreturn]] void noCuda(const char* what) {
  throw CudaError(
      std::string(what) + ": this build of ulpcheck has no CUDA support (nvcc was not found at configure time)", 0,
      false);
}
}  // namespace

namespace cudaops {
void* allocate(size_t) { noCuda("GPU allocation"); }
void release(void*) noexcept {}
void setBytes(void*, uint8_t, size_t) { noCuda("GPU memset"); }
void fillPattern(void*, size_t, uint32_t, int) { noCuda("GPU fill"); }
void copyToDevice(void*, const void*, size_t) { noCuda("GPU copy"); }
void copyToHost(void*, const void*, size_t) { noCuda("GPU copy"); }
void* allocateOnStream(size_t) { noCuda("GPU allocation"); }
void releaseOnStream(void*) noexcept {}
void inspectBlocks(const BlockView*, size_t, size_t, uint8_t, uint64_t*, uint64_t*) { noCuda("GPU inspection"); }
std::string ipcHandle(void*) { noCuda("CUDA IPC"); }
void* openIpcHandle(const std::string&) { noCuda("CUDA IPC"); }
void closeIpcHandle(void*) noexcept {}
int currentDevice() { return 0; }
void setDevice(int) { noCuda("GPU selection"); }
void enablePeerAccess(int) { noCuda("GPU peer access"); }
}  // namespace cudaops

const DeviceInfo& queryDevice() {
  static const DeviceInfo info = [] {
    DeviceInfo d;
    d.reason = "built without CUDA (at configure time no NVIDIA driver was loaded or nvcc was not found, or "
               "ULPCHECK_ENABLE_CUDA was OFF; -DULPCHECK_ENABLE_CUDA=ON builds the kernels)";
    return d;
  }();
  return info;
}

bool builtWithCuda() { return false; }

void deviceSynchronize(const char*) {}

std::string synchronizeVariant(const char*) { return std::exchange(workerUncheckedLaunches(), {}); }

}  // namespace ulpcheck

#include "core/datagen.h"

namespace ulpcheck {
void generateDevice(void*, const DistParams&, DType, uint64_t, TensorStream, int64_t, int64_t, int64_t, int64_t) {
  noCuda("GPU data generation");
}
}  // namespace ulpcheck
