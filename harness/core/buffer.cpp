#include "harness/core/buffer.h"

#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "harness/core/cuda_ops.h"
#include "harness/core/shared_memory.h"

namespace ulpcheck {

const char* backendName(Backend b) { return b == Backend::Cuda ? "cuda" : "host"; }

namespace {
void fillHostPattern(void* p, size_t bytes, uint32_t pattern, int element_bytes) {
  auto* out = static_cast<uint8_t*>(p);
  for (size_t i = 0; i + element_bytes <= bytes; i += element_bytes) std::memcpy(out + i, &pattern, element_bytes);
}
}  // namespace

Buffer::Buffer(Backend where, size_t bytes, std::string name) : where_(where), bytes_(bytes), name_(std::move(name)) {
  const size_t total = bytes + 2 * kRedZoneBytes;
  // Shared regions (harness/core/shared_memory.h): a kernel in a worker
  // process works on these very bytes.
  if (where == Backend::Host) {
    base_ = allocateSharedHost(total, name_);
    std::memset(base_, kCanaryByte, total);
  } else {
    device_ = cudaops::currentDevice();
    base_ = cudaops::allocate(total);
    registerDeviceRegion(base_, total, device_);
    cudaops::setBytes(base_, kCanaryByte, total);
  }
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& o) noexcept
    : where_(o.where_),
      bytes_(o.bytes_),
      device_(o.device_),
      base_(std::exchange(o.base_, nullptr)),
      name_(std::move(o.name_)) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    where_ = o.where_;
    bytes_ = o.bytes_;
    device_ = o.device_;
    base_ = std::exchange(o.base_, nullptr);
    name_ = std::move(o.name_);
  }
  return *this;
}

void Buffer::release() noexcept {
  if (!base_) return;
  if (where_ == Backend::Host) {
    releaseSharedHost(base_);
  } else {
    unregisterDeviceRegion(base_);
    try {
      cudaops::DeviceScope on(device_);
      cudaops::release(base_);
    } catch (...) {  // a dead context: the memory goes with it
    }
  }
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
