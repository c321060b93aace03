// The coordinator: one op's campaign split over worker processes (`ulpcheck
// run --workers/--gpus`), each a shard of it on its own GPU, whose results
// add up to what one process would report (workers.h is the protocol). Also
// the worker's side: what a campaign in a worker sends its coordinator.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/phase_timer.h"
#include "harness/runner/campaign.h"

namespace ulpcheck {

// The default campaign (the README's main job; sized so it ends within a
// minute on an H100 and five on a 2-core CPU): every applicable kernel x
// property x dtype gets this many cases, within at most kDefaultCaseCap
// cases per op.
inline constexpr int64_t kDefaultPerCellGpu = 50;
inline constexpr int64_t kDefaultPerCellHost = 20;
inline constexpr int64_t kDefaultCaseCap = 2000;
// Cases one process checks at once by default (--concurrent-cases auto):
// one per core of its share, at most this many (coordinator.cpp: why 16).
inline constexpr int kMaxConcurrentCases = 16;

/// How many worker processes a run uses, and the GPUs they share (one each
/// where there are as many; round-robin otherwise).
struct WorkerLayout {
  int workers = 1;
  std::vector<std::string> gpus;  // CUDA device ids, empty on the host
};

struct LayoutRequest {
  std::optional<int> workers;   // --workers; nullopt: the default layout
  std::optional<int64_t> gpus;  // --gpus N; nullopt: every usable GPU
};

/// Throws std::invalid_argument for a count the machine does not have.
WorkerLayout workerLayout(const LayoutRequest& request, Backend backend);

/// One op's campaign for the workers.
struct CoordinatedCampaign {
  CampaignOptions options;        // its op, seed, shard (of the run's own shard) and time budget matter here
  std::vector<std::string> args;  // the run's arguments: each worker gets them again, with its own op, seed, shard
  WorkerLayout layout;
  JsonlWriter* json = nullptr;  // the workers' records, each tagged with its worker
  // A worker's log line (`worker` names it): `warning` for what must be said
  // even with --quiet (warnings, and lines the worker printed untagged).
  std::function<void(const std::string& worker, const std::string& line, bool warning)> log;
  std::function<void(const CampaignProgress&)> progress;  // the workers' sum
};

struct CoordinatedResult {
  CampaignResult result;            // the workers' results merged; fatal_error names each worker that ended without one
  std::vector<int> codes;           // each worker's exit code
  std::array<int64_t, 5> oracle{};  // summed (processOracleCounts)
  std::array<double, size_t(Phase::kCount)> phases{};  // summed
};

CoordinatedResult runOnWorkers(const CoordinatedCampaign& campaign);

/// A campaign run as a worker: its log lines, warnings and progress go to
/// the coordinator.
void reportToCoordinator(CampaignOptions& o);
/// The worker's result, once its campaign has ended.
void sendResultToCoordinator(const std::string& op, const CampaignResult& r);
/// The worker's oracle counts and phase times, before it exits.
void sendStatsToCoordinator();

/// This process's oracle counts: fast path, fell back to MPFR, MPFR only,
/// cases whose GPU judgment the audit compared with the host's.
std::array<int64_t, 5> processOracleCounts();

}  // namespace ulpcheck
