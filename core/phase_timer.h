// Where a run's wall time goes: each thread that enters a phase is charged
// for it until it leaves, a phase entered inside another pausing the outer
// one (so the phases never count a second twice), and the process keeps the
// totals. `ulpcheck run` prints them, so a slow campaign says which part is
// slow (input generation, buffers and transfers, the kernels, the memory
// checks of the outputs, the oracle, judging) instead of leaving it to a
// profiler the user may not have on their CI runner.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace ulpcheck {

enum class Phase : uint8_t {
  Inputs,   // generating input tensors (on the host; on the GPU for its judge)
  Buffers,  // allocating, poisoning and uploading a run's buffers
  Kernel,   // the variant's launches, synchronised
  Collect,  // downloading outputs and inputs, the memory-safety checks
  Oracle,   // the reference and its budgets
  Judge,    // accuracy judgments and bitwise comparisons
  kCount
};
const char* phaseName(Phase p);

/// Seconds charged to each phase so far in this process (all threads).
std::array<double, size_t(Phase::kCount)> phaseSeconds();
void resetPhaseSeconds();

/// Charges the calling thread's time to `phase` while it lives.
class PhaseScope {
 public:
  explicit PhaseScope(Phase phase);
  ~PhaseScope();
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Phase phase_;
  PhaseScope* outer_;
  std::chrono::steady_clock::time_point since_;
};

}  // namespace ulpcheck
