#include "core/datagen.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/buffer.h"
#include "core/parallel.h"
#include "core/phase_timer.h"

namespace ulpcheck {

// Typed loops (one memcpy for fp32): these run on every tensor of every run.
std::vector<uint8_t> packBits(const std::vector<uint32_t>& bits, DType t) {
  const int w = storageBytes(t);
  std::vector<uint8_t> out(bits.size() * w);
  if (w == 4) {
    std::memcpy(out.data(), bits.data(), out.size());
  } else {
    std::vector<uint16_t> halves(bits.begin(), bits.end());  // the low 16 bits: the storage
    std::memcpy(out.data(), halves.data(), out.size());
  }
  return out;
}

std::vector<uint8_t> HostMatrix::packed() const { return packBits(bits, dtype); }

const HostMatrix::Packed& HostMatrix::packedCache() const {
  if (!packed_cache) {
    auto p = std::make_shared<Packed>();
    p->bytes = packed();
    p->digest = bytesDigest(p->bytes.data(), p->bytes.size());
    packed_cache = std::move(p);
  }
  return *packed_cache;
}

const std::vector<uint8_t>& HostMatrix::packedOnce() const { return packedCache().bytes; }
uint64_t HostMatrix::packedDigest() const { return packedCache().digest; }

std::vector<uint32_t> unpackBits(const std::vector<uint8_t>& bytes, DType t) {
  const int w = storageBytes(t);
  std::vector<uint32_t> out(bytes.size() / w, 0);
  if (w == 4) {
    std::memcpy(out.data(), bytes.data(), out.size() * 4);
  } else {
    std::vector<uint16_t> halves(out.size());
    std::memcpy(halves.data(), bytes.data(), halves.size() * 2);
    std::copy(halves.begin(), halves.end(), out.begin());
  }
  return out;
}

std::vector<int64_t> identityRows(int64_t rows) {
  std::vector<int64_t> ids(rows);
  std::iota(ids.begin(), ids.end(), int64_t{0});
  return ids;
}

HostMatrix generateHost(const DistParams& dist, DType t, uint64_t seed, TensorStream stream,
                        const std::vector<int64_t>& row_ids, int64_t cols, int64_t ld, uint32_t pad_bits) {
  const PhaseScope phase(Phase::Inputs);
  HostMatrix m;
  m.dtype = t;
  m.rows = static_cast<int64_t>(row_ids.size());
  m.cols = cols;
  m.ld = ld;
  m.bits.assign(m.rows * ld, pad_bits);
  auto fill = [&](unsigned, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t c = 0; c < cols; ++c)
        m.bits[r * ld + c] = encodeBits(t, sampleValue(dist, t, seed, stream, row_ids[r], c));
  };
  // Waking the pool costs more than a small tensor's values (most cases').
  constexpr int64_t kParallelElements = int64_t{1} << 15;
  if (m.rows * cols < kParallelElements) fill(0, 0, m.rows);
  else ThreadPool::shared().forChunks(m.rows, fill);
  return m;
}

}  // namespace ulpcheck
