// An op's doors: how its variants cross into a worker process (the Python
// door and `ulpcheck worker`, kernels/plugin/remote.h) and in from a C
// plugin (include/ulpcheck/plugin.h, kernels/plugin/plugin_loader.h). Each
// op with doors registers one OpDoor from its own folder
// (kernels/<op>/<op>_door.cpp); the plugin loader and the worker protocol
// meet ops only through it, never by name. A multi-rank op's door
// (OpDoor::multi_rank: allreduce_rmsnorm) runs each rank of a call in a
// worker process of its own, all at once (RankedRemoteEntry).
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json_fwd.hpp>

#include "core/accuracy.h"
#include "include/ulpcheck/plugin.h"
#include "kernels/common/row_launch.h"
#include "kernels/registry.h"

namespace ulpcheck {

class PluginVariant;  // kernels/plugin/plugin_variant.h

/// One call's tensors by the names its op gives them ("x", "w", "rstd", ...);
/// null where the case's spec has none (LayerNorm's beta under affine=nobias).
using NamedTensors = std::vector<std::pair<const char*, const void*>>;

/// Calls entry point `entry` ("rmsnorm_forward", ...) of a variant that runs
/// in a worker process, with the call's tensors; throws KernelFailure when the
/// worker fails it, dies or hangs.
using RemoteEntry = std::function<void(const char* entry, const RowShape&, const LaunchEnv&, const NamedTensors&)>;

/// Calls entry point `entry` of a multi-rank variant: rank r's tensors are
/// per_rank[r], and every rank runs at once, each in its own worker process
/// (its env.rank set); throws KernelFailure when any rank fails, dies or
/// hangs, naming it, after which every rank's worker is restarted (a rank
/// left waiting for a dead peer would hang).
using RankedRemoteEntry = std::function<void(const char* entry, const RowShape&, const LaunchEnv&,
                                             const std::vector<NamedTensors>& per_rank)>;

/// In the worker: the address of the call's tensor `name` in this process
/// (null where the coordinator passed none).
using TensorAt = std::function<void*(const char* name)>;

/// The call's fp32 tensor `name` (saved statistics).
inline float* floatsAt(const TensorAt& at, const char* name) { return static_cast<float*>(at(name)); }

/// For an op without a mean (the RMSNorms, fused or not): why a plugin's
/// variant may not declare LayerNorm's contracts about its mean, variance
/// and saved statistics (they would be ignored, and a user would believe
/// them judged); empty where it declares none. The Python door's
/// ops/norm.py no_layernorm_statistics says the same.
inline std::string noLayerNormStatistics(const ulpcheck_variant& v) {
  for (const auto& [bit, name] : {std::pair{ULPCHECK_TWO_PASS_STATISTICS, "ULPCHECK_TWO_PASS_STATISTICS"},
                                  std::pair{ULPCHECK_MEAN_OF_PLAIN_SUM, "ULPCHECK_MEAN_OF_PLAIN_SUM"},
                                  std::pair{ULPCHECK_USES_SAVED_STATISTICS, "ULPCHECK_USES_SAVED_STATISTICS"}})
    if (v.contracts & bit) return fmt::format("{} is LayerNorm's (its mean and variance); {} has no mean", name, v.op);
  return "";
}

/// The reduction depths of a black-box variant's launch (blackBoxDepths).
using DepthsOf = std::function<ReductionDepths(const RowShape&, const LaunchEnv&)>;

struct OpDoor {
  std::string op;
  /// The outputs a variant that does not save its statistics leaves out
  /// (KernelInfo::unprovided_outputs of a Python variant without saves_stats).
  std::vector<std::string> statistics;
  /// The outputs of a backward the op's variants may lack (fused add +
  /// RMSNorm: an inference kernel has none), left out of a variant without
  /// one; empty where every variant has a backward.
  std::vector<std::string> backward_outputs;
  /// Whether the op has a backward at all (allreduce_rmsnorm, an inference
  /// epilogue, has none: its variants are forward only by definition).
  bool has_backward = true;

  // The coordinator's side.
  /// Replaces registered variant `name`'s entry points with `call` (its
  /// KernelInfo::remote set): how a built-in or plugin variant moves into a
  /// worker process.
  std::function<void(const std::string& name, RemoteEntry call)> forward_into;
  /// Registers a variant that exists only in a worker (a Python variant).
  std::function<void(KernelInfo info, RemoteEntry call, DepthsOf depths)> add_remote;

  // A multi-rank op's (multi_rank set; forward_into and add_remote unset).
  bool multi_rank = false;
  /// Moves a plugin's variant into rank workers: its run becomes `call`.
  std::function<void(const std::string& name, RankedRemoteEntry call)> forward_ranks_into;
  /// Registers a variant that exists only in rank workers (a Python variant).
  std::function<void(KernelInfo info, RankedRemoteEntry call, DepthsOf depths)> add_remote_ranks;

  // The worker's side.
  struct Entry {
    std::string name;  // "rmsnorm_forward"
    /// Runs registered variant `variant` on the call's tensors and returns
    /// (synchronisation is the caller's).
    std::function<void(const std::string& variant, const RowShape&, const TensorAt&, const LaunchEnv&)> run;
  };
  std::vector<Entry> entries;
  /// Registered variant `name` of this op, or null.
  std::function<const KernelInfo*(const std::string& name)> find;

  // The C ABI's side (include/ulpcheck/plugin.h).
  /// Why the plugin's variant cannot be this op's (an entry point it leaves
  /// null); empty if it can.
  std::function<std::string(const ulpcheck_variant&)> plugin_problem;
  /// Registers the plugin's variant, its calls going through the ABI.
  std::function<void(const KernelInfo& info, std::shared_ptr<const PluginVariant> v)> add_plugin;
  /// The spec options (SpecField::option) a plugin's variant may declare:
  /// those whose cases its entry points carry (ulpcheck_variant::spec).
  std::vector<std::string> plugin_spec_options;
};

/// Registered variant `name` of `op`, whose variants KernelRegistry<Kernel> holds;
/// throws std::invalid_argument naming both where there is none.
template <typename Kernel>
const Kernel& registeredVariant(const std::string& op, const std::string& name) {
  const Kernel* k = KernelRegistry<Kernel>::find(name);
  if (!k) throw std::invalid_argument(fmt::format("no {} variant '{}' is registered here", op, name));
  return *k;
}

/// `door` with the parts every op whose variants live in a
/// KernelRegistry<Kernel> (with `info` and `depths`, and `workspace_bytes`
/// and `backward` where its variants have them) shares: forward_into,
/// add_remote and find, given how the op forwards a variant's entry points
/// through a RemoteEntry (`forwarded`, which sets info.remote). A variant
/// without a backward (its OpDoor::backward_outputs unprovided) gets none in
/// the worker either.
template <typename Kernel>
OpDoor withRegistry(OpDoor door, Kernel (*forwarded)(Kernel, RemoteEntry)) {
  using Registry = KernelRegistry<Kernel>;
  auto forward = [forwarded, optional = door.backward_outputs](Kernel k, RemoteEntry call) {
    k = forwarded(std::move(k), std::move(call));
    if constexpr (requires { k.backward; })
      if (!optional.empty() && !k.info.provides(optional.front())) k.backward = nullptr;
    return k;
  };
  door.forward_into = [forward, op = door.op](const std::string& name, RemoteEntry call) {
    Registry::replace(forward(registeredVariant<Kernel>(op, name), std::move(call)));
  };
  door.add_remote = [forward](KernelInfo info, RemoteEntry call, DepthsOf depths) {
    Kernel k{};
    k.info = std::move(info);
    if constexpr (requires { k.workspace_bytes; })
      k.workspace_bytes = [](const RowShape&, const LaunchEnv&) { return size_t(0); };
    k.depths = std::move(depths);
    Registry::add(forward(std::move(k), std::move(call)));
  };
  door.find = [](const std::string& name) -> const KernelInfo* {
    const Kernel* k = Registry::find(name);
    return k ? &k->info : nullptr;
  };
  return door;
}

/// Registers an op's doors (from a static initialiser in its folder).
bool registerDoor(OpDoor door);
/// The doors of `op`, or null where it has none.
const OpDoor* findDoor(const std::string& op);
/// The ops with doors, sorted ("layernorm, rmsnorm"), for messages.
std::string opsWithDoors();
/// What a variant declares it implements of `op`'s spec, from its options
/// (option -> value, the same through both doors: SpecField::option).
/// Throws std::invalid_argument for an option `op` has not, or a value its
/// field cannot take, naming it.
SpecSupport declaredSpecSupport(const std::string& op, const nlohmann::json& options);

/// A C plugin's declaration (ulpcheck_variant::spec: "option=value ...",
/// values as JSON literals, a bare word a name) as the options object
/// declaredSpecSupport reads; null or "" is none. Throws
/// std::invalid_argument for an item that is not option=value.
nlohmann::json parseSpecDeclaration(const char* text);

/// Entry point `entry` and the door that serves it (the worker's side), or
/// two nulls.
std::pair<const OpDoor*, const OpDoor::Entry*> entryPoint(const std::string& entry);

}  // namespace ulpcheck
