#include "kernels/plugin/plugin_loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/cuda_ops.h"
#include "core/sha256.h"
#include "include/ulpcheck/plugin.h"
#include "kernels/door.h"
#include "kernels/plugin/plugin_variant.h"

namespace ulpcheck {

namespace {

// 128 TiB: more than any machine ulpcheck runs on has, far less than sizes
// that wrap when red zones are added.
constexpr size_t kLargestWorkspaceBytes = size_t{1} << 47;

// Version 1's ulpcheck_variant: every field before version 2's `spec`;
// version 2's, every field before version 3's fused add backward; version
// 3's, every field before version 4's unfused pipeline; version 4's, every
// field before version 5's allreduce_rmsnorm; version 5's, every field
// before version 6's rmsnorm_quant (its uint32_t rank_counts padded to 8).
constexpr size_t kVariantSizeV1 = offsetof(ulpcheck_variant, spec);
constexpr size_t kVariantSizeV2 = offsetof(ulpcheck_variant, fused_add_rmsnorm_backward);
constexpr size_t kVariantSizeV3 = offsetof(ulpcheck_variant, unfused_pipeline);
constexpr size_t kVariantSizeV4 = offsetof(ulpcheck_variant, allreduce_rmsnorm);
constexpr size_t kVariantSizeV5 = offsetof(ulpcheck_variant, rmsnorm_quant);
constexpr size_t kVariantSizeV6 = offsetof(ulpcheck_variant, fused_add_rmsnorm_quant);

/// The variant size a plugin of ABI version `abi` must state (0: a version
/// this ulpcheck cannot read).
size_t variantSizeOf(uint32_t abi) {
  switch (abi) {
    case 1: return kVariantSizeV1;
    case 2: return kVariantSizeV2;
    case 3: return kVariantSizeV3;
    case 4: return kVariantSizeV4;
    case 5: return kVariantSizeV5;
    case 6: return kVariantSizeV6;
    case 7: return sizeof(ulpcheck_variant);
    default: return 0;
  }
}

/// Variant i of the plugin's table, laid out as this header does: the table
/// is read with the plugin's own variant size, the fields its version lacks
/// left zero (a version 1 variant declares no spec).
ulpcheck_variant variantAt(const ulpcheck_plugin& p, int32_t i) {
  ulpcheck_variant v{};
  std::memcpy(&v, reinterpret_cast<const char*>(p.variants) + size_t(i) * p.variant_size, p.variant_size);
  return v;
}

std::vector<LoadedPlugin>& plugins() {
  static std::vector<LoadedPlugin> all;
  return all;
}

}  // namespace

DType dtypeOf(ulpcheck_dtype t) {
  return t == ULPCHECK_F32 ? DType::F32 : t == ULPCHECK_F16 ? DType::F16 : DType::BF16;
}
ulpcheck_dtype abiDtype(DType t) {
  switch (t) {
    case DType::F32: return ULPCHECK_F32;
    case DType::F16: return ULPCHECK_F16;
    case DType::BF16: return ULPCHECK_BF16;
    case DType::E4M3: return ULPCHECK_E4M3;
    case DType::E5M2: return ULPCHECK_E5M2;
  }
  return ULPCHECK_F32;
}

size_t PluginVariant::workspaceBytes(const RowShape& s) const {
  if (!v_.workspace_bytes) return 0;
  const ulpcheck_shape shape{abiDtype(s.dtype), s.M, s.N, s.ld, s.eps};
  return checkedSize(v_.workspace_bytes(&shape, v_.user_data), "workspace_bytes", s);
}

size_t PluginVariant::commBytes(const RowShape& s, int ranks) const {
  if (!v_.comm_bytes) return 0;
  const ulpcheck_shape shape{abiDtype(s.dtype), s.M, s.N, s.ld, s.eps};
  return checkedSize(v_.comm_bytes(&shape, ranks, v_.user_data), "comm_bytes", s);
}

size_t PluginVariant::checkedSize(size_t bytes, const char* query, const RowShape& s) const {
  // A size query that fails often answers (size_t)-1: past any memory a
  // machine has, it is the case's failure, never an allocation (whose
  // size, red zones added, would wrap). A size that is only too large for
  // this machine is a case that does not fit (skipped, saying so).
  if (bytes > kLargestWorkspaceBytes)
    throw KernelFailure(fmt::format(
        "{}: {} returned {}{} for M={} N={} ld={}: not a size (an error "
        "code?); more than 2^47 bytes",
        v_.name, query, bytes, bytes >= (size_t(1) << 63) ? fmt::format(" ({} as a signed size)", int64_t(bytes)) : "",
        s.M, s.N, s.ld));
  return bytes;
}

ulpcheck_launch PluginVariant::launch(const LaunchEnv& e, void* workspace, size_t bytes) const {
  const bool cuda = v_.backend == ULPCHECK_CUDA;
  return ulpcheck_launch{
      e.stream,    cuda ? cudaops::currentDevice() : -1, bytes ? workspace : nullptr, bytes, cuda ? e.sm_count : 0,
      v_.user_data};
}

void PluginVariant::check(int rc, const char* entry) const {
  if (rc == 0) return;
  const char* why = plugin_.last_error ? plugin_.last_error() : nullptr;
  throw KernelFailure(fmt::format("{}: {} returned {}{}", v_.name, entry, rc,
                                  why && *why ? fmt::format(": {}", why) : std::string(" (no message)")));
}

ReductionDepths PluginVariant::depths(const RowShape& s) const {
  ReductionDepths declared;
  declared.two_pass_statistics = v_.contracts & ULPCHECK_TWO_PASS_STATISTICS;
  declared.mean_of_plain_sum = v_.contracts & ULPCHECK_MEAN_OF_PLAIN_SUM;
  declared.uses_saved_statistics = v_.contracts & ULPCHECK_USES_SAVED_STATISTICS;
  return blackBoxDepths(DeclaredDepth{v_.row_depth}, DeclaredDepth{v_.col_depth}, s, declared);
}

namespace {

bool validName(const char* s) {
  if (!s || !*s) return false;
  for (const char* c = s; *c; ++c)
    if (!(std::isalnum(static_cast<unsigned char>(*c)) || *c == '_' || *c == '-' || *c == '.')) return false;
  return true;
}

/// What a variant declares of its op's spec (ulpcheck_variant::spec); throws
/// std::invalid_argument for a declaration ulpcheck cannot read, or an
/// option the op's C entry points do not carry.
SpecSupport declaredSpecs(const ulpcheck_variant& v, const OpDoor& door) {
  const nlohmann::json options = parseSpecDeclaration(v.spec);
  SpecSupport support = declaredSpecSupport(v.op, options);  // refuses an option the op has not
  const std::vector<std::string>& carried = door.plugin_spec_options;
  for (const auto& [option, value] : options.items())
    if (std::find(carried.begin(), carried.end(), option) == carried.end())
      throw std::invalid_argument(fmt::format("'{}' cannot be declared through the C ABI yet (its {} entry points "
                                              "carry {})",
                                              option, v.op, fmt::join(carried, ", ")));
  return support;
}

/// Why variant i of the plugin cannot be used; empty if it can.
/// The outputs of a comma-separated list ("residual_out, y"); empty for NULL.
std::vector<std::string> outputsNamedIn(const char* list) {
  std::vector<std::string> out;
  std::string item;
  for (const char c : std::string(list ? list : "") + ",") {
    if (c != ',') {
      if (c != ' ') item += c;
    } else if (!item.empty()) {
      out.push_back(std::move(item));
      item.clear();
    }
  }
  return out;
}

std::string problemWith(const ulpcheck_variant& v) {
  if (!validName(v.name)) return "its name must be letters, digits, '_', '-' or '.'";
  const OpDoor* door = v.op ? findDoor(v.op) : nullptr;
  if (!door) return fmt::format("op '{}' is not one of {}", v.op ? v.op : "(null)", opsWithDoors());
  if (v.backend != ULPCHECK_HOST && v.backend != ULPCHECK_CUDA)
    return fmt::format("backend {} is not host (0) or cuda (1)", int(v.backend));
  if (v.dtypes == 0 || (v.dtypes & ~7u))
    return fmt::format("dtypes mask {:#x} names no dtype or an unknown one", v.dtypes);
  if (unsigned(v.accumulation) > ULPCHECK_BF16)
    return fmt::format("accumulation {} is not a dtype", int(v.accumulation));
  if (v.contracts & ~63u) return fmt::format("unknown contract bits {:#x}", v.contracts);
  if (v.rank_counts & ~((2u << ULPCHECK_MAX_RANKS) - 2u))
    return fmt::format("rank_counts {:#x} names a world size outside 1 to {}", v.rank_counts, ULPCHECK_MAX_RANKS);
  if (v.preconditions & ~3u) return fmt::format("unknown precondition bits {:#x}", v.preconditions);
  if (v.row_depth < 0 || v.col_depth < 0 || v.max_cols < 0) return "depths and max_cols must be >= 0";
  if (std::string why = door->plugin_problem(v); !why.empty()) return why;
  if (v.unfused_pipeline) {
    if (!validName(v.unfused_pipeline) || std::string(v.unfused_pipeline) == v.name)
      return fmt::format("its unfused pipeline '{}' must be the name of another variant", v.unfused_pipeline);
    const std::vector<std::string> outputs = outputsNamedIn(v.bitwise_with_unfused);
    if (outputs.empty())
      return "it names an unfused pipeline but no output it equals bit for bit (bitwise_with_unfused)";
    for (const std::string& o : outputs)
      if (!validName(o.c_str())) return fmt::format("bitwise_with_unfused names '{}', not an output name", o);
  }
  for (const KernelInfo& k : kernelCatalog())
    if (k.name == v.name) return fmt::format("the name is taken (by {} variant '{}', {})", k.op, k.name, k.origin);
  return "";
}

}  // namespace

const std::vector<LoadedPlugin>& loadedPlugins() { return plugins(); }

ReductionDepths blackBoxDepths(DeclaredDepth row, DeclaredDepth col, const RowShape& s, const ReductionDepths& declared,
                               DeclaredRunningMeans running) {
  ReductionDepths d;
  d.running_chain = running.chain(s.N);
  d.running_merges = running.lanes > 0 ? running.levels : 0;
  d.running_update_merges = running.updateMerges(s.N);
  d.two_pass_statistics = declared.two_pass_statistics;
  d.mean_of_plain_sum = declared.mean_of_plain_sum;
  d.uses_saved_statistics = declared.uses_saved_statistics;
  d.row = row.over(s.N);
  d.col = col.over(s.M);
  return d;
}

const LoadedPlugin& loadPlugin(const std::string& given) {
  std::error_code ec;
  const std::string path = std::filesystem::absolute(given, ec).lexically_normal().string();
  for (const LoadedPlugin& p : plugins())
    if (p.path == path) return p;
  if (std::filesystem::is_directory(path, ec))
    throw PluginError(fmt::format("{}: is a folder; give the plugin's shared library (lib<name>.so)", given));
  if (!std::filesystem::is_regular_file(path, ec)) throw PluginError(fmt::format("{}: no such file", given));
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw PluginError(fmt::format("{}: cannot be loaded: {}", given, dlerror()));
  const auto entry = reinterpret_cast<ulpcheck_plugin_entry_fn>(dlsym(handle, ULPCHECK_PLUGIN_ENTRY));
  // The entry point defined in C++ without extern "C" carries its mangled name.
  constexpr const char* kMangledEntry = "_Z18ulpcheck_plugin_v1v";
  if (!entry && dlsym(handle, kMangledEntry))
    throw PluginError(fmt::format("{}: exports {} with C++ linkage (the symbol {}), not the C symbol ulpcheck looks "
                                  "up: declare it extern \"C\" (see include/ulpcheck/plugin.h)",
                                  given, ULPCHECK_PLUGIN_ENTRY, kMangledEntry));
  if (!entry)
    throw PluginError(fmt::format("{}: exports no {} (is it a ulpcheck plugin? see include/ulpcheck/plugin.h)", given,
                                  ULPCHECK_PLUGIN_ENTRY));
  const ulpcheck_plugin* plugin = entry();
  if (!plugin) throw PluginError(fmt::format("{}: {}() returned no plugin table", given, ULPCHECK_PLUGIN_ENTRY));
  const size_t variant_size = variantSizeOf(plugin->abi_version);
  if (!variant_size)
    throw PluginError(fmt::format("{}: built against plugin ABI version {}; this ulpcheck reads versions 1 to {}",
                                  given, plugin->abi_version, ULPCHECK_ABI_VERSION));
  if (plugin->variant_size != variant_size)
    throw PluginError(fmt::format("{}: its ulpcheck_variant is {} bytes, version {}'s are {} (built against another "
                                  "header?)",
                                  given, plugin->variant_size, plugin->abi_version, variant_size));
  if (plugin->num_variants < 1 || plugin->num_variants > 1024 || !plugin->variants)
    throw PluginError(fmt::format("{}: declares {} variants (1 to 1024 expected)", given, plugin->num_variants));
  // Validate every variant before registering any: a plugin loads whole or not at all.
  std::vector<ulpcheck_variant> variants;
  std::vector<SpecSupport> specs;  // what each declares (ulpcheck_variant::spec)
  for (int32_t i = 0; i < plugin->num_variants; ++i) {
    variants.push_back(variantAt(*plugin, i));
    const ulpcheck_variant& v = variants.back();
    std::string why = problemWith(v);
    if (why.empty()) {
      try {
        specs.push_back(declaredSpecs(v, *findDoor(v.op)));
      } catch (const std::invalid_argument& e) {
        why = fmt::format("its spec \"{}\": {}", v.spec ? v.spec : "", e.what());
      }
    }
    if (!why.empty())
      throw PluginError(fmt::format("{}: variant {} ('{}'): {}", given, i, v.name ? v.name : "(null)", why));
    // Names are unique within the table too: `--kernel NAME` would run only
    // the first of two, and a run could pass without the other being judged.
    for (int32_t j = 0; j < i; ++j)
      if (std::string(variants[j].name) == v.name)
        throw PluginError(
            fmt::format("{}: variants {} and {} are both named '{}' (names must be unique)", given, j, i, v.name));
  }

  LoadedPlugin loaded{path, plugin->name ? plugin->name : "(unnamed)", sha256File(path), {}};
  for (size_t i = 0; i < variants.size(); ++i) {
    const ulpcheck_variant& v = variants[i];
    KernelInfo info;
    info.op = v.op;
    info.name = v.name;
    info.backend = v.backend == ULPCHECK_CUDA ? Backend::Cuda : Backend::Host;
    for (ulpcheck_dtype t : {ULPCHECK_F32, ULPCHECK_F16, ULPCHECK_BF16})
      if (v.dtypes & ULPCHECK_DTYPE_BIT(t)) info.dtypes.push_back(dtypeOf(t));
    info.contracts.deterministic = v.contracts & ULPCHECK_DETERMINISTIC;
    info.contracts.batch_invariant = v.contracts & ULPCHECK_BATCH_INVARIANT;
    info.contracts.column_reduction_ftz = v.contracts & ULPCHECK_COLUMN_SUM_FLUSHES_SUBNORMALS;
    info.contracts.accumulation = dtypeOf(v.accumulation);
    if (v.unfused_pipeline) {
      info.contracts.unfused_pipeline = v.unfused_pipeline;
      info.contracts.bitwise_with_unfused = outputsNamedIn(v.bitwise_with_unfused);
    }
    info.description = v.description ? v.description : "";
    info.preconditions = {bool(v.preconditions & ULPCHECK_NEEDS_CONTIGUOUS_ROWS),
                          bool(v.preconditions & ULPCHECK_NEEDS_ALIGNED_ROWS), v.max_cols};
    info.origin = fmt::format("plugin {} ({}, sha256 {})", path, loaded.name, loaded.sha256);
    info.plugin_path = path;
    info.black_box = true;
    info.specs = specs[i];
    findDoor(info.op)->add_plugin(info, std::make_shared<const PluginVariant>(*plugin, v));
    loaded.variants.push_back(info.name);
  }
  // The library stays loaded for the life of the process: its code is called until exit.
  plugins().push_back(std::move(loaded));
  return plugins().back();
}

}  // namespace ulpcheck
