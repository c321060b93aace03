// What a campaign checks: its op, properties, kernels and dtypes, checked
// against the registries, and which (kernel, property, dtype) cells that
// makes applicable.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "harness/runner/campaign_result.h"
#include "properties/op.h"

namespace ulpcheck {

struct SelectionRequest {
  std::string op;
  std::vector<std::string> kernels;     // empty: the backend's defaults
  std::vector<std::string> properties;  // empty: all
  std::vector<DType> dtypes;            // empty: all
};

struct Selection {
  const OpAdapter* op = nullptr;
  std::vector<const Property*> properties;
  std::vector<std::string> kernels;
  std::vector<DType> dtypes;
  /// The property applies to the case's kernel and the case (Property::appliesTo).
  bool applies(const Property& p, const CaseSpec& c) const;
  /// The case fits its kernel's dtypes, layout preconditions and specs.
  static bool fits(const CaseSpec& c);
  /// The cells the case would check: nullopt when it does not fit its kernel.
  std::optional<std::vector<CellKey>> cellsOf(const CaseSpec& c) const;
};

/// Throws std::invalid_argument for an unknown op, property or kernel, or a
/// CUDA kernel without a GPU.
Selection select(const SelectionRequest& request, Backend backend);

/// The kernels a campaign runs by default on this backend.
std::vector<std::string> defaultKernels(const std::string& op, Backend backend);

/// Declares in `result` what the selection makes applicable: each kernel's
/// code paths, each (kernel, property) pair, each cell, and the properties
/// `named` that apply to no kernel. A kernel taking none of the dtypes is
/// said through `log` once.
void declareApplicable(const Selection& sel, const std::vector<std::string>& named, CampaignResult& result,
                       const std::function<void(const std::string&)>& log);

}  // namespace ulpcheck
