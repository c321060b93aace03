#include "harness/report/catalog.h"

#include <fmt/format.h>

#include "core/device.h"
#include "kernels/registry.h"
#include "properties/op.h"
#include "properties/property.h"

namespace ulpcheck {

std::string formatCatalog() {
  std::string out = "ops:\n";
  for (const OpAdapter* op : opRegistry()) out += fmt::format("  {}\n", op->name());
  out += "\nkernel variants:\n";
  out += fmt::format("  {:<17} {:<29} {:<5} {:<15} {:<13} {:<6} {}\n", "op", "variant", "back", "dtypes",
                     "deterministic", "b-inv", "description");
  for (const KernelInfo& k : kernelCatalog()) {
    std::string dtypes;
    for (DType t : k.dtypes) dtypes += std::string(dtypes.empty() ? "" : ",") + dtypeName(t);
    out += fmt::format("  {:<17} {:<29} {:<5} {:<15} {:<13} {:<6} {}\n", k.op, k.name, backendName(k.backend), dtypes,
                       k.contracts.deterministic ? "yes" : "no", k.contracts.batch_invariant ? "yes" : "no",
                       k.description);
    if (k.contracts.column_reduction_ftz)
      out += fmt::format("  {:<17} {:<29} contract: its dW reduction flushes subnormals to zero\n", "", "");
    if (k.isMutant())
      out += fmt::format("  {:<17} {:<29} reproduces: {}; must be caught by: {}\n", "", "", k.bug, k.caught_by);
    if (k.origin != "built-in") out += fmt::format("  {:<17} {:<29} from {}\n", "", "", k.origin);
    if (const auto& p = k.preconditions; p.contiguous_rows || p.aligned_rows || p.max_cols)
      out += fmt::format("  {:<17} {:<29} preconditions:{}{}{}\n", "", "", p.contiguous_rows ? " contiguous rows" : "",
                         p.aligned_rows ? " 16-byte aligned rows" : "",
                         p.max_cols ? fmt::format(" N <= {}", p.max_cols) : "");
  }
  out += "\nproperties:\n";
  for (const Property& p : propertyRegistry()) out += fmt::format("  {:<18} {}\n", p.name, p.description);
  const DeviceInfo& dev = queryDevice();
  out += fmt::format("\ndevice: {}\n", dev.available ? fmt::format("{} ({} SMs)", dev.name, dev.sm_count) : dev.reason);
  return out;
}

}  // namespace ulpcheck
