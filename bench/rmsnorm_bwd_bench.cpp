// Bandwidth of an RMSNorm backward variant on the GPU: effective GB/s counting
// the bytes the backward must move (x, dy read, dx written, w, rstd, dw),
// median of timed repetitions after warm-up, inputs generated on the device.
//   rmsnorm_bwd_bench [--kernel cuda_separate] [--dtype bf16] [--reps 50] MxN [MxN ...]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness/core/buffer.h"
#include "harness/core/cuda_check.h"
#include "harness/core/datagen.h"
#include "kernels/rmsnorm/rmsnorm.h"

using namespace ulpcheck;

int main(int argc, char** argv) {
  std::string kernel = "cuda_separate", dtype_name = "bf16";
  int reps = 50;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--kernel" && i + 1 < argc) kernel = argv[++i];
    else if (a == "--dtype" && i + 1 < argc) dtype_name = argv[++i];
    else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else {
      long long m = 0, n = 0;
      if (std::sscanf(a.c_str(), "%lldx%lld", &m, &n) != 2 || m < 1 || n < 1) {
        std::fprintf(stderr, "usage: %s [--kernel K] [--dtype fp32|fp16|bf16] [--reps R] MxN ...\n", argv[0]);
        return 2;
      }
      shapes.emplace_back(m, n);
    }
  }
  const auto dtype = parseDType(dtype_name);
  const RmsNormKernel* k = RmsNormRegistry::find(kernel);
  if (!dtype || !k || k->info.backend != Backend::Cuda) {
    std::fprintf(stderr, "unknown dtype or not a CUDA rmsnorm kernel: %s %s\n", dtype_name.c_str(), kernel.c_str());
    return 2;
  }
  const DeviceInfo& dev = queryDevice();
  if (!dev.available) {
    std::fprintf(stderr, "no GPU: %s\n", dev.reason.c_str());
    return 4;
  }
  fmt::print("# {} on {} ({} SMs), dtype {}, median of {} reps\n", kernel, dev.name, dev.sm_count, dtype_name, reps);
  fmt::print("#{:>7} {:>7} {:>12} {:>10}\n", "M", "N", "time(us)", "GB/s");
  for (auto [M, N] : shapes) {
    const int b = storageBytes(*dtype);
    const RmsNormShape s{*dtype, M, N, N, 1e-6f};
    const LaunchEnv env{dev.sm_count, 0, nullptr};
    Buffer x(Backend::Cuda, size_t(M * N) * b, "x"), dy(Backend::Cuda, size_t(M * N) * b, "dy"),
        w(Backend::Cuda, size_t(N) * b, "w"), y(Backend::Cuda, size_t(M * N) * b, "y"),
        rstd(Backend::Cuda, size_t(M) * 4, "rstd"), dx(Backend::Cuda, size_t(M * N) * b, "dx"),
        dw(Backend::Cuda, size_t(N) * b, "dw"), ws(Backend::Cuda, std::max<size_t>(k->workspace_bytes(s, env), 1), "ws");
    generateDevice(x.data(), DistParams{Dist::Normal, 1.0, 0.0}, *dtype, 1, TensorStream::X, 0, M, N, N);
    generateDevice(dy.data(), DistParams{Dist::Normal, 1.0, 0.0}, *dtype, 1, TensorStream::GradOut, 0, M, N, N);
    generateDevice(w.data(), DistParams{Dist::Normal, 0.5, 1.0}, *dtype, 1, TensorStream::Weight, 0, 1, N, N);
    k->forward(RmsNormForwardArgs{s, x.data(), w.data(), y.data(), static_cast<float*>(rstd.data())}, env);
    const RmsNormBackwardArgs args{s, x.data(), w.data(), dy.data(), static_cast<const float*>(rstd.data()),
                                   dx.data(), dw.data(), ws.data()};
    for (int i = 0; i < 5; ++i) k->backward(args, env);  // warm-up
    deviceSynchronize("warm-up");
    cudaEvent_t start, stop;
    ULPCHECK_CUDA(cudaEventCreate(&start));
    ULPCHECK_CUDA(cudaEventCreate(&stop));
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; ++i) {
      ULPCHECK_CUDA(cudaEventRecord(start));
      k->backward(args, env);
      ULPCHECK_CUDA(cudaEventRecord(stop));
      ULPCHECK_CUDA(cudaEventSynchronize(stop));
      ULPCHECK_CUDA(cudaEventElapsedTime(&ms[i], start, stop));
    }
    std::sort(ms.begin(), ms.end());
    const double median_s = ms[reps / 2] * 1e-3;
    // Bytes the op must move: read x and dy, write dx (M*N each), read w and
    // rstd, write dw. Partials are the kernel's own overhead, not counted.
    const double bytes = 3.0 * double(M) * N * b + 2.0 * N * b + 4.0 * M;
    fmt::print(" {:>7} {:>7} {:>12.1f} {:>10.1f}\n", M, N, median_s * 1e6, bytes / median_s / 1e9);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  return 0;
}
