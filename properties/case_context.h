// One case under test: its spec, its op, where it runs, and the results the
// properties share (the base run and the oracle are computed once).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "properties/op.h"

namespace ulpcheck {

class CaseContext {
 public:
  CaseContext(CaseSpec spec, const OpAdapter& op, const ExecContext& exec);

  const CaseSpec& spec() const { return spec_; }
  const OpAdapter& op() const { return op_; }
  const KernelInfo& kernel() const { return kernel_; }
  const ExecContext& exec() const { return exec_; }

  /// The run on the case's own batch (rows 0..M-1), computed once.
  const RunResult& baseRun();
  /// Where the base run was cold (remote::coldCallsOnThisThread: a
  /// variant's first call in a freshly started worker, its first of a shape
  /// it compiles for, a captured graph's first replay): "run 0 was
  /// <kernel>'s first call ..." for a property's summary when run 0 alone
  /// differs; else "".
  std::string coldBaseRunNote() const;
  /// A further run on another batch layout (not cached); beside a schedule-
  /// perturbing load when `perturb_schedule` (or the context's own setting).
  /// `repeats`: a run of the same layout this one repeats; outputs with its
  /// bits are then not downloaded (OutputTensor::downloaded).
  RunResult run(const RowLayout& layout, bool perturb_schedule = false, const RunResult* repeats = nullptr);
  /// The oracle's reference, computed once.
  const std::vector<ReferenceTensor>& reference();
  /// Drops the cached base run (the oracle stays): the next check runs the
  /// kernel afresh, as a repeat of the case must (`ulpcheck repro --repeat`).
  void forgetRuns() { base_.reset(); }

  double kernelSeconds() const { return kernel_seconds_; }
  double oracleSeconds() const { return oracle_seconds_; }

 private:
  CaseSpec spec_;
  const OpAdapter& op_;
  KernelInfo kernel_;
  ExecContext exec_;
  std::optional<RunResult> base_;
  std::string base_cold_why_;  // how the base run was cold (a first call in a fresh worker, ...), or empty
  std::optional<std::vector<ReferenceTensor>> reference_;
  double kernel_seconds_ = 0, oracle_seconds_ = 0;
  std::unique_ptr<InputCache> inputs_ = std::make_unique<InputCache>();  // exec_.inputs points here
};

}  // namespace ulpcheck
