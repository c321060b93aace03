// Latency of allreduce + residual add + RMSNorm with one rank per GPU: the
// unfused NCCL pipeline beside the fused peer-access kernels, per token count
// M at a fixed hidden size. Timed from the host as one process drives every
// rank: launch every rank's work, then wait for every GPU; median of timed
// repetitions after warm-up. Inputs are generated on each GPU.
//   allreduce_rmsnorm_bench [--ranks 2] [--dtype bf16] [--hidden 4096] [--reps 200] [--kernel K ...] M [M ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/buffer.h"
#include "core/cuda_ops.h"
#include "core/datagen.h"
#include "core/device.h"
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm.h"

using namespace ulpcheck;

namespace {

constexpr int kWarmup = 10;

int usage(const std::string& why) {
  std::fprintf(stderr,
               "allreduce_rmsnorm_bench: %s\nusage: allreduce_rmsnorm_bench [--ranks R] [--dtype fp32|fp16|bf16] "
               "[--hidden N] [--reps R] [--kernel K ...] M [M ...]\n",
               why.c_str());
  return 2;
}

bool parseInt(const char* text, int64_t lo, int64_t hi, int64_t& out) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (!end || *end || v < lo || v > hi) return false;
  out = v;
  return true;
}

/// Median host-side latency of one variant at M tokens, in microseconds.
double medianMicros(const AllreduceRmsNormKernel& k, int ranks, DType t, int64_t M, int64_t N, int reps,
                    const DeviceInfo& dev) {
  const RowShape s{t, M, N, N, 1e-6f};
  const size_t bytes = size_t(M * N) * storageBytes(t);
  std::vector<Buffer> buffers;
  buffers.reserve(size_t(ranks) * 6 + 1);
  AllreduceRmsNormArgs a;
  a.shape = s;
  a.ranks = ranks;
  for (int r = 0; r < ranks; ++r) {
    cudaops::DeviceScope on(r);
    a.device[r] = r;
    auto make = [&](size_t n, const char* name) -> void* {
      buffers.emplace_back(Backend::Cuda, std::max<size_t>(n, 1), name);
      return buffers.back().data();
    };
    void* x = make(bytes, "x");
    void* residual = make(bytes, "residual");
    void* w = make(size_t(N) * storageBytes(t), "w");
    generateDevice(x, DistParams{Dist::Normal, 1.0, 0.0}, t, 1, TensorStream(uint64_t(TensorStream::RankPartial) + r),
                   0, M, N, N);
    generateDevice(residual, DistParams{Dist::Normal, 1.0, 0.0}, t, 1, TensorStream::Residual, 0, M, N, N);
    generateDevice(w, DistParams{Dist::Normal, 0.5, 1.0}, t, 1, TensorStream::Weight, 0, 1, N, N);
    a.x[r] = x;
    a.residual[r] = residual;
    a.w[r] = w;
    a.residual_out[r] = make(bytes, "residual_out");
    a.y[r] = make(bytes, "y");
    a.workspace[r] = make(k.workspace_bytes(s, ranks), "workspace");
  }
  const LaunchEnv env{dev.sm_count, 0, nullptr};
  auto once = [&] {
    k.run(a, env);
    for (int r = 0; r < ranks; ++r) {
      cudaops::DeviceScope on(r);
      deviceSynchronize(k.info.name.c_str());
    }
  };
  for (int i = 0; i < kWarmup; ++i) once();
  std::vector<double> us(static_cast<size_t>(reps));
  for (auto& v : us) {
    const auto t0 = std::chrono::steady_clock::now();
    once();
    v = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t ranks = 2, hidden = 4096, reps = 200;
  std::string dtype_name = "bf16";
  std::vector<std::string> kernels;
  std::vector<int64_t> tokens;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--ranks" || arg == "--hidden" || arg == "--reps") {
      int64_t& dst = arg == "--ranks" ? ranks : arg == "--hidden" ? hidden : reps;
      if (!has_value || !parseInt(argv[++i], 1, arg == "--ranks" ? kMaxRanks : int64_t{1} << 20, dst))
        return usage("bad value for " + arg);
    } else if (arg == "--dtype" && has_value) {
      dtype_name = argv[++i];
    } else if (arg == "--kernel" && has_value) {
      kernels.push_back(argv[++i]);
    } else {
      int64_t m = 0;
      if (!parseInt(arg.c_str(), 1, int64_t{1} << 24, m)) return usage("not a token count: '" + arg + "'");
      tokens.push_back(m);
    }
  }
  const auto dtype = parseDType(dtype_name);
  if (!dtype) return usage("unknown dtype '" + dtype_name + "'");
  if (tokens.empty()) tokens = {1, 16, 128, 2048};
  if (kernels.empty())
    for (const auto& k : AllreduceRmsNormRegistry::all())
      if (k.info.one_rank_per_gpu) kernels.push_back(k.info.name);
  std::vector<const AllreduceRmsNormKernel*> selected;
  for (const auto& name : kernels) {
    const AllreduceRmsNormKernel* k = AllreduceRmsNormRegistry::find(name);
    if (!k || !k->info.one_rank_per_gpu) return usage("not a one-rank-per-GPU allreduce_rmsnorm variant: " + name);
    selected.push_back(k);
  }
  const DeviceInfo& dev = queryDevice();
  if (!dev.available) {
    std::fprintf(stderr, "no GPU: %s\n", dev.reason.c_str());
    return 4;
  }
  if (dev.count < ranks) {
    std::fprintf(stderr, "--ranks %lld needs %lld GPUs, %d visible\n", (long long)ranks, (long long)ranks, dev.count);
    return 4;
  }
  try {
    fmt::print(
        "# allreduce + residual + RMSNorm, {} ranks on {} x {}, hidden {}, {}, host-timed median of {} reps (us)\n",
        ranks, ranks, dev.name, hidden, dtype_name, reps);
    fmt::print("#{:>7}", "M");
    for (const auto* k : selected) fmt::print(" {:>20}", k->info.name);
    fmt::print("\n");
    for (int64_t M : tokens) {
      fmt::print(" {:>7}", M);
      for (const auto* k : selected)
        fmt::print(" {:>20.1f}", medianMicros(*k, int(ranks), *dtype, M, hidden, int(reps), dev));
      fmt::print("\n");
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_rmsnorm_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
