// What other projects' test suites would have said about the same kernel:
// each baseline checker runs the fixed shapes with randn inputs such a suite
// uses, and judges the kernel's outputs against a reference with that suite's
// tolerance rule. The kill matrix puts one column per baseline beside the
// properties, so it shows mutant by mutant what a conventional check misses.
// The reference is the correctly rounded exact result (the MPFR oracle's),
// kinder to the baselines than the fp32 PyTorch references they really use.
#pragma once

#include <string>
#include <vector>

#include "core/case_spec.h"
#include "properties/op.h"

namespace ulpcheck {

struct BaselineVerdict {
  bool applies = false;  // the suite has cases for this op and dtype
  bool caught = false;
  std::string detail;  // the first rejected case and element, or why it passed
};

struct Baseline {
  std::string name;
  std::string description;  // the rule and where it comes from
  /// The suite's fixed cases of an op it tests (OpAdapter::baselineSuites).
  std::vector<CaseSpec> (*cases)(const OpAdapter& op);
  /// Whether one output tensor passes the suite's rule against the reference.
  bool (*accepts)(const OutputTensor& got, const ReferenceTensor& ref, std::string& why);
};

const std::vector<Baseline>& baselines();

/// The fixed cases of suite `b` for `op`: empty where the op does not list it
/// among the suites that test it (OpAdapter::baselineSuites).
std::vector<CaseSpec> baselineCases(const Baseline& b, const OpAdapter& op);

/// Runs a baseline's cases on `kernel` (of `op`) and applies its rule to every
/// output the oracle has a reference for (rank 0's, as those suites check).
BaselineVerdict runBaseline(const Baseline& b, const KernelInfo& kernel, const ExecContext& exec);

}  // namespace ulpcheck
