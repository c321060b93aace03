#include "properties/case_context.h"

#include <chrono>

#include <fmt/format.h>

#include "core/datagen.h"
#include "core/phase_timer.h"
#include "kernels/plugin/remote.h"

namespace ulpcheck {

namespace {
double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

CaseContext::CaseContext(CaseSpec spec, const OpAdapter& op, const ExecContext& exec)
    : spec_(std::move(spec)), op_(op), exec_(exec) {
  exec_.inputs = inputs_.get();
  const KernelInfo* k = OpAdapter::findKernel(spec_.op, spec_.kernel);
  if (!k)
    throw CaseParseError(
        fmt::format("op '{}' has no kernel variant '{}' (see `ulpcheck list`)", spec_.op, spec_.kernel));
  // A case the variant cannot run, as a precondition or spec it lacks (not a malformed case).
  if (!k->supports(spec_.dtype))
    throw CaseNotRunnableHere(fmt::format("{} does not take dtype {}", spec_.kernel, dtypeName(spec_.dtype)));
  kernel_ = *k;
}

const RunResult& CaseContext::baseRun() {
  if (!base_) {
    const uint64_t cold_before = remote::coldCallsOnThisThread().count;
    base_ = run(identityRows(spec_.M));
    if (remote::coldCallsOnThisThread().count != cold_before) base_cold_why_ = remote::coldCallsOnThisThread().last_why;
  }
  return *base_;
}

std::string CaseContext::coldBaseRunNote() const {
  if (base_cold_why_.empty()) return "";
  return fmt::format("run 0 was {}'s {} (cold: a defect of the first call only, aiter #4888's class, shows so); ",
                     kernel_.name, base_cold_why_);
}

RunResult CaseContext::run(const RowLayout& layout, bool perturb_schedule, const RunResult* repeats) {
  const PhaseScope phase(Phase::Kernel);  // what generation, buffers and checks inside leave over
  const auto t0 = std::chrono::steady_clock::now();
  ExecContext exec = exec_;
  exec.perturb_schedule |= perturb_schedule;
  exec.repeats = repeats;
  RunResult r = op_.run(spec_, layout, exec);
  kernel_seconds_ += secondsSince(t0);
  return r;
}

const std::vector<ReferenceTensor>& CaseContext::reference() {
  if (!reference_) {
    const PhaseScope phase(Phase::Oracle);
    const auto t0 = std::chrono::steady_clock::now();
    reference_ = op_.reference(spec_, exec_);
    // Only the outputs the variant produces are judged.
    std::erase_if(*reference_, [&](const ReferenceTensor& t) { return !kernel_.provides(t.name); });
    oracle_seconds_ += secondsSince(t0);
  }
  return *reference_;
}

}  // namespace ulpcheck
