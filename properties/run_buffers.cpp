#include "properties/run_buffers.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "core/cuda_ops.h"
#include "core/phase_timer.h"

namespace ulpcheck {

namespace {
constexpr size_t kMaxDetails = 8;

void note(MemoryReport& m, std::string s) {
  if (m.details.size() < kMaxDetails) m.details.push_back(std::move(s));
}
}  // namespace

void* RunBuffers::input(const std::string& name, const HostMatrix& m) {
  const PhaseScope phase(Phase::Buffers);
  Entry e{std::make_unique<Buffer>(where_, size_t(m.rows * m.ld) * storageBytes(m.dtype), name),
          OutputTensor{name, m.dtype, m.rows, m.cols, m.ld, true, {}}, Entry::kInput, &m};
  const std::vector<uint8_t>& bytes = m.packedOnce();
  e.buffer->upload(bytes.data(), bytes.size());
  entries_.push_back(std::move(e));
  return entries_.back().buffer->data();
}

void* RunBuffers::generated(const std::string& name, const DistParams& dist, DType t, uint64_t seed,
                            TensorStream stream, int64_t rows, int64_t cols, int64_t ld) {
  const PhaseScope phase(Phase::Inputs);
  Entry e{std::make_unique<Buffer>(where_, size_t(rows * ld) * storageBytes(t), name),
          OutputTensor{name, t, rows, cols, ld, true, {}}, Entry::kInput, nullptr};
  e.buffer->fillPattern(poisonBits(t), storageBytes(t));
  if (where_ != Backend::Cuda)
    throw std::logic_error("RunBuffers::generated: inputs are generated in place on the GPU only");
  {
    cudaops::DeviceScope on(e.buffer->device());
    generateDevice(e.buffer->data(), dist, t, seed, stream, 0, rows, cols, ld);
  }
  e.generated_digest = e.buffer->digest();
  entries_.push_back(std::move(e));
  return entries_.back().buffer->data();
}

Buffer* RunBuffers::find(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.buffer && e.buffer->name() == name) return e.buffer.get();
  return nullptr;
}

void* RunBuffers::output(const std::string& name, DType t, int64_t rows, int64_t cols, int64_t ld, bool per_row,
                         std::optional<uint32_t> poison) {
  const PhaseScope phase(Phase::Buffers);
  if (std::find(unprovided_.begin(), unprovided_.end(), name) != unprovided_.end())
    return scratch(name, size_t(rows * ld) * storageBytes(t));
  Entry e{std::make_unique<Buffer>(where_, size_t(rows * ld) * storageBytes(t), name),
          OutputTensor{name, t, rows, cols, ld, per_row, {}},
          Entry::kOutput,
          nullptr,
          0,
          poison.value_or(poisonBits(t))};
  e.buffer->fillPattern(e.poison, storageBytes(t));
  entries_.push_back(std::move(e));
  return entries_.back().buffer->data();
}

void* RunBuffers::scratch(const std::string& name, size_t bytes) {
  const PhaseScope phase(Phase::Buffers);
  Entry e{std::make_unique<Buffer>(where_, bytes, name), OutputTensor{name, DType::F32, 0, 0, 0, false, {}},
          Entry::kScratch, nullptr};
  e.buffer->fillPattern(kPoisonF32, 4);
  entries_.push_back(std::move(e));
  return entries_.back().buffer->data();
}

RunResult RunBuffers::collect(const RunResult* expected) {
  const PhaseScope phase(Phase::Collect);
  RunResult r;
  MemoryReport& mem = r.memory;
  // Every buffer's payload digest and damaged canaries, per device in one
  // launch (cudaops::inspectBlocks), on the host where it lives.
  std::vector<uint64_t> digests(entries_.size()), damaged(entries_.size());
  std::map<int, std::vector<size_t>> on_device;
  for (size_t k = 0; k < entries_.size(); ++k) {
    const Buffer& b = *entries_[k].buffer;
    if (b.where() == Backend::Host) {
      if (entries_[k].kind != Entry::kScratch) digests[k] = b.digest();
      damaged[k] = b.damagedCanaryBytes();
    } else {
      on_device[b.device()].push_back(k);
    }
  }
  for (const auto& [device, ks] : on_device) {
    cudaops::DeviceScope on(device);
    std::vector<cudaops::BlockView> views;
    for (size_t k : ks) {
      const Buffer& b = *entries_[k].buffer;
      views.push_back({static_cast<const char*>(b.data()) - Buffer::kRedZoneBytes, b.bytes()});
    }
    std::vector<uint64_t> d(ks.size()), c(ks.size());
    cudaops::inspectBlocks(views.data(), views.size(), Buffer::kRedZoneBytes, kCanaryByte, d.data(), c.data());
    for (size_t n = 0; n < ks.size(); ++n) digests[ks[n]] = d[n], damaged[ks[n]] = c[n];
  }
  for (size_t k = 0; k < entries_.size(); ++k) {
    Entry& e = entries_[k];
    // Each buffer goes once checked (downloaded, where an output): a case's
    // peak holds its inputs, its buffers and its downloaded outputs, not all
    // of them at once.
    const auto release = [&e] { e.buffer.reset(); };
    if (const size_t bad = damaged[k]) {
      mem.canary_bytes_damaged += bad;
      note(mem, fmt::format("{} canary bytes around '{}' overwritten (out-of-bounds write)", bad, e.buffer->name()));
    }
    if (e.kind == Entry::kScratch) {
      release();
      continue;
    }
    const OutputTensor& g = e.shape;
    // Inputs: their digest where they live says whether they changed; only
    // then are they downloaded to find where.
    if (e.kind == Entry::kInput && !e.uploaded) {  // generated in place: only its digest is known
      if (digests[k] != e.generated_digest && mem.inputs_modified++ == 0)
        note(mem, fmt::format("input '{}' modified", g.name));
      release();
      continue;
    }
    if (e.kind == Entry::kInput) {
      if (digests[k] == e.uploaded->packedDigest()) {
        release();
        continue;
      }
      const std::vector<uint8_t> bytes = e.buffer->downloadAll();
      const std::vector<uint8_t>& uploaded = e.uploaded->packedOnce();
      const int w = storageBytes(g.dtype);
      for (size_t i = 0; i * w < bytes.size(); ++i)
        if (std::memcmp(&bytes[i * w], &uploaded[i * w], w) != 0) {
          if (mem.inputs_modified++ == 0)
            note(mem,
                 fmt::format("input '{}' modified at row {} col {}", g.name, int64_t(i) / g.ld, int64_t(i) % g.ld));
        }
      release();
      continue;
    }
    const uint64_t digest = digests[k];
    if (expected) {
      const OutputTensor* same = expected->find(g.name);
      if (same && same->digest == digest && same->rows == g.rows && same->ld == g.ld && same->dtype == g.dtype) {
        OutputTensor out = g;
        out.digest = digest;
        out.downloaded = false;
        r.outputs.push_back(std::move(out));
        release();
        continue;
      }
    }
    PackedBits bits = unpackBits(e.buffer->downloadAll(), g.dtype);  // kept as downloaded: no copy
    release();
    const uint32_t poison = e.poison;
    for (int64_t row = 0; row < g.rows; ++row)
      for (int64_t col = 0; col < g.ld; ++col) {
        const uint32_t b = bits.get(size_t(row * g.ld + col));
        if (col < g.cols && b == poison) {
          if (mem.unwritten++ == 0) note(mem, fmt::format("'{}' not written at row {} col {}", g.name, row, col));
        } else if (col >= g.cols && b != poison) {
          if (mem.padding_written++ == 0)
            note(mem, fmt::format("'{}' written in the padding at row {} col {} (ld {})", g.name, row, col, g.ld));
        }
      }
    OutputTensor out = g;
    out.bits = std::move(bits);
    out.digest = digest;
    r.outputs.push_back(std::move(out));
  }
  if (mem.unwritten) note(mem, fmt::format("{} output elements never written", mem.unwritten));
  return r;
}

void recountUnwritten(RunResult& first, uint32_t first_poison, const RunResult& second, uint32_t second_poison,
                      const std::string& tensor) {
  const OutputTensor* a = first.find(tensor);
  const OutputTensor* b = second.find(tensor);
  if (!a || !b || !a->downloaded || !b->downloaded) return;  // a repeat's checks are the run's it repeats
  MemoryReport& mem = first.memory;
  // The first run's count of this tensor and its notes go; the rest stay.
  int64_t theirs = 0, unwritten = 0;
  for (int64_t row = 0; row < a->rows; ++row)
    for (int64_t col = 0; col < a->cols; ++col) theirs += a->at(row, col) == first_poison;
  std::erase_if(mem.details,
                [&](const std::string& d) { return d.starts_with(fmt::format("'{}' not written", tensor)); });
  for (int64_t row = 0; row < a->rows; ++row)
    for (int64_t col = 0; col < a->cols; ++col)
      if (a->at(row, col) == first_poison && b->at(row, col) == second_poison && unwritten++ == 0)
        note(mem, fmt::format("'{}' not written at row {} col {} (its poison after runs with two poisons)", tensor, row,
                              col));
  mem.unwritten += unwritten - theirs;
  std::erase_if(mem.details, [](const std::string& d) { return d.ends_with("output elements never written"); });
  if (mem.unwritten) note(mem, fmt::format("{} output elements never written", mem.unwritten));
}

}  // namespace ulpcheck
