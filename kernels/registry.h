// Self-registering kernel variants. A variant's file registers it with a
// static initialiser, so adding a variant touches only that file.
#pragma once

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/spec.h"
#include "kernels/common/row_launch.h"

namespace ulpcheck {

/// A variant's entry point reported failure (a plugin's nonzero return): the
/// case fails with this message.
struct KernelFailure : std::runtime_error {
  explicit KernelFailure(const std::string& what, bool hung = false) : std::runtime_error(what), hang(hung) {}
  bool hang = false;  // it did not return within its time limit and was killed (exit code 5)
};

/// What a variant needs of a case's layout (a plugin's preconditions):
/// generators do not make cases that break them, and a case that does is
/// skipped, saying why.
struct LayoutPreconditions {
  bool contiguous_rows = false;  // ld == N
  bool aligned_rows = false;     // every row starts 16-byte aligned: ld * element bytes % 16 == 0
  int64_t max_cols = 0;          // 0: no limit
  // The hidden sizes to test, where a kernel compiles once per N (quack's
  // CuTe DSL kernels): empty for any N.
  std::vector<int64_t> col_choices;
  // The fewest rows a call may have (FlashInfer's two-shot allreduce fusion
  // asserts more tokens than ranks): 0 for any M.
  int64_t min_rows = 0;
  /// Why a shape breaks them; empty if it does not.
  std::string violation(DType t, int64_t M, int64_t N, int64_t ld) const {
    if (M < min_rows) return "needs at least " + std::to_string(min_rows) + " rows";
    if (!col_choices.empty() && std::find(col_choices.begin(), col_choices.end(), N) == col_choices.end())
      return "is tested at its declared hidden sizes only";
    if (contiguous_rows && ld != N) return "needs contiguous rows (ld == N)";
    if (aligned_rows && (ld * storageBytes(t)) % 16 != 0) return "needs 16-byte aligned rows";
    if (max_cols > 0 && N > max_cols) return "takes at most " + std::to_string(max_cols) + " columns";
    return "";
  }
};

/// The specs a variant implements: for each field of its op's spec
/// (core/spec.h), the values it takes, the default only where it names
/// none. A case asking for another is neither generated for it nor run on it
/// (skipped, saying why). A variant may implement more than the default
/// (ulpcheck's own kernels take every rounding point and offset) or only
/// another (Liger's llama mode rounds x-hat to the activation dtype, never
/// implementing the plain spec in 16 bits). Shrinking goes toward the first
/// value listed.
struct SpecSupport {
  SpecCodes implements;

  /// Declares the values of one field it takes: `.with(kRounding, {Rounding::Plain, Rounding::Llama})`.
  template <typename T>
  SpecSupport& with(const SpecKey<T>& key, std::vector<T> values) {
    std::vector<SpecCode>& codes = implements[key.key];
    codes.clear();
    for (const T& v : values) codes.push_back(key.code(v));
    return *this;
  }
  /// The values it takes of field `key`: the default only, if it names none.
  const std::vector<SpecCode>& of(const std::string& key) const {
    static const std::vector<SpecCode> default_only{0};
    const auto it = implements.find(key);
    return it == implements.end() ? default_only : it->second;
  }
  /// Why a case's spec is not one of these; empty if it is.
  std::string violation(const std::string& op, DType activations, const Spec& s) const {
    for (const SpecField* f : specOf(op).fields) {
      const SpecCode code = s.code(f->key).value_or(0);
      const std::vector<SpecCode>& can = of(f->key);
      if (f->unsupported) {
        if (std::string why = f->unsupported(can, code, activations); !why.empty()) return why;
      } else if (!takes(can, code)) {
        return fmt::format("does not implement {}={}", f->key, f->print(code, activations));
      }
    }
    return "";
  }
};

/// The bitwise and structural promises a variant makes; properties enforce them.
struct Contracts {
  bool deterministic = true;    // repeated runs give identical bits
  bool batch_invariant = true;  // a row's outputs do not depend on M or its position
  DType accumulation = DType::F32;
  // The column reduction (dW) flushes subnormal operands and results to zero,
  // as fp32 global atomics do (PTX red/atom.add.f32); each add may then lose
  // up to the smallest normal, which the budget must allow.
  bool column_reduction_ftz = false;
  // A fused variant names the unfused pipeline it replaces (a registered
  // variant of the same op) and the outputs that must equal that pipeline's
  // bit for bit; the fused_vs_unfused property enforces it.
  std::string unfused_pipeline;
  std::vector<std::string> bitwise_with_unfused;
  // When the unfused pipeline's order of operations is not the variant's (a
  // library collective: NCCL picks its own summation order), bitwise
  // equality is owed only in the rows where the spec determines every bit:
  // those whose oracle tensor of this name has a zero budget throughout.
  std::string bitwise_rows_where_exact;
};

struct KernelInfo {
  std::string op;    // e.g. "rmsnorm"
  std::string name;  // e.g. "cuda_separate"
  Backend backend = Backend::Host;
  std::vector<DType> dtypes;
  Contracts contracts;
  std::string description;
  // Mutants: deliberately buggy variants reproducing a documented real bug.
  std::string bug;        // citation of the bug it reproduces; empty for correct kernels
  std::string caught_by;  // the property that must catch it
  // Multi-rank ops: rank r runs on GPU r (real ranks), so a case needs as
  // many GPUs as ranks; otherwise every rank shares one device (virtual ranks).
  bool one_rank_per_gpu = false;
  // The rank counts it runs at (FlashInfer's allreduce fusion: 2, 4, 8, 16);
  // empty: any.
  std::vector<int> rank_choices;
  // Coverage: the code paths the variant has (vector or scalar loads, row in
  // registers or in the workspace, a large-M dispatch, ...) and the ones a
  // launch of a shape takes; a campaign reports the paths its cases never
  // reached. Empty for a variant that declares none.
  std::vector<std::string> code_paths;
  std::function<std::vector<std::string>(const RowShape&, const LaunchEnv&)> paths_taken;
  LayoutPreconditions preconditions;
  SpecSupport specs;
  // Provenance: "built-in", or the plugin or Python file (with its SHA-256
  // and library versions) it came from; plugin_path / python_file is what a
  // repro command must load again.
  std::string origin = "built-in";
  std::string plugin_path;
  std::string python_file;
  // Runs in a worker process (kernels/plugin/remote.h): a fault or a hang in
  // it is a failing case, not the end of the run.
  bool remote = false;
  // Its insides are unknown to ulpcheck (a plugin's or a Python variant's):
  // besides the rigorous budget of its declared (or worst-case) depths, its
  // accuracy is held to the probabilistic budget where the case's values fit
  // that model (oracles/probabilistic.h).
  bool black_box = false;
  // It compiles a kernel per shape on first use (quack: per dtype, N and a
  // power-of-two bucket of M): the first call of each such shape in a worker
  // is held to remote::kCompileSeconds, not to --case-timeout.
  bool compiles_per_shape = false;
  // Outputs of the op the variant does not produce (a library that does not
  // expose its saved statistics): neither judged nor checked for writes.
  std::vector<std::string> unprovided_outputs;
  bool provides(const std::string& output) const {
    return std::find(unprovided_outputs.begin(), unprovided_outputs.end(), output) == unprovided_outputs.end();
  }
  bool isMutant() const { return !bug.empty(); }
  bool supports(DType t) const { return std::find(dtypes.begin(), dtypes.end(), t) != dtypes.end(); }
  /// Why a case of this dtype, layout and spec cannot run on the variant (its
  /// preconditions, its specs); empty if it can.
  std::string violation(DType t, int64_t M, int64_t N, int64_t ld, const Spec& spec) const {
    if (std::string why = preconditions.violation(t, M, N, ld); !why.empty()) return why;
    return specs.violation(op, t, spec);
  }
};

/// Every registered variant of every op, for listing.
inline std::vector<KernelInfo>& kernelCatalog() {
  static std::vector<KernelInfo> all;
  return all;
}

/// The variants of one op, with their op-specific entry points.
template <typename Kernel>
struct KernelRegistry {
  static std::vector<Kernel>& all() {
    static std::vector<Kernel> kernels;
    return kernels;
  }
  static const Kernel* find(const std::string& name) {
    for (const Kernel& k : all())
      if (k.info.name == name) return &k;
    return nullptr;
  }
  /// Replaces a variant's entry (and its catalog line) in place: how a
  /// loaded plugin variant is moved into a worker process.
  static void replace(Kernel k) {
    for (Kernel& old : all())
      if (old.info.name == k.info.name) old = k;
    for (KernelInfo& info : kernelCatalog())
      if (info.name == k.info.name && info.op == k.info.op) info = k.info;
  }
  static bool add(Kernel k) {
    kernelCatalog().push_back(k.info);
    all().push_back(std::move(k));
    return true;
  }
};

}  // namespace ulpcheck
