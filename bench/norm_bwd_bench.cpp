// Bandwidth of a row-norm backward variant (RMSNorm or LayerNorm) on the GPU:
// effective GB/s counting the bytes the backward must move, median of timed
// repetitions after warm-up, inputs generated on the device.
//   norm_bwd_bench [--op rmsnorm|layernorm] [--kernel K] [--dtype bf16] [--reps 50] MxN [MxN ...]
//
// Each op is one NormOp: it checks a kernel name, and for one shape allocates
// its tensors, runs the forward once (for the saved statistics) and hands back
// the backward as a callable plus the bytes that backward must move. The
// argument parsing, the timing loop and the table are shared.
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/buffer.h"
#include "core/cuda_check.h"
#include "core/datagen.h"
#include "kernels/layernorm/layernorm.h"
#include "kernels/rmsnorm/rmsnorm.h"

using namespace ulpcheck;

namespace {

constexpr int kWarmup = 5;

/// One op at one shape, ready to time: the buffers it owns, its backward, and
/// the bytes that backward must move (the kernel's own scratch traffic, such
/// as partial sums, is overhead and not counted).
struct BenchCase {
  std::vector<Buffer> buffers;
  std::function<void()> backward;
  double bytes = 0;
};

struct NormOp {
  const char* name;
  const char* default_kernel;
  /// The kernel's KernelInfo, or nullptr when the op has no such variant.
  std::function<const KernelInfo*(const std::string&)> find;
  /// Names of the op's CUDA variants, for error messages.
  std::function<std::vector<std::string>()> cuda_kernels;
  std::function<BenchCase(const std::string& kernel, const RowShape&, const LaunchEnv&)> setup;
};

template <typename Registry>
std::vector<std::string> cudaKernelNames() {
  std::vector<std::string> names;
  for (const auto& k : Registry::all())
    if (k.info.backend == Backend::Cuda) names.push_back(k.info.name);
  return names;
}

template <typename Registry>
const KernelInfo* findInfo(const std::string& name) {
  const auto* k = Registry::find(name);
  return k ? &k->info : nullptr;
}

/// Allocates a device buffer in `c` and returns its payload.
void* alloc(BenchCase& c, size_t bytes, const char* name) {
  c.buffers.emplace_back(Backend::Cuda, std::max<size_t>(bytes, 1), name);
  return c.buffers.back().data();
}

// Inputs as the properties draw them: x and dy standard normal, the scale
// (w, gamma) around 1, the LayerNorm shift (beta) around 0.
constexpr DistParams kUnitNormal{Dist::Normal, 1.0, 0.0};
constexpr DistParams kScaleDist{Dist::Normal, 0.5, 1.0};
constexpr DistParams kShiftDist{Dist::Normal, 0.25, 0.0};

BenchCase setupRmsNorm(const std::string& kernel, const RowShape& s, const LaunchEnv& env) {
  const RmsNormKernel* k = RmsNormRegistry::find(kernel);
  const size_t b = storageBytes(s.dtype), M = s.M, N = s.N;
  BenchCase c;
  void* x = alloc(c, M * N * b, "x");
  void* dy = alloc(c, M * N * b, "dy");
  void* w = alloc(c, N * b, "w");
  void* y = alloc(c, M * N * b, "y");
  auto* rstd = static_cast<float*>(alloc(c, M * 4, "rstd"));
  void* dx = alloc(c, M * N * b, "dx");
  void* dw = alloc(c, N * b, "dw");
  void* ws = alloc(c, k->workspace_bytes(s, env), "ws");
  generateDevice(x, kUnitNormal, s.dtype, 1, TensorStream::X, 0, s.M, s.N, s.N);
  generateDevice(dy, kUnitNormal, s.dtype, 1, TensorStream::GradOut, 0, s.M, s.N, s.N);
  generateDevice(w, kScaleDist, s.dtype, 1, TensorStream::Weight, 0, 1, s.N, s.N);
  k->forward(RmsNormForwardArgs{s, x, w, y, rstd}, env);
  const RmsNormBackwardArgs args{s, x, w, dy, rstd, dx, dw, ws};
  c.backward = [k, args, env] { k->backward(args, env); };
  // Read x and dy, write dx; read w and rstd, write dw.
  c.bytes = 3.0 * double(M) * N * b + 2.0 * N * b + 4.0 * M;
  return c;
}

BenchCase setupLayerNorm(const std::string& kernel, const RowShape& s, const LaunchEnv& env) {
  const LayerNormKernel* k = LayerNormRegistry::find(kernel);
  const size_t b = storageBytes(s.dtype), M = s.M, N = s.N;
  BenchCase c;
  void* x = alloc(c, M * N * b, "x");
  void* dy = alloc(c, M * N * b, "dy");
  void* gamma = alloc(c, N * b, "gamma");
  void* beta = alloc(c, N * b, "beta");
  void* y = alloc(c, M * N * b, "y");
  auto* mean = static_cast<float*>(alloc(c, M * 4, "mean"));
  auto* rstd = static_cast<float*>(alloc(c, M * 4, "rstd"));
  void* dx = alloc(c, M * N * b, "dx");
  void* dgamma = alloc(c, N * b, "dgamma");
  void* dbeta = alloc(c, N * b, "dbeta");
  void* ws = alloc(c, k->workspace_bytes(s, env), "ws");
  generateDevice(x, kUnitNormal, s.dtype, 1, TensorStream::X, 0, s.M, s.N, s.N);
  generateDevice(dy, kUnitNormal, s.dtype, 1, TensorStream::GradOut, 0, s.M, s.N, s.N);
  generateDevice(gamma, kScaleDist, s.dtype, 1, TensorStream::Weight, 0, 1, s.N, s.N);
  generateDevice(beta, kShiftDist, s.dtype, 1, TensorStream::Bias, 0, 1, s.N, s.N);
  k->forward(LayerNormForwardArgs{s, x, gamma, beta, y, mean, rstd}, env);
  const LayerNormBackwardArgs args{s, x, gamma, dy, mean, rstd, dx, dgamma, dbeta, ws};
  c.backward = [k, args, env] { k->backward(args, env); };
  // Read x and dy, write dx; read gamma, write dgamma and dbeta; read mean and rstd.
  c.bytes = 3.0 * double(M) * N * b + 3.0 * N * b + 2.0 * 4.0 * M;
  return c;
}

const std::vector<NormOp>& normOps() {
  static const std::vector<NormOp> ops{
      {"rmsnorm", "cuda_separate", findInfo<RmsNormRegistry>, cudaKernelNames<RmsNormRegistry>, setupRmsNorm},
      {"layernorm", "cuda_twopass", findInfo<LayerNormRegistry>, cudaKernelNames<LayerNormRegistry>, setupLayerNorm},
  };
  return ops;
}

const NormOp* findOp(const std::string& name) {
  for (const NormOp& op : normOps())
    if (name == op.name) return &op;
  return nullptr;
}

/// Median seconds of `reps` timed runs of `run` after warm-up, CUDA events on
/// the default stream (where the variants launch with env.stream == nullptr).
double medianSeconds(const std::function<void()>& run, int reps) {
  for (int i = 0; i < kWarmup; ++i) run();
  deviceSynchronize("warm-up");
  struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    Events() {
      ULPCHECK_CUDA(cudaEventCreate(&start));
      ULPCHECK_CUDA(cudaEventCreate(&stop));
    }
    ~Events() {
      if (start) cudaEventDestroy(start);
      if (stop) cudaEventDestroy(stop);
    }
  } ev;
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) {
    ULPCHECK_CUDA(cudaEventRecord(ev.start));
    run();
    ULPCHECK_CUDA(cudaEventRecord(ev.stop));
    ULPCHECK_CUDA(cudaEventSynchronize(ev.stop));
    ULPCHECK_CUDA(cudaEventElapsedTime(&ms[i], ev.start, ev.stop));
  }
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2] * 1e-3;
}

// ---------------------------------------------------------------------------
// Command line.

struct Options {
  std::string op = "rmsnorm", kernel, dtype = "bf16";
  int reps = 50;
  std::vector<std::pair<int64_t, int64_t>> shapes;
};

void printUsage(std::FILE* to, const char* argv0) {
  std::fprintf(to,
               "usage: %s [--op rmsnorm|layernorm] [--kernel K] [--dtype fp32|fp16|bf16] [--reps R] MxN [MxN ...]\n"
               "  --op      the norm whose backward is timed (default rmsnorm)\n"
               "  --kernel  a CUDA variant of that op (default cuda_separate for rmsnorm, cuda_twopass for layernorm)\n"
               "  --dtype   storage dtype of x, dy, dx and the weights (default bf16)\n"
               "  --reps    timed repetitions, median reported (default 50)\n"
               "  MxN       rows x columns, e.g. 32768x4096\n",
               argv0);
}

int usageError(const char* argv0, const std::string& why) {
  std::fprintf(stderr, "%s: %s\n", argv0, why.c_str());
  printUsage(stderr, argv0);
  return 2;
}

std::optional<long long> parsePositive(const std::string& s) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size() || v < 1) return std::nullopt;
  return v;
}

std::optional<std::pair<int64_t, int64_t>> parseShape(const std::string& s) {
  const size_t x = s.find('x');
  if (x == std::string::npos) return std::nullopt;
  const auto m = parsePositive(s.substr(0, x)), n = parsePositive(s.substr(x + 1));
  if (!m || !n) return std::nullopt;
  return std::pair<int64_t, int64_t>{*m, *n};
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "(none registered)" : out;
}

}  // namespace

int main(int argc, char** argv) {
  const char* argv0 = argc > 0 ? argv[0] : "norm_bwd_bench";
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      printUsage(stdout, argv0);
      return 0;
    }
    if (a == "--op" || a == "--kernel" || a == "--dtype" || a == "--reps") {
      if (i + 1 >= argc) return usageError(argv0, a + " needs a value");
      const std::string v = argv[++i];
      if (a == "--op") o.op = v;
      else if (a == "--kernel") o.kernel = v;
      else if (a == "--dtype") o.dtype = v;
      else {
        const auto r = parsePositive(v);
        if (!r || *r > 1000000) return usageError(argv0, "--reps must be an integer in 1..1000000, got '" + v + "'");
        o.reps = int(*r);
      }
    } else if (a.rfind("-", 0) == 0) {
      return usageError(argv0, "unknown option '" + a + "'");
    } else {
      const auto shape = parseShape(a);
      if (!shape) return usageError(argv0, "bad shape '" + a + "' (expected MxN with positive integers M and N)");
      // Sizes in bytes (fp32, the widest) must not overflow.
      if (shape->first > std::numeric_limits<int64_t>::max() / 4 / shape->second)
        return usageError(argv0, "shape '" + a + "' is too large");
      o.shapes.push_back(*shape);
    }
  }
  if (o.shapes.empty()) return usageError(argv0, "no shape given");

  const NormOp* op = findOp(o.op);
  if (!op) return usageError(argv0, "unknown op '" + o.op + "' (expected rmsnorm or layernorm)");
  if (o.kernel.empty()) o.kernel = op->default_kernel;
  const auto dtype = parseDType(o.dtype);
  if (!dtype) return usageError(argv0, "unknown dtype '" + o.dtype + "' (expected fp32, fp16 or bf16)");
  const KernelInfo* info = op->find(o.kernel);
  if (!info || info->backend != Backend::Cuda)
    return usageError(argv0, fmt::format("'{}' is not a CUDA {} kernel; CUDA {} kernels: {}", o.kernel, op->name,
                                         op->name, joined(op->cuda_kernels())));
  if (!info->supports(*dtype))
    return usageError(argv0, fmt::format("{} kernel '{}' does not support dtype {}", op->name, o.kernel, o.dtype));

  try {
    const DeviceInfo& dev = queryDevice();
    if (!dev.available) {
      std::fprintf(stderr, "no GPU: %s\n", dev.reason.c_str());
      return 4;
    }
    fmt::print("# {} backward, {} on {} ({} SMs), dtype {}, median of {} reps\n", op->name, o.kernel, dev.name,
               dev.sm_count, o.dtype, o.reps);
    fmt::print("#{:>7} {:>7} {:>12} {:>10}\n", "M", "N", "time(us)", "GB/s");
    std::fflush(stdout);
    const LaunchEnv env{dev.sm_count, 0, nullptr};
    for (auto [M, N] : o.shapes) {
      const RowShape s{*dtype, M, N, N, 1e-6f};
      double seconds = 0, bytes = 0;
      {
        BenchCase c = op->setup(o.kernel, s, env);  // buffers freed before the next shape
        seconds = medianSeconds(c.backward, o.reps);
        bytes = c.bytes;
      }
      fmt::print(" {:>7} {:>7} {:>12.1f} {:>10.1f}\n", M, N, seconds * 1e6, bytes / seconds / 1e9);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv0, e.what());
    return 1;
  }
  return 0;
}
