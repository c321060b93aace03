#include "core/datagen.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>

#include "core/buffer.h"
#include "core/parallel.h"
#include "core/phase_timer.h"

namespace ulpcheck {

std::vector<uint8_t> packBits(const PackedBits& bits, DType t) {
  const int w = storageBytes(t);
  if (bits.width() == w) return bits.bytes();
  PackedBits out(w, bits.size());  // the low 16 bits: the storage
  for (size_t i = 0; i < bits.size(); ++i) out.set(i, bits[i]);
  return out.bytes();
}

std::vector<uint8_t> HostMatrix::packed() const { return packBits(bits, dtype); }

const HostMatrix::Packed& HostMatrix::packedCache() const {
  if (!packed_cache) {
    auto p = std::make_shared<Packed>();
    if (bits.width() != storageBytes(dtype)) p->bytes = packed();
    const std::vector<uint8_t>& bytes = p->bytes.empty() ? bits.bytes() : p->bytes;
    p->digest = bytesDigest(bytes.data(), bytes.size());
    packed_cache = std::move(p);
  }
  return *packed_cache;
}

const std::vector<uint8_t>& HostMatrix::packedOnce() const {
  const Packed& p = packedCache();
  return p.bytes.empty() ? bits.bytes() : p.bytes;
}
uint64_t HostMatrix::packedDigest() const { return packedCache().digest; }

PackedBits unpackBits(std::vector<uint8_t> bytes, DType t) {
  return PackedBits::fromBytes(storageBytes(t), std::move(bytes));
}

std::vector<int64_t> identityRows(int64_t rows) {
  std::vector<int64_t> ids(rows);
  std::iota(ids.begin(), ids.end(), int64_t{0});
  return ids;
}

namespace {
std::atomic<bool> generate_on_device{false};

#if defined(ULPCHECK_HAVE_CUDA)  // the device generator's only caller
/// A maximal run of consecutive ids: at `position` in the batch, ids
/// first, first + 1, ..., first + rows - 1.
struct IdRun {
  int64_t position, first, rows;
};

std::vector<IdRun> consecutiveRuns(const std::vector<int64_t>& ids) {
  std::vector<IdRun> runs;
  for (size_t r = 0; r < ids.size(); ++r) {
    if (!runs.empty() && ids[r] == runs.back().first + runs.back().rows) ++runs.back().rows;
    else runs.push_back({int64_t(r), ids[r], 1});
  }
  return runs;
}

// A batch of up to this many runs of consecutive ids is made on the device
// run by run: batch invariance's embedded batch is the case's rows between
// two runs of others (three runs, up to twice the case's rows), which the
// host made at tens of nanoseconds an element.
constexpr size_t kMaxDeviceRuns = 8;
#endif
}  // namespace

void setGenerateOnDevice(bool on) { generate_on_device = on; }

HostMatrix generateHost(const DistParams& dist, DType t, uint64_t seed, TensorStream stream,
                        const std::vector<int64_t>& row_ids, int64_t cols, int64_t ld, uint32_t pad_bits) {
  const PhaseScope phase(Phase::Inputs);
  HostMatrix m;
  m.dtype = t;
  m.rows = static_cast<int64_t>(row_ids.size());
  m.cols = cols;
  m.ld = ld;
#if defined(ULPCHECK_HAVE_CUDA)
  if (generate_on_device && m.rows * cols >= kDeviceGenerationElements) {
    const std::vector<IdRun> runs = consecutiveRuns(row_ids);
    if (runs.size() <= kMaxDeviceRuns) {
      const size_t row_bytes = size_t(ld) * size_t(storageBytes(t));
      std::vector<uint8_t> bytes(size_t(m.rows) * row_bytes);
      for (const IdRun& run : runs)
        generateDownloaded(bytes.data() + size_t(run.position) * row_bytes, dist, t, seed, stream, run.first, run.rows,
                           cols, ld, pad_bits);
      m.bits = unpackBits(std::move(bytes), t);
      return m;
    }
  }
#endif
  m.bits = PackedBits(storageBytes(t), size_t(m.rows * ld), pad_bits);
  auto fill = [&](unsigned, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t c = 0; c < cols; ++c)
        m.bits.set(size_t(r * ld + c), encodeBits(t, sampleValue(dist, t, seed, stream, row_ids[size_t(r)], c)));
  };
  // Waking the pool costs more than a small tensor's values (most cases').
  constexpr int64_t kParallelElements = int64_t{1} << 15;
  if (m.rows * cols < kParallelElements) fill(0, 0, m.rows);
  else ThreadPool::shared().forChunks(m.rows, fill);
  return m;
}

}  // namespace ulpcheck
