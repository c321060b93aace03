// The buffers of one kernel run and the memory checks on them: inputs are
// uploaded (padding columns poisoned, so reading them shows up as NaN) and
// must come back unchanged; outputs are poisoned and must be written in
// columns [0, N) and left alone in the padding; scratch is poisoned too (a
// kernel must not read what it did not write); every buffer's red zones must
// survive.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/datagen.h"
#include "properties/op.h"

namespace ulpcheck {

class RunBuffers {
 public:
  /// `unprovided`: outputs the variant does not produce (KernelInfo::
  /// unprovided_outputs), allocated as scratch: poisoned, never judged.
  explicit RunBuffers(Backend where, std::vector<std::string> unprovided = {})
      : where_(where), unprovided_(std::move(unprovided)) {}

  void* input(const std::string& name, const HostMatrix& m);
  /// An input generated in place on the GPU (generateDevice: the bits
  /// generateHost makes), rows [0, rows) of the stream, padding poisoned;
  /// it must come back unchanged. GPU buffers only.
  void* generated(const std::string& name, const DistParams& dist, DType t, uint64_t seed, TensorStream stream,
                  int64_t rows, int64_t cols, int64_t ld);
  /// The buffer of a named output or input (null if none).
  Buffer* find(const std::string& name) const;
  /// An output, poisoned with `poison` (the dtype's NaN poison unless
  /// given): an element still holding it after the run was never written.
  void* output(const std::string& name, DType t, int64_t rows, int64_t cols, int64_t ld, bool per_row,
               std::optional<uint32_t> poison = std::nullopt);
  void* scratch(const std::string& name, size_t bytes);

  /// Downloads the outputs and runs the memory checks. With `expected` (an
  /// earlier run of the same case and layout: determinism's repeats), an
  /// output whose digest equals the expected one's is not downloaded: it is
  /// those bits (OutputTensor::downloaded false), and its memory checks are
  /// the earlier run's. Each buffer is released once checked: call it once,
  /// after the run, when no kernel reads the buffers any more.
  RunResult collect(const RunResult* expected = nullptr);

 private:
  struct Entry {
    std::unique_ptr<Buffer> buffer;
    OutputTensor shape;  // geometry
    enum Kind { kInput, kOutput, kScratch } kind;
    const HostMatrix* uploaded = nullptr;  // inputs: what was uploaded, which must come back unchanged
    uint64_t generated_digest = 0;         // inputs generated in place (uploaded null): their digest
    uint32_t poison = 0;                   // outputs: what an unwritten element holds
  };
  Backend where_;
  std::vector<std::string> unprovided_;
  std::vector<Entry> entries_;
};

/// Where every value of an output is legal, its poison included (an fp8
/// output whose spec overflows to NaN): `first` ran with one poison and
/// `second`, the same case again, with another. An element is unwritten
/// only where each run left its own poison: `first`'s memory report is
/// counted again for `tensor` so.
void recountUnwritten(RunResult& first, uint32_t first_poison, const RunResult& second, uint32_t second_poison,
                      const std::string& tensor);

}  // namespace ulpcheck
