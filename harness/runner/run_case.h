// The run-a-case stage: checks one property on one case, turning what a
// kernel can do wrong (an error, a crash or hang in its worker, a case too
// large for the machine) into an outcome; admits the cases that run at once;
// runs one case's properties as `ulpcheck repro` does.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/parallel.h"
#include "properties/case_context.h"
#include "properties/property.h"

namespace ulpcheck {

/// The variant a case names; throws std::invalid_argument naming the op and
/// the kernel when none of that name is registered.
const KernelInfo& kernelOf(const CaseSpec& c);

/// Why the case cannot run in this process's memory (empty: it fits): its
/// estimated peak against what the process may use, with room for the rest
/// of the process. Estimated before anything is allocated: a case of 2^31
/// rows once grew to 24 GB before the OOM killer ended ulpcheck unsaid.
std::string exceedsHostMemory(const CaseSpec& spec, const ExecContext& exec);

/// Runs one property on one case, converting recoverable errors into a failed
/// (or skipped) outcome. Sticky GPU faults propagate: nothing more can run in
/// the process. `shared`: the case's context, whose inputs and oracle the
/// case's properties share (null: a fresh one).
Outcome checkOne(const Property& p, const CaseSpec& spec, const ExecContext& exec, CaseContext* shared = nullptr);

/// Admits the cases that run at once (concurrent_cases). They share the GPU
/// (SharedGpuScope); some run alone, after the cases running when they
/// asked, and no case starts while one waits or runs:
/// - a variant not built into ulpcheck (a plugin's, a Python one), in a
///   worker process or in this one: compiled elsewhere, it may launch on the
///   legacy default stream, which a thread's own synchronisation would not
///   wait for;
/// - a variant that puts its ranks on several GPUs;
/// - a case of much work: its oracle and judging, alone, use every core,
///   where shared they would run on one (M x N elements past
///   kLargestSharedWork);
/// - a case of much memory: several nightly-size cases at once could run
///   out of the memory one has alone, which a skip one at a time would not
///   see (its pre-run estimate, OpAdapter::peakHostBytes, past
///   kLargestSharedBytes).
/// Work is counted over M x N, not the M x ld the buffers hold: a default
/// tier's 65537 x 3 case padded to ld = 67 is 4.4 M elements of buffers but
/// 0.2 M of oracle and judging. Run alone, the six such cases of
/// rmsnorm's 2400-case default tier took 2.2 s of its 10.8 s on the H200,
/// the other cases waiting (with the drains before them, 15 cores idle a
/// quarter of the run).
class CaseGate {
 public:
  // 2^22 elements: about a second of host oracle and judging on one core.
  static constexpr int64_t kLargestSharedWork = int64_t{1} << 22;
  // Sixteen cases at once (kMaxConcurrentCases) then hold at most 8 GiB.
  static constexpr uint64_t kLargestSharedBytes = uint64_t{512} << 20;

  /// `peak_host_bytes`: the case's pre-run estimate.
  static bool runsAlone(const KernelInfo& k, const CaseSpec& c, uint64_t peak_host_bytes) {
    return k.remote || !k.plugin_path.empty() || !k.python_file.empty() || k.one_rank_per_gpu ||
           c.M * c.N > kLargestSharedWork || peak_host_bytes > kLargestSharedBytes;
  }

  void enter(bool alone) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (alone) {
      ++waiting_alone_;
      changed_.wait(lock, [&] { return running_ == 0; });
      --waiting_alone_;
      alone_ = true;
    } else {
      changed_.wait(lock, [&] { return !alone_ && waiting_alone_ == 0; });
    }
    ++running_;
  }
  void leave(bool alone) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --running_;
      if (alone) alone_ = false;
    }
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int running_ = 0, waiting_alone_ = 0;
  bool alone_ = false;
};

/// One case's stay in the gate, with what its thread must do meanwhile:
/// synchronise its own stream only and run its chunks itself when it shares
/// the GPU. Inactive (`gate` null) when cases run one at a time.
class GateTicket {
 public:
  GateTicket(CaseGate* gate, const CaseSpec& c, const OpAdapter& op, const ExecContext& exec)
      : gate_(gate), alone_(gate && CaseGate::runsAlone(kernelOf(c), c, op.peakHostBytes(c, exec))) {
    if (!gate_) return;
    gate_->enter(alone_);
    if (!alone_) shared_.emplace(), inline_.emplace();
  }
  ~GateTicket() {
    if (gate_) gate_->leave(alone_);
  }
  GateTicket(const GateTicket&) = delete;
  GateTicket& operator=(const GateTicket&) = delete;

 private:
  CaseGate* gate_;
  bool alone_;
  std::optional<SharedGpuScope> shared_;
  std::optional<InlineChunks> inline_;
};

/// What one property said over the repeats of one case.
struct ReplayResult {
  std::string property;
  Outcome outcome;  // of the first failing repeat, else of the last
  int runs = 0, failed = 0;
  bool applies = true;  // false: named, but does not apply to the case's kernel or the case (not run)
  int hung = 0;         // of the failed runs: the kernel hung (any of them, not only the first kept)
};

/// Runs the given properties (empty: all) on one case, as `ulpcheck repro`
/// does, `repeats` times: each repeat runs the kernel afresh (the oracle is
/// computed once), since a race fails on some runs only. Once the kernel
/// faults in a repeat, that repeat's later properties are not run. `done`
/// (may be empty) gets each property's result as soon as it is final.
std::vector<ReplayResult> runCase(const CaseSpec& spec, const std::vector<std::string>& properties,
                                  const ExecContext& exec, int repeats = 1,
                                  const std::function<void(const ReplayResult&)>& done = {});

}  // namespace ulpcheck
