// The binding of one op (rmsnorm, ...) to the generic properties: how to run a
// registered variant on a case, what the oracle says, which outputs are
// per-row. Each op registers one OpAdapter; properties never name an op.
#pragma once

#include <any>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "core/buffer.h"
#include "core/case_spec.h"
#include "core/packed_bits.h"
#include "core/parallel.h"
#include "kernels/registry.h"
#include "oracles/oracle_mode.h"
#include "oracles/reference.h"

namespace ulpcheck {

struct Outcome;  // properties/property.h

/// Logical row ids, one per position of the batch a run executes: a row keeps
/// its values wherever it is placed (batch invariance moves rows around).
using RowLayout = std::vector<int64_t>;

/// One output tensor as the kernel left it (bits of every element, padding
/// included), named like the oracle's ReferenceTensor.
struct OutputTensor {
  std::string name;
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0, ld = 0;
  bool per_row = true;
  PackedBits bits;  // rows x ld, at the storage width as downloaded
  // bytesDigest of the stored bytes (padding included). A run that repeats
  // another leaves a tensor whose digest matches the other's undownloaded
  // (RunBuffers::collect): `bits` is then empty and they are the other's.
  uint64_t digest = 0;
  bool downloaded = true;
  double value(int64_t r, int64_t c) const { return decodeBits(dtype, bits[size_t(r * ld + c)]); }
  uint32_t at(int64_t r, int64_t c) const { return bits[size_t(r * ld + c)]; }
};

/// What the memory checks found in one run.
struct MemoryReport {
  int64_t unwritten = 0;        // output elements still holding the poison pattern
  int64_t padding_written = 0;  // padding elements (columns N..ld) that changed
  int64_t inputs_modified = 0;  // input elements that changed
  size_t canary_bytes_damaged = 0;
  std::string unchecked_launch;      // a launch that failed with nobody checking (synchronizeVariant)
  std::vector<std::string> details;  // first few findings, human readable
  bool clean() const {
    return !unwritten && !padding_written && !inputs_modified && !canary_bytes_damaged && unchecked_launch.empty();
  }
};

/// Output name -> bytesDigest of its stored bytes (OutputTensor::digest).
using OutputDigests = std::map<std::string, uint64_t>;

struct RunResult {
  std::vector<OutputTensor> outputs;
  MemoryReport memory;
  double seconds = 0;  // wall time of the kernels, synchronised
  const OutputTensor* find(const std::string& name) const {
    for (const auto& o : outputs)
      if (o.name == name) return &o;
    return nullptr;
  }
};

/// The input tensors of one case's runs, generated once per batch layout: a
/// case runs its kernel up to ten times (determinism's repeats, batch
/// invariance, fused vs unfused) on the same rows, and the oracle reads them
/// too. Holds the case's own rows and the last other layout. Inputs are
/// pure functions of the case's data fields and the rows' logical ids
/// (core/datagen.h), so a cached one is the generated one.
class InputCache {
 public:
  /// The inputs of `layout`, made by `make` unless held already.
  template <typename T, typename Make>
  const T& get(const RowLayout& layout, Make&& make) {
    for (Entry& e : entries_)
      if (e.layout == layout)
        if (const T* held = std::any_cast<T>(&e.value)) return *held;
    const bool identity = isIdentity(layout);
    std::erase_if(entries_, [&](const Entry& e) { return isIdentity(e.layout) == identity; });
    entries_.push_back(Entry{layout, std::any(make())});
    return std::any_cast<const T&>(entries_.back().value);
  }

 private:
  static bool isIdentity(const RowLayout& l) {
    for (size_t i = 0; i < l.size(); ++i)
      if (l[i] != int64_t(i)) return false;
    return true;
  }
  struct Entry {
    RowLayout layout;
    std::any value;
  };
  std::vector<Entry> entries_;
};

/// Where cases execute.
struct ExecContext {
  Backend backend = Backend::Host;
  int sm_count = 132;  // device's, or the one the host port emulates (an H100's)
  ThreadPool* pool = nullptr;
  /// Every run launches its kernels beside a random load on another stream
  /// (core/schedule_noise.h), so repeated runs meet different CTA
  /// schedules: what the determinism property needs to see order-dependent
  /// results. CUDA variants only.
  bool perturb_schedule = false;
  /// Runs the determinism property compares with the base run (at least 5 on
  /// the GPU). Campaigns check many cases and keep it small; replaying one
  /// case (`ulpcheck repro`, a kill's replay) affords more, and a race or a
  /// missing fence shows on some runs only (kThoroughDeterminismRepeats).
  int determinism_repeats = 3;
  /// The case's inputs, shared by its runs and its oracle (CaseContext owns
  /// it); null: generate afresh each time.
  InputCache* inputs = nullptr;
  /// A run this one repeats (same case, same layout), or null: outputs whose
  /// digests match its outputs are not downloaded (RunBuffers::collect).
  const RunResult* repeats = nullptr;
  /// Which oracle computes the references (the certified fast path, MPFR,
  /// or both compared) and where accuracy is judged: the run's settings
  /// (oracles/oracle_mode.h), never the process's.
  OracleMode oracle = OracleMode::Fast;
  JudgeWhere judge = JudgeWhere::Auto;
  /// The most bytes a case's per-row reference tensors may take held whole;
  /// an op streams them beyond (oracles/reference.h, ReferenceRows), where
  /// the case's inputs are cached (`inputs`: the rows are made from them
  /// when judged). Tests set 0 to stream every case.
  uint64_t max_held_reference_bytes = kMaxHeldReferenceBytes;
  /// How long one call into a worker process may take (LaunchEnv::call_timeout_s).
  double call_timeout_s = kDefaultCallTimeoutSeconds;
};

/// The inputs of case `c` on the rows of `layout`, from the context's cache
/// where it has one. Every run and the oracle of a case share its data fields,
/// whichever variant runs (fused_vs_unfused runs another on the same data).
template <typename T, typename Make>
const T& caseInputs(const ExecContext& ctx, const RowLayout& layout, T& fresh, Make&& make) {
  if (ctx.inputs) return ctx.inputs->get<T>(layout, std::forward<Make>(make));
  fresh = make();
  return fresh;
}

constexpr int kThoroughDeterminismRepeats = 24;

class OpAdapter {
 public:
  virtual ~OpAdapter() = default;
  virtual std::string name() const = 0;
  virtual std::vector<KernelInfo> kernels() const = 0;
  /// Its spec (core/spec.h): the fields it has, in the order a case string
  /// prints them, and the rules between them; a case setting another field
  /// is malformed (declareSpec).
  virtual OpSpecDeclaration spec() const = 0;
  /// Runs the case's variant on the rows of `layout` (positions 0..size-1).
  virtual RunResult run(const CaseSpec& c, const RowLayout& layout, const ExecContext& ctx) const = 0;
  /// The oracle: exact values and budgets of every checked output.
  virtual std::vector<ReferenceTensor> reference(const CaseSpec& c, const ExecContext& ctx) const = 0;
  /// Hex of the inputs that element (row, col) of output `tensor` depends on
  /// most directly, for failure reports.
  virtual std::string describeInputs(const CaseSpec& c, const std::string& tensor, int64_t row, int64_t col) const = 0;
  /// Op-specific parts of a generated case (eps, ...), applied to a case
  /// whose shape, dtype, distribution and kernel are already chosen.
  virtual rc::Gen<CaseSpec> refine(CaseSpec base) const = 0;
  /// Each rank holds its own copy of the outputs (rank_consistency applies).
  virtual bool multiRank() const { return false; }
  /// The eps the libraries' own tests of the op use (torch.nn.LayerNorm's
  /// 1e-5, RMSNorm's 1e-6): the baselines' fixed cases take it.
  virtual float testSuiteEps() const = 0;
  /// The library test suites (harness/runner/baselines.cpp, by name) that
  /// test this op: the kill matrix runs their fixed cases on its variants.
  virtual std::vector<std::string> baselineSuites() const = 0;
  /// The host memory one check of the case takes at its peak (its buffers on
  /// the host backend, downloads, the oracle's references), an upper estimate
  /// calibrated by measurement: a case past what the process may use
  /// (hostMemoryLimit) is skipped, or refused by `repro`, saying why, rather
  /// than ended by the OOM killer. `ctx`: where and how it runs (a reference
  /// held whole or streamed: ExecContext::max_held_reference_bytes).
  virtual uint64_t peakHostBytes(const CaseSpec& c, const ExecContext& ctx) const = 0;
  /// The accuracy outcome judged on the GPU (oracles/rmsnorm_device.h), or
  /// nothing where the op's GPU judge does not model the case: run there
  /// (beside a schedule-perturbing load with ctx.perturb_schedule; the
  /// outputs' digests, bytesDigest as RunBuffers::collect computes them, in
  /// `digests` when given: compared with another run's, nothing downloaded),
  /// or of `outputs` (a run made elsewhere) when given.
  virtual std::optional<Outcome> accuracyOnGpu(const CaseSpec& c, const ExecContext& ctx, const RunResult* outputs,
                                               OutputDigests* digests = nullptr) const;
  /// The bounds of `run`'s outputs given its own intermediate results, where
  /// the variant declares how it uses them (oracles/reference.h,
  /// ConditionalBounds: LayerNorm's saved statistics), or nullptr. They hold
  /// references into the case's inputs (ctx.inputs).
  virtual std::unique_ptr<ConditionalBounds> conditionalBounds(const CaseSpec&, const ExecContext&,
                                                               const RunResult&) const {
    return nullptr;
  }

  /// The variant `kernel` of `op`, or nullptr where none is registered (a
  /// CUDA variant in a build without CUDA, a plugin's not loaded).
  static const KernelInfo* findKernel(const std::string& op, const std::string& kernel);
  /// findKernel where the variant must be there: throws std::invalid_argument
  /// naming the op and the variant when it is not, rather than handing back a
  /// nullptr for the caller to dereference.
  static const KernelInfo& requireKernel(const std::string& op, const std::string& kernel);
};

/// OpAdapter::peakHostBytes of a case whose memory grows with its elements,
/// rows and columns: `per_element` bytes for each of its M x ld elements,
/// `per_row` for each row, `per_col` for each column (the column sums'
/// oracle), and a fixed `base`; saturates instead of wrapping.
inline uint64_t linearHostBytes(const CaseSpec& c, double per_element, double per_row, double per_col, double base) {
  const double bytes = per_element * double(c.M) * double(c.ld) + per_row * double(c.M) + per_col * double(c.N) + base;
  return bytes >= 1.8e19 ? UINT64_MAX : uint64_t(bytes);
}

/// Whether a case's per-row reference tensors, `bytes_per_element` of them
/// held whole (exact values, budgets, magnitudes), fit the context's
/// max_held_reference_bytes; past it the op streams them (they are made
/// again a block of rows at a time from the case's cached inputs, ctx.inputs).
inline bool referenceFitsHeld(const CaseSpec& c, const ExecContext& ctx, double bytes_per_element) {
  return bytes_per_element * double(c.M) * double(c.N) <= double(ctx.max_held_reference_bytes);
}

/// What a case's M x ld buffers in its dtype add to its peak per element,
/// `tensors` of them, where the block pool keeps them once freed
/// (Buffer::pooledWhenFreed): beside the oracle and the judge. None where
/// each is too large to be pooled.
inline double pooledBytesPerElement(const CaseSpec& c, double tensors) {
  const double bytes = double(storageBytes(c.dtype)) * double(c.M) * double(c.ld);
  return bytes < 0x1p40 && Buffer::pooledWhenFreed(size_t(bytes)) ? tensors * storageBytes(c.dtype) : 0.0;
}

std::vector<const OpAdapter*>& opRegistry();
const OpAdapter* findOp(const std::string& name);
bool registerOp(std::unique_ptr<OpAdapter> op);

}  // namespace ulpcheck
