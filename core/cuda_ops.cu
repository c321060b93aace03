#include "core/cuda_ops.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "core/buffer.h"
#include "core/case_spec.h"
#include "core/cuda_check.h"
#include "core/rng.h"

namespace ulpcheck {

namespace {
template <typename Word>
__global__ void fillWords(Word* p, size_t n, Word value) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = value;
}

constexpr int kInspectBatch = 64;  // blocks per launch (passed by value)

struct InspectBatch {
  cudaops::BlockView blocks[kInspectBatch];
};

// blockIdx.y: which block; every CTA adds to its digest, CTA 0 counts its
// damaged canary bytes. out[2 b] digest, out[2 b + 1] damaged bytes.
__global__ void inspectKernel(InspectBatch batch, size_t red_zone, unsigned char canary, unsigned long long* out) {
  const cudaops::BlockView v = batch.blocks[blockIdx.y];
  const auto* base = static_cast<const unsigned char*>(v.base);
  const unsigned char* p = base + red_zone;
  const size_t bytes = v.payload_bytes;
  const size_t words = (bytes + 7) / 8;
  unsigned long long sum = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t w = 0;
    if (8 * i + 8 <= bytes) {
      w = reinterpret_cast<const uint64_t*>(p)[i];  // payloads are 256-byte aligned
    } else {
      for (size_t k = 0; k < 8 && 8 * i + k < bytes; ++k) w |= uint64_t(p[8 * i + k]) << (8 * k);
    }
    sum += digestTerm(w, i);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if ((threadIdx.x & 31) == 0) atomicAdd(&out[2 * blockIdx.y], sum);
  if (blockIdx.x == 0) {
    unsigned long long bad = 0;
    for (size_t k = threadIdx.x; k < 2 * red_zone; k += blockDim.x) {
      const size_t at = k < red_zone ? k : red_zone + bytes + (k - red_zone);
      bad += base[at] != canary;
    }
    for (int offset = 16; offset > 0; offset /= 2) bad += __shfl_down_sync(0xffffffffu, bad, offset);
    if ((threadIdx.x & 31) == 0 && bad) atomicAdd(&out[2 * blockIdx.y + 1], bad);
  }
}

// Pinned staging for downloads: a pageable cudaMemcpy is several times
// slower, and every run downloads its outputs.
constexpr size_t kStagingBytes = size_t{8} << 20;

struct Staging {
  void* pinned = nullptr;
  Staging() {
    if (cudaHostAlloc(&pinned, kStagingBytes, cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();
      pinned = nullptr;  // then downloads go pageable
    }
  }
  // Never freed: at exit the CUDA runtime may already be gone.
};
}  // namespace

namespace cudaops {

void* allocate(size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw OutOfMemory(fmt::format("cannot allocate {:.3f} GiB on the GPU ({:.3f} GiB free of {:.3f})",
                                  bytes / 1073741824.0, free_b / 1073741824.0, total_b / 1073741824.0));
  }
  if (e != cudaSuccess) throwCudaError(e, "cudaMalloc", __FILE__, __LINE__);
  return p;
}

void release(void* p) noexcept { cudaFree(p); }

void* allocateOnStream(size_t bytes) {
  constexpr uint64_t kKeptBytes = uint64_t{256} << 20;
  thread_local int configured = -1;  // the device whose pool this thread set
  const int device = currentDevice();
  if (configured != device) {
    cudaMemPool_t pool;
    ULPCHECK_CUDA(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t kept = kKeptBytes;  // by default the pool gives back all it holds at every synchronisation
    ULPCHECK_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &kept));
    configured = device;
  }
  void* p = nullptr;
  const cudaError_t e = cudaMallocAsync(&p, std::max<size_t>(bytes, 1), cudaStreamPerThread);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it
    throw OutOfMemory(fmt::format("cannot allocate {:.3f} GiB of scratch on the GPU", bytes / 1073741824.0));
  }
  if (e != cudaSuccess) throwCudaError(e, "cudaMallocAsync", __FILE__, __LINE__);
  return p;
}

void releaseOnStream(void* p) noexcept { cudaFreeAsync(p, cudaStreamPerThread); }

void setBytes(void* p, uint8_t value, size_t bytes) { ULPCHECK_CUDA(cudaMemset(p, value, bytes)); }

void fillPattern(void* p, size_t bytes, uint32_t pattern, int element_bytes) {
  const size_t n = bytes / element_bytes;
  if (n == 0) return;
  if (element_bytes == 1) {  // fp8: a byte an element
    ULPCHECK_CUDA(cudaMemset(p, int(pattern & 0xff), bytes));
    return;
  }
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>((n + 255) / 256, 4096));
  if (element_bytes == 4) fillWords<uint32_t><<<blocks, 256>>>(static_cast<uint32_t*>(p), n, pattern);
  else fillWords<uint16_t><<<blocks, 256>>>(static_cast<uint16_t*>(p), n, static_cast<uint16_t>(pattern));
  ULPCHECK_CUDA_LAUNCH("fillWords");
}

void copyToDevice(void* dst, const void* src, size_t bytes) {
  ULPCHECK_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void copyToHost(void* dst, const void* src, size_t bytes) {
  thread_local Staging staging;
  if (bytes < (size_t{64} << 10) || !staging.pinned) {
    ULPCHECK_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return;
  }
  for (size_t done = 0; done < bytes; done += kStagingBytes) {
    const size_t n = std::min(kStagingBytes, bytes - done);
    ULPCHECK_CUDA(cudaMemcpy(staging.pinned, static_cast<const char*>(src) + done, n, cudaMemcpyDeviceToHost));
    std::memcpy(static_cast<char*>(dst) + done, staging.pinned, n);
  }
}

void inspectBlocks(const BlockView* blocks, size_t n, size_t red_zone, uint8_t canary, uint64_t* digests,
                   uint64_t* damaged) {
  thread_local unsigned long long* out = nullptr;  // 2 kInspectBatch words of device memory per thread, kept
  thread_local int out_device = -1;
  const int device = currentDevice();
  if (!out || out_device != device) {
    ULPCHECK_CUDA(cudaMalloc(&out, 2 * kInspectBatch * sizeof *out));
    out_device = device;
  }
  for (size_t first = 0; first < n; first += kInspectBatch) {
    const size_t count = std::min<size_t>(kInspectBatch, n - first);
    InspectBatch batch{};
    size_t longest = 0;
    for (size_t b = 0; b < count; ++b) {
      batch.blocks[b] = blocks[first + b];
      longest = std::max(longest, blocks[first + b].payload_bytes);
    }
    ULPCHECK_CUDA(cudaMemset(out, 0, 2 * count * sizeof *out));
    const unsigned ctas = static_cast<unsigned>(std::clamp<size_t>((longest / 8 + 255) / 256, 1, 256));
    inspectKernel<<<dim3(ctas, unsigned(count)), 256>>>(batch, red_zone, canary, out);
    ULPCHECK_CUDA_LAUNCH("inspectKernel");
    unsigned long long host[2 * kInspectBatch];
    ULPCHECK_CUDA(cudaMemcpy(host, out, 2 * count * sizeof *out, cudaMemcpyDeviceToHost));
    for (size_t b = 0; b < count; ++b) {
      digests[first + b] = host[2 * b];
      damaged[first + b] = host[2 * b + 1];
    }
  }
}

std::string ipcHandle(void* base) {
  cudaIpcMemHandle_t h;
  ULPCHECK_CUDA(cudaIpcGetMemHandle(&h, base));
  std::string hex;
  for (unsigned char c : h.reserved) hex += fmt::format("{:02x}", c);
  return hex;
}

void* openIpcHandle(const std::string& hex) {
  cudaIpcMemHandle_t h;
  if (hex.size() != 2 * sizeof h.reserved) throw std::invalid_argument("malformed CUDA IPC handle");
  for (size_t i = 0; i < sizeof h.reserved; ++i) h.reserved[i] = char(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  void* p = nullptr;
  ULPCHECK_CUDA(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
  return p;
}

void closeIpcHandle(void* p) noexcept { cudaIpcCloseMemHandle(p); }

int currentDevice() {
  int d = 0;
  ULPCHECK_CUDA(cudaGetDevice(&d));
  return d;
}

void setDevice(int device) { ULPCHECK_CUDA(cudaSetDevice(device)); }

void enablePeerAccess(int devices) {
  static std::mutex mutex;
  static int enabled = 1;  // devices [0, enabled) already see each other
  std::lock_guard<std::mutex> lock(mutex);
  if (devices <= enabled) return;
  DeviceScope keep(currentDevice());
  for (int a = 0; a < devices; ++a)
    for (int b = 0; b < devices; ++b) {
      if (a == b || (a < enabled && b < enabled)) continue;
      int can = 0;
      ULPCHECK_CUDA(cudaDeviceCanAccessPeer(&can, a, b));
      if (!can) throw CaseNotRunnableHere(fmt::format("GPU {} cannot access GPU {}'s memory (no peer access)", a, b));
      setDevice(a);
      const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
      else if (e != cudaSuccess) throwCudaError(e, "cudaDeviceEnablePeerAccess", __FILE__, __LINE__);
    }
  enabled = devices;
}

}  // namespace cudaops

const DeviceInfo& queryDevice() {
  static const DeviceInfo info = [] {
    DeviceInfo d;
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError();
      // Without a GPU the runtime says its driver is "insufficient", which
      // sends people looking for a driver upgrade: say what is missing.
      std::error_code ec;
      const bool driver = std::filesystem::exists("/proc/driver/nvidia/version", ec);
      d.reason = driver
                     ? fmt::format("no usable CUDA device ({}: {})", cudaGetErrorName(e), cudaGetErrorString(e))
                     : fmt::format("no GPU: this machine has no NVIDIA driver loaded (no /proc/driver/nvidia), so no "
                                   "CUDA device ({})",
                                   cudaGetErrorName(e));
      return d;
    }
    if (count == 0) {
      d.reason = "no CUDA device present";
      return d;
    }
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || cudaSetDevice(0) != cudaSuccess) {
      cudaGetLastError();
      d.reason = "CUDA device 0 cannot be opened";
      return d;
    }
    d.available = true;
    d.count = count;
    d.name = prop.name;
    d.sm_count = prop.multiProcessorCount;
    d.cc_major = prop.major;
    d.cc_minor = prop.minor;
    cudaMemGetInfo(&d.free_bytes, &d.total_bytes);
    return d;
  }();
  return info;
}

bool builtWithCuda() { return true; }

namespace {
/// Waits for this thread's stream where its case shares the GPU with others
/// (SharedGpuScope), for the whole device otherwise.
cudaError_t synchronizeOwnWork() {
  return sharesGpu() ? cudaStreamSynchronize(cudaStreamPerThread) : cudaDeviceSynchronize();
}
}  // namespace

void deviceSynchronize(const char* what) {
  const cudaError_t e = synchronizeOwnWork();
  if (e != cudaSuccess) throwCudaError(e, what, __FILE__, __LINE__);
  const cudaError_t late = cudaGetLastError();
  if (late != cudaSuccess) throwCudaError(late, what, __FILE__, __LINE__);
}

std::string synchronizeVariant(const char* what) {
  const std::string from_worker = std::exchange(workerUncheckedLaunches(), {});
  const cudaError_t e = synchronizeOwnWork();
  if (e != cudaSuccess) throwCudaError(e, what, __FILE__, __LINE__);
  const cudaError_t late = cudaGetLastError();
  if (late == cudaSuccess) return from_worker;
  if (isStickyCudaError(late)) throwCudaError(late, what, __FILE__, __LINE__);
  return fmt::format("{}{}: a kernel launch failed with {} ({}) and the variant did not check it",
                     from_worker.empty() ? "" : from_worker + "; ", what, cudaGetErrorName(late),
                     cudaGetErrorString(late));
}

}  // namespace ulpcheck
