#include "core/phase_timer.h"

#include <atomic>

namespace ulpcheck {

namespace {

std::array<std::atomic<int64_t>, size_t(Phase::kCount)>& totals() {  // nanoseconds
  static std::array<std::atomic<int64_t>, size_t(Phase::kCount)> t{};
  return t;
}

thread_local PhaseScope* t_innermost = nullptr;

int64_t nanos(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

}  // namespace

const char* phaseName(Phase p) {
  switch (p) {
    case Phase::Inputs: return "inputs";
    case Phase::Buffers: return "buffers+uploads";
    case Phase::Kernel: return "kernels";
    case Phase::Collect: return "downloads+memory checks";
    case Phase::Oracle: return "oracle";
    case Phase::Judge: return "judging";
    default: return "?";
  }
}

std::array<double, size_t(Phase::kCount)> phaseSeconds() {
  std::array<double, size_t(Phase::kCount)> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = double(totals()[i].load()) * 1e-9;
  return out;
}

void resetPhaseSeconds() {
  for (auto& t : totals()) t.store(0);
}

PhaseScope::PhaseScope(Phase phase) : phase_(phase), outer_(t_innermost), since_(std::chrono::steady_clock::now()) {
  if (outer_) {  // the outer phase pauses
    totals()[size_t(outer_->phase_)] += nanos(since_ - outer_->since_);
  }
  t_innermost = this;
}

PhaseScope::~PhaseScope() {
  const auto now = std::chrono::steady_clock::now();
  totals()[size_t(phase_)] += nanos(now - since_);
  t_innermost = outer_;
  if (outer_) outer_->since_ = now;  // and resumes
}

}  // namespace ulpcheck
