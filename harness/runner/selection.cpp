#include "harness/runner/selection.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/device.h"
#include "harness/runner/run_case.h"

namespace ulpcheck {

bool Selection::applies(const Property& p, const CaseSpec& c) const {
  return p.appliesTo(*op, kernelOf(c)) && p.appliesTo(c);
}

bool Selection::fits(const CaseSpec& c) {
  const KernelInfo& k = kernelOf(c);
  return k.supports(c.dtype) && k.violation(c.dtype, c.M, c.N, c.ld, c.spec).empty();
}

std::optional<std::vector<CellKey>> Selection::cellsOf(const CaseSpec& c) const {
  if (!fits(c)) return std::nullopt;
  std::vector<CellKey> cells;
  for (const Property* p : properties)
    if (applies(*p, c)) cells.emplace_back(c.kernel, p->name, dtypeName(c.dtype));
  return cells;
}

Selection select(const SelectionRequest& o, Backend backend) {
  Selection s;
  s.op = findOp(o.op);
  if (!s.op) throw std::invalid_argument(fmt::format("unknown op '{}' (see `ulpcheck list`)", o.op));
  if (o.properties.empty()) {
    for (const Property& p : propertyRegistry()) s.properties.push_back(&p);
  } else {
    for (const auto& name : o.properties) {
      const Property* p = findProperty(name);
      if (!p) throw std::invalid_argument(fmt::format("unknown property '{}' (see `ulpcheck list`)", name));
      s.properties.push_back(p);
    }
  }
  s.kernels = o.kernels.empty() ? defaultKernels(o.op, backend) : o.kernels;
  for (const auto& k : s.kernels) {
    const KernelInfo* info = OpAdapter::findKernel(o.op, k);
    if (!info)
      throw std::invalid_argument(fmt::format("op '{}' has no kernel variant '{}' (see `ulpcheck list`)", o.op, k));
    if (info->backend == Backend::Cuda && !queryDevice().available)
      throw std::invalid_argument(fmt::format("kernel '{}' needs a GPU: {}", k, queryDevice().reason));
  }
  s.dtypes = o.dtypes.empty() ? std::vector<DType>(std::begin(kAllDTypes), std::end(kAllDTypes)) : o.dtypes;
  return s;
}

std::vector<std::string> defaultKernels(const std::string& op, Backend backend) {
  std::vector<std::string> out;
  // Variants with one rank per GPU join the defaults where there are at least two GPUs.
  for (const KernelInfo& k : kernelCatalog())
    if (k.op == op && k.backend == backend && !k.isMutant() && (!k.one_rank_per_gpu || queryDevice().count >= 2))
      out.push_back(k.name);
  return out;
}

void declareApplicable(const Selection& sel, const std::vector<std::string>& named, CampaignResult& result,
                       const std::function<void(const std::string&)>& log) {
  const std::string op = sel.op->name();  // named: g++ 13 takes a reference bound beside a temporary for dangling
  for (const auto& kernel : sel.kernels) {
    const KernelInfo& info = OpAdapter::requireKernel(op, kernel);
    // A kernel that takes none of the selected dtypes runs no case: said
    // once, not as "judged nothing" for each of its properties.
    if (std::none_of(sel.dtypes.begin(), sel.dtypes.end(), [&](DType t) { return info.supports(t); })) {
      std::vector<std::string> takes;
      for (DType t : info.dtypes) takes.push_back(dtypeName(t));
      log(fmt::format("{} takes none of the dtypes selected: it takes {}", kernel, fmt::join(takes, ", ")));
      continue;
    }
    for (const auto& path : info.code_paths) result.paths[kernel][path] = 0;
    for (const Property* p : sel.properties)
      if (p->appliesTo(*sel.op, info)) {
        result.judged[{kernel, p->name}] = 0;
        for (DType t : sel.dtypes)
          if (info.supports(t)) result.applicable_cells.insert({kernel, p->name, dtypeName(t)});
      }
  }
  for (const auto& name : named)
    if (std::none_of(result.judged.begin(), result.judged.end(), [&](const auto& j) { return j.first.second == name; }))
      result.inapplicable_properties.push_back(name);
}

}  // namespace ulpcheck
