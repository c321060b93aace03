#include "core/buffer.h"

#include <bit>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/cuda_ops.h"
#include "core/memory_limit.h"
#include "core/rng.h"
#include "core/shared_memory.h"

namespace ulpcheck {

const char* backendName(Backend b) { return b == Backend::Cuda ? "cuda" : "host"; }

namespace {
void fillHostPattern(void* p, size_t bytes, uint32_t pattern, int element_bytes) {
  // Payloads are 256-byte aligned (kRedZoneBytes), so typed stores are aligned.
  if (element_bytes == 4) std::fill_n(static_cast<uint32_t*>(p), bytes / 4, pattern);
  else if (element_bytes == 2) std::fill_n(static_cast<uint16_t*>(p), bytes / 2, static_cast<uint16_t>(pattern));
  else std::memset(p, int(pattern & 0xff), bytes);  // fp8: a byte an element
}

/// Released allocations kept for the next Buffer of the same size class.
/// A case makes a dozen buffers per run and runs its kernel up to ten
/// times; cudaMalloc/cudaFree (which synchronises the device) and a fresh
/// memfd whose pages fault in one by one cost more than the kernels. A
/// reused block holds nothing of its past: every Buffer sets its red zones
/// and payload afresh (canary bytes, then poison or the uploaded input), so
/// the memory checks see exactly what a fresh allocation would show.
class BlockPool {
 public:
  /// Where the block lives, and its size class.
  using Key = std::tuple<Backend, int, size_t>;

  /// Sizes are rounded up to a quarter of their power of two (at most 25%
  /// more than asked), so batches of nearby shapes share blocks.
  static size_t sizeClass(size_t bytes) {
    const size_t step = std::max<size_t>(4096, std::bit_floor(bytes) / 4);
    return (bytes + step - 1) / step * step;
  }

  // A larger host block goes back to the system at once: held in the pool it
  // would stay in the process's memory beside the next buffers of its case
  // (a 4096 x 8192 fp32 case held its inputs' and outputs' blocks, freed,
  // beside its downloaded outputs), and mapping it afresh costs little next
  // to a case of that size. (A device block stays: cudaFree would
  // synchronise the whole device, stalling the cases checked beside it.)
  static constexpr size_t kMaxPooledHostBlock = size_t{64} << 20;

  void* acquire(Backend where, int device, size_t capacity, const std::string& name) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find({where, device, capacity});
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_bytes_[size_t(where)] -= capacity;
        return p;
      }
    }
    try {
      return allocateFresh(where, capacity, name);
    } catch (const OutOfMemory&) {  // what the pool holds may be what is missing
      trim(where, 0);
      return allocateFresh(where, capacity, name);
    }
  }

  void give(Backend where, int device, size_t capacity, void* base) noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_bytes_[size_t(where)] + capacity <= kMaxCachedBytes &&
          (where != Backend::Host || capacity <= kMaxPooledHostBlock)) {
        free_[{where, device, capacity}].push_back(base);
        cached_bytes_[size_t(where)] += capacity;
        return;
      }
    }
    releaseFresh(where, device, base);
  }

  /// Releases cached blocks of `where` until at most `keep_bytes` remain.
  void trim(Backend where, size_t keep_bytes) noexcept {
    std::vector<std::tuple<int, void*>> out;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [key, blocks] : free_) {
        if (std::get<0>(key) != where) continue;
        while (!blocks.empty() && cached_bytes_[size_t(where)] > keep_bytes) {
          out.emplace_back(std::get<1>(key), blocks.back());
          blocks.pop_back();
          cached_bytes_[size_t(where)] -= std::get<2>(key);
        }
      }
    }
    for (const auto& [device, base] : out) releaseFresh(where, device, base);
  }

  static BlockPool& instance() {
    // Never destroyed: at exit the CUDA runtime may already be gone, and the
    // process's memory goes with it anyway.
    static BlockPool* pool = new BlockPool;
    return *pool;
  }

 private:
  static constexpr size_t kMaxCachedBytes = size_t{4} << 30;  // per backend

  static void* allocateFresh(Backend where, size_t capacity, const std::string& name) {
    if (where == Backend::Host) return allocateSharedHost(capacity, name);
    void* p = cudaops::allocate(capacity);
    registerDeviceRegion(p, capacity, cudaops::currentDevice());
    return p;
  }

  static void releaseFresh(Backend where, int device, void* base) noexcept {
    if (where == Backend::Host) {
      releaseSharedHost(base);
      return;
    }
    unregisterDeviceRegion(base);
    try {
      cudaops::DeviceScope on(device);
      cudaops::release(base);
    } catch (...) {  // a dead context: the memory goes with it
    }
  }

  std::mutex mutex_;
  std::map<Key, std::vector<void*>> free_;
  size_t cached_bytes_[2] = {0, 0};
};
}  // namespace

bool Buffer::pooledWhenFreed(size_t bytes) {
  return BlockPool::sizeClass(bytes + 2 * kRedZoneBytes) <= BlockPool::kMaxPooledHostBlock;
}

Buffer::Buffer(Backend where, size_t bytes, std::string name) : where_(where), bytes_(bytes), name_(std::move(name)) {
  // A size past any machine's memory (a kernel's workspace query that
  // answered -1) would wrap when the red zones are added; one past what this
  // process may use would be filled byte by byte until the OOM killer came.
  constexpr size_t kLargestBuffer = size_t{1} << 47;
  if (bytes > kLargestBuffer)
    throw OutOfMemory(fmt::format("buffer '{}' of {} bytes: more than any machine has", name_, bytes));
  const size_t total = bytes + 2 * kRedZoneBytes;
  capacity_ = BlockPool::sizeClass(total);
  if (const MemoryLimit& limit = hostMemoryLimit(); where == Backend::Host && limit.bytes && capacity_ > limit.bytes)
    throw OutOfMemory(fmt::format("buffer '{}' needs {} of host memory; this process may use {} ({})", name_,
                                  formatBytes(capacity_), formatBytes(limit.bytes), limit.source));
  // Shared regions (core/shared_memory.h): a kernel in a worker
  // process works on these very bytes. The whole block starts as canary
  // bytes, the part past the trailing red zone included.
  if (where == Backend::Host) {
    base_ = BlockPool::instance().acquire(where, 0, capacity_, name_);
    std::memset(base_, kCanaryByte, capacity_);
  } else {
    device_ = cudaops::currentDevice();
    base_ = BlockPool::instance().acquire(where, device_, capacity_, name_);
    cudaops::setBytes(base_, kCanaryByte, capacity_);
  }
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& o) noexcept
    : where_(o.where_),
      bytes_(o.bytes_),
      capacity_(o.capacity_),
      device_(o.device_),
      base_(std::exchange(o.base_, nullptr)),
      name_(std::move(o.name_)) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    where_ = o.where_;
    bytes_ = o.bytes_;
    capacity_ = o.capacity_;
    device_ = o.device_;
    base_ = std::exchange(o.base_, nullptr);
    name_ = std::move(o.name_);
  }
  return *this;
}

void Buffer::release() noexcept {
  if (!base_) return;
  BlockPool::instance().give(where_, device_, capacity_, base_);
  base_ = nullptr;
}

void Buffer::fillPattern(uint32_t pattern, int element_bytes) {
  if (where_ == Backend::Host) {
    fillHostPattern(data(), bytes_, pattern, element_bytes);
  } else {
    cudaops::DeviceScope on(device_);
    cudaops::fillPattern(data(), bytes_, pattern, element_bytes);
  }
}

void Buffer::upload(const void* host, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_) throw std::out_of_range(fmt::format("upload beyond the end of '{}'", name_));
  if (where_ == Backend::Host) std::memcpy(static_cast<char*>(data()) + offset, host, bytes);
  else cudaops::copyToDevice(static_cast<char*>(data()) + offset, host, bytes);  // UVA: from any current device
}

void Buffer::download(void* host, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_) throw std::out_of_range(fmt::format("download beyond the end of '{}'", name_));
  if (where_ == Backend::Host) std::memcpy(host, static_cast<const char*>(data()) + offset, bytes);
  else cudaops::copyToHost(host, static_cast<const char*>(data()) + offset, bytes);
}

std::vector<uint8_t> Buffer::downloadAll() const {
  std::vector<uint8_t> out(bytes_);
  download(out.data(), bytes_);
  return out;
}

uint64_t bytesDigest(const void* p, size_t bytes) {
  const auto* c = static_cast<const unsigned char*>(p);
  uint64_t sum = 0;
  const size_t whole = bytes / 8;
  for (size_t i = 0; i < whole; ++i) {
    uint64_t w;
    std::memcpy(&w, c + 8 * i, 8);
    sum += digestTerm(w, i);
  }
  if (bytes % 8) {
    uint64_t w = 0;
    std::memcpy(&w, c + 8 * whole, bytes % 8);  // little endian: the low bytes, zero above
    sum += digestTerm(w, whole);
  }
  return sum;
}

uint64_t Buffer::digest() const {
  if (where_ == Backend::Host) return bytesDigest(data(), bytes_);
  cudaops::DeviceScope on(device_);
  const cudaops::BlockView view{base_, bytes_};
  uint64_t digest = 0, damaged = 0;
  cudaops::inspectBlocks(&view, 1, kRedZoneBytes, kCanaryByte, &digest, &damaged);
  return digest;
}

size_t Buffer::damagedCanaryBytes() const {
  uint8_t zones[2 * kRedZoneBytes];
  const char* base = static_cast<const char*>(base_);
  if (where_ == Backend::Host) {
    std::memcpy(zones, base, kRedZoneBytes);
    std::memcpy(zones + kRedZoneBytes, base + kRedZoneBytes + bytes_, kRedZoneBytes);
  } else {
    cudaops::copyToHost(zones, base, kRedZoneBytes);
    cudaops::copyToHost(zones + kRedZoneBytes, base + kRedZoneBytes + bytes_, kRedZoneBytes);
  }
  size_t damaged = 0;
  for (uint8_t b : zones) damaged += b != kCanaryByte;
  return damaged;
}

}  // namespace ulpcheck
