#include "harness/runner/coordinator.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "core/device.h"
#include "harness/runner/campaign_json.h"
#include "harness/runner/exit_codes.h"
#include "harness/runner/workers.h"
#include "oracles/oracle_mode.h"

namespace ulpcheck {

// By default one worker process per GPU, checking up to kMaxConcurrentCases
// cases at once on its share of the cores (--concurrent-cases): threads of
// one process share a GPU's context, while processes time-slice it, and
// each op's campaign starts its workers and their CUDA contexts again. H100,
// 16 cores, 2026-11-28, the main job (`run --seed 0x2a11`), alternating in
// one call: 12.7, 12.2 s with 2 processes of 8 cases at once (the former
// default), 12.5, 11.7 s with 2 of 16, 8.9, 8.9 s with one of 16. The default
// tier (`--cases 1200 --gpus 1`), one run each, 2 x 8 -> 1 x 16: rmsnorm
// 9.0 -> 7.4 s, layernorm 10.5 -> 9.1, fused_add_rmsnorm 6.7 -> 6.1;
// allreduce_rmsnorm, whose ranks' inputs make it the most host-bound,
// 10.9 -> 12.1 (2 x 16: 9.5). --workers N sets any other count.

WorkerLayout workerLayout(const LayoutRequest& r, Backend backend) {
  if (r.workers && *r.workers < 1) throw std::invalid_argument(fmt::format("--workers {}: give 1 or more", *r.workers));
  WorkerLayout w;
  if (backend == Backend::Cuda) {
    const int count = queryDevice().count;
    const int64_t asked = r.gpus.value_or(count);
    if (asked < 1 || asked > count)
      throw std::invalid_argument(
          fmt::format("--gpus {}: this machine has {} usable GPU{}", asked, count, count == 1 ? "" : "s"));
    const int use = int(asked);
    w.gpus = workers::visibleGpus(use);
    w.workers = r.workers ? *r.workers : use;
  } else {
    if (r.gpus) throw std::invalid_argument("--gpus needs the cuda backend (on the host, --workers N splits the CPU)");
    w.workers = r.workers.value_or(1);
  }
  return w;
}

namespace {

/// Each worker's command: the run's arguments with its own op, seed and
/// shard, its share of the cores, and its GPU first.
std::vector<workers::WorkerSpec> workerSpecs(const CoordinatedCampaign& c) {
  const CampaignOptions& o = c.options;
  const int n = c.layout.workers;
  const std::vector<std::string> base = workers::withoutOptions(
      c.args, {"--op", "--seed", "--shard", "--gpus", "--workers", "--json", "--junit", "--html", "--time-budget"});
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency() / unsigned(n));
  std::vector<workers::WorkerSpec> specs;
  for (int k = 0; k < n; ++k) {
    workers::WorkerSpec s;
    s.argv.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
    s.argv.insert(s.argv.end(), base.begin(), base.end());
    const int shard = o.shard_index + o.shard_count * k, shards = o.shard_count * n;
    for (const std::string& arg : {std::string("--op"), o.op, std::string("--seed"), fmt::format("{:#x}", o.seed),
                                   std::string("--shard"), fmt::format("{}/{}", shard + 1, shards),
                                   std::string("--workers"), std::string("1"), std::string("--report-to-coordinator")})
      s.argv.push_back(arg);
    if (o.time_budget_s > 0) s.argv.insert(s.argv.end(), {"--time-budget", fmt::format("{}", o.time_budget_s)});
    s.env.push_back({"ULPCHECK_THREADS", std::to_string(threads)});
    const std::vector<std::string>& gpus = c.layout.gpus;
    if (!gpus.empty()) {
      // Its own GPU first (device 0 in the worker), the others after it, so
      // variants with one rank per GPU still find them all.
      std::vector<std::string> order;
      for (size_t g = 0; g < gpus.size(); ++g) order.push_back(gpus[(k + g) % gpus.size()]);
      s.env.push_back({"CUDA_VISIBLE_DEVICES", fmt::format("{}", fmt::join(order, ","))});
      s.name = fmt::format("worker {} (GPU {})", k + 1, order.front());
    } else {
      s.name = fmt::format("worker {}", k + 1);
    }
    specs.push_back(std::move(s));
  }
  return specs;
}

}  // namespace

CoordinatedResult runOnWorkers(const CoordinatedCampaign& c) {
  const std::vector<workers::WorkerSpec> specs = workerSpecs(c);
  const size_t n = specs.size();
  std::vector<CampaignProgress> each(n, CampaignProgress{});
  std::vector<bool> reported(n, false);
  CoordinatedResult out;
  workers::Handlers h;
  h.message = [&](int k, const std::string& tag, const nlohmann::json& j) {
    const std::string& who = specs[size_t(k)].name;
    if (tag + " " == workers::kProgress) {
      CampaignProgress& p = each[size_t(k)];
      p.done = j.at("done"), p.total = j.at("total"), p.failures = j.at("failures"), p.seconds = j.at("seconds");
      p.time_budget_s = j.at("time_budget_s");
      CampaignProgress sum{0, 0, 0, 0, p.time_budget_s};
      for (const CampaignProgress& e : each) {
        sum.done += e.done, sum.total += e.total, sum.failures += e.failures;
        sum.seconds = std::max(sum.seconds, e.seconds);
      }
      if (c.progress) c.progress(sum);
    } else if (tag + " " == workers::kLog) {
      const std::string line = j.get<std::string>();
      // Every worker makes the same plan from the seed: said once.
      if (k > 0 && line.rfind("plan: ", 0) == 0) return;
      if (c.log) c.log(who, line, line.rfind(workers::kWarning, 0) == 0);
    } else if (tag + " " == workers::kJson) {
      if (!c.json) return;
      nlohmann::json record = j;
      record["worker"] = k + 1;
      c.json->write(record);
    } else if (tag + " " == workers::kResult) {
      mergeCampaignResult(out.result, campaignResultFromJson(j.at("result")), who);
      reported[size_t(k)] = true;
    } else if (tag + " " == workers::kStats) {
      for (size_t i = 0; i < out.oracle.size(); ++i) out.oracle[i] += j.at("oracle").at(i).get<int64_t>();
      for (size_t i = 0; i < out.phases.size(); ++i) out.phases[i] += j.at("phases").at(i).get<double>();
    }
  };
  h.other = [&](int k, const std::string& line) {
    if (line.rfind("# ", 0) == 0) return;  // a worker's header lines repeat the coordinator's
    if (c.log) c.log(specs[size_t(k)].name, line, true);
  };
  std::vector<int> signals;
  out.codes = workers::runWorkers(specs, h, &signals);
  out.result.shard_index = c.options.shard_index;
  out.result.shard_count = c.options.shard_count;
  for (size_t k = 0; k < n; ++k) {
    // A worker that ended without its result (a crash, a hang its watchdog
    // ended, an error) ends the run as the same failure would end a single
    // process. One that reported it stands, whatever its code (5: a kernel
    // in its own worker hung, was killed, and its case failed).
    if (reported[k] && out.codes[k] >= 0) continue;
    const std::string why = out.codes[k] == exit_code::kHang ? "a case hung (exit code 5)"
                            : signals[k]                     ? fmt::format("killed by signal {}", signals[k])
                                                             : fmt::format("exit code {}", out.codes[k]);
    out.result.fatal_error += fmt::format("{}{} ended without its result: {} (its messages are above)",
                                          out.result.fatal_error.empty() ? "" : "\n", specs[k].name, why);
  }
  return out;
}

void reportToCoordinator(CampaignOptions& o) {
  o.log = [](const std::string& line) { workers::say(workers::kLog, line); };
  o.warn = [](const std::string& line) { workers::say(workers::kLog, std::string(workers::kWarning) + line); };
  o.progress = [](const CampaignProgress& p) {
    workers::say(workers::kProgress, {{"done", p.done},
                                      {"total", p.total},
                                      {"failures", p.failures},
                                      {"seconds", p.seconds},
                                      {"time_budget_s", p.time_budget_s}});
  };
}

void sendResultToCoordinator(const std::string& op, const CampaignResult& r) {
  workers::say(workers::kResult, {{"op", op}, {"result", campaignResultToJson(r)}});
}

std::array<int64_t, 5> processOracleCounts() {
  const FastOracleCounts& c = oracleCounts();
  return {c.fast.load(), c.fell_back.load(), c.mpfr_only.load(), c.gpu_judge_audited.load(), c.streamed.load()};
}

void sendStatsToCoordinator() {
  const auto p = phaseSeconds();
  workers::say(workers::kStats,
               {{"oracle", processOracleCounts()}, {"phases", std::vector<double>(p.begin(), p.end())}});
}

}  // namespace ulpcheck
