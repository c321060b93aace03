// One variant of a loaded C plugin (include/ulpcheck/plugin.h) as ulpcheck
// calls it: its workspace query, its launch record, its return codes, its
// declared depths. The plugin loader makes them; each op's door
// (kernels/<op>/<op>_door.cpp) calls its own entry points through them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/accuracy.h"
#include "include/ulpcheck/plugin.h"
#include "kernels/common/row_launch.h"

namespace ulpcheck {

DType dtypeOf(ulpcheck_dtype t);
ulpcheck_dtype abiDtype(DType t);

/// A tensor descriptor of the ABI.
inline ulpcheck_tensor abiTensor(const void* p, DType t, int64_t rows, int64_t cols, int64_t ld) {
  return ulpcheck_tensor{const_cast<void*>(p), abiDtype(t), rows, cols, ld};
}

class PluginVariant {
 public:
  /// `v`: the variant as this ulpcheck's header lays it out (a copy: a
  /// version 1 table is read with its own variant size, the fields it
  /// lacks zero).
  PluginVariant(const ulpcheck_plugin& plugin, const ulpcheck_variant& v) : plugin_(plugin), v_(v) {}

  /// Its workspace_bytes answer; throws KernelFailure for one past 2^47
  /// bytes (an error code such as (size_t)-1, which would wrap).
  size_t workspaceBytes(const RowShape& s) const;
  /// Its comm_bytes answer (multi-rank variants), checked the same way.
  size_t commBytes(const RowShape& s, int ranks) const;
  ulpcheck_launch launch(const LaunchEnv& e, void* workspace, size_t bytes) const;
  /// A nonzero return is the case's failure (KernelFailure), with the plugin's message.
  void check(int rc, const char* entry) const;
  ReductionDepths depths(const RowShape& s) const;
  const ulpcheck_variant& abi() const { return v_; }

 private:
  size_t checkedSize(size_t bytes, const char* query, const RowShape& s) const;
  const ulpcheck_plugin& plugin_;
  const ulpcheck_variant v_;
};

}  // namespace ulpcheck
