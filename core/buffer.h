// Buffers that kernels write into, on the host or on the GPU. The payload is
// pre-filled with a poison pattern (a signalling NaN, which no arithmetic
// produces) so unwritten elements are found, and bracketed by canary red
// zones so out-of-bounds writes are found.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace ulpcheck {

enum class Backend : uint8_t { Host = 0, Cuda = 1 };
const char* backendName(Backend b);

/// Signalling-NaN poison with a recognisable payload, per element width.
constexpr uint32_t poisonBits(DType t) {
  // FP8: a NaN code (E4M3FN's only one, S.1111.111; E5M2's S.11111.11). Under a
  // spec whose overflow gives NaN it is also a legal output: such a spec
  // needs its own way to see an unwritten element (issue 34).
  return t == DType::F32 ? 0x7fbadbadu : t == DType::F16 ? 0x7dadu : t == DType::BF16 ? 0x7fadu : 0x7fu;
}
constexpr uint32_t kPoisonF32 = 0x7fbadbadu;  // fp32 side buffers (rstd, partials)
constexpr uint8_t kCanaryByte = 0xca;

/// Allocation failures name the size, so "does not fit" is a clear message.
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A 64-bit digest of `bytes` bytes: the wrapping sum of digestTerm
/// (core/rng.h) over their 8-byte little-endian words, the last one
/// padded with zero bytes. Equal bytes give equal digests; any difference
/// changes it but with probability 2^-64. The GPU computes the same
/// (cudaops::inspectBlocks), so a run's outputs can be compared without download.
uint64_t bytesDigest(const void* p, size_t bytes);

class Buffer {
 public:
  static constexpr size_t kRedZoneBytes = 256;  // keeps the payload 256-byte aligned
  /// Whether a host buffer of `bytes` stays in the process's memory once
  /// freed (the pool keeps it for the next buffer of its size class), as
  /// every device buffer does: a host one larger than 64 MiB goes back to
  /// the system. What a case's memory estimate counts (OpAdapter::peakHostBytes).
  static bool pooledWhenFreed(size_t bytes);

  Buffer(Backend where, size_t bytes, std::string name);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;

  void* data() const { return base_ ? static_cast<char*>(base_) + kRedZoneBytes : nullptr; }
  size_t bytes() const { return bytes_; }
  Backend where() const { return where_; }
  int device() const { return device_; }
  const std::string& name() const { return name_; }

  /// Fills the payload with a repeating element pattern of 2 or 4 bytes.
  void fillPattern(uint32_t pattern, int element_bytes);
  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;
  std::vector<uint8_t> downloadAll() const;
  /// Number of canary bytes that no longer hold kCanaryByte (0: intact).
  size_t damagedCanaryBytes() const;
  /// bytesDigest of the payload, computed where it lives (no download).
  uint64_t digest() const;

 private:
  void release() noexcept;
  Backend where_ = Backend::Host;
  size_t bytes_ = 0;
  size_t capacity_ = 0;   // of the whole block, red zones included (a pooled size class)
  int device_ = 0;        // the GPU it lives on (current when it was made)
  void* base_ = nullptr;  // start of the leading red zone
  std::string name_;
};

}  // namespace ulpcheck
