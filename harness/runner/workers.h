// Worker processes of one campaign (`ulpcheck run --gpus/--workers`): the
// coordinator starts one `ulpcheck run` per worker on its own shard of the
// campaign (and its own GPU), reads what each says on its standard output,
// one tagged line at a time, and adds their results up. A worker that
// crashes or hangs ends alone; what the others measured stands.
//
// The lines a worker writes (each payload one line of JSON):
//   @progress {"done":..,"total":..,"failures":..,"seconds":..,"time_budget_s":..}
//   @log "text"
//   @json {a JSON-lines record}
//   @result {"op":..,"result":{campaignResultToJson}}
//   @stats {"oracle":[fast, fell_back, mpfr_only, gpu_judge_audited, streamed],"phases":[seconds per Phase]}
// Anything else a worker prints is passed on, named by its worker.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ulpcheck::workers {

constexpr const char* kProgress = "@progress ";
constexpr const char* kLog = "@log ";
constexpr const char* kJson = "@json ";
constexpr const char* kResult = "@result ";
constexpr const char* kStats = "@stats ";
// Begins a @log line that must be said even with --quiet (a campaign's warning).
constexpr const char* kWarning = "warning: ";

/// Writes one tagged line to standard output (thread-safe, flushed).
void say(const char* tag, const nlohmann::json& payload);

struct WorkerSpec {
  std::vector<std::string> argv;                         // argv[0]: the executable
  std::vector<std::pair<std::string, std::string>> env;  // set in the worker's environment
  std::string name;                                      // e.g. "gpu 1", for messages
};

struct Handlers {
  std::function<void(int worker, const std::string& tag, const nlohmann::json& payload)> message;
  std::function<void(int worker, const std::string& line)> other;  // an untagged line
};

/// Starts every worker, dispatches their lines until all have exited, and
/// returns their exit codes (-1: killed by a signal, whose number is in
/// `signals`). Throws std::runtime_error if a worker cannot be started.
std::vector<int> runWorkers(const std::vector<WorkerSpec>& specs, const Handlers& handlers,
                            std::vector<int>* signals = nullptr);

/// In a worker runWorkers started: asks the kernel to kill this process when
/// its coordinator ends (a SIGKILL, SIGTERM or SIGINT to the coordinator
/// alone included), so no worker runs on, holding a GPU, as an orphan; its
/// own kernel workers follow it (kernels/plugin/remote.cpp). Does nothing
/// in a process runWorkers did not start.
void dieWithCoordinator();

/// `args` without the named options (each as `--name value` or `--name=value`).
std::vector<std::string> withoutOptions(const std::vector<std::string>& args, const std::vector<std::string>& names);

/// The GPUs a process may use, as CUDA numbers them for children:
/// $CUDA_VISIBLE_DEVICES's entries, or 0..count-1.
std::vector<std::string> visibleGpus(int count);

}  // namespace ulpcheck::workers
