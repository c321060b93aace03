#include "core/schedule_noise.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <thread>

#include "core/cuda_check.h"
#include "core/rng.h"

namespace ulpcheck {

namespace {

// Ranges of the load, wide so that consecutive runs meet very different
// machines: from one CTA on one SM to two waves over every SM (the second wave
// frees SMs at staggered times while the kernel under test is running), from
// one warp to a full CTA, from no shared memory to all an SM can give one CTA
// (which keeps the kernel under test off that SM entirely).
constexpr int kMaxCtasPerSm = 2;
// Three loads in four also stream stores through a buffer larger than the L2
// while they spin: queues in the L2 slices and the crossbar then delay some
// of the kernel's own stores, which is what opens the windows of memory-
// ordering bugs (a missing __threadfence) that an idle memory system keeps shut.
constexpr size_t kTrafficWords = size_t{1} << 25;  // 128 MiB of 32-bit words (the H100's L2 is 50 MB)
constexpr int kMaxWarpsPerCta = 32;
// Long enough to overlap the launches that follow, short enough that a
// determinism check of several runs per case costs milliseconds, not seconds.
constexpr double kMinSpinMicroseconds = 10;
constexpr double kMaxSpinMicroseconds = 300;

// counterHash streams, so the launch shape and the per-CTA spins draw
// independent words from one seed.
constexpr uint64_t kShapeStream = 0x5c4ed;
constexpr uint64_t kSpinStream = 0x5914;

enum ShapeDraw : uint64_t { kDrawCtas, kDrawWarps, kDrawShared, kDrawSpin, kDrawTraffic };

/// Every CTA spins for its own time in [min_cycles, min_cycles + spread], so
/// CTAs retire, and free their SM for the kernel under test, in a different
/// order each launch. The dynamic shared memory is never touched: reserving it
/// is what occupies the SM.
__global__ void scheduleLoad(uint64_t seed, long long min_cycles, unsigned long long spread_cycles,
                             unsigned* __restrict__ traffic) {
  const long long spin = min_cycles +
                         static_cast<long long>(counterHash(seed, kSpinStream, blockIdx.x) % (spread_cycles + 1));
  const long long start = clock64();
  // Every thread stores one word per iteration; the starts (97 words apart)
  // and the stride scatter the stores over the whole buffer, hence over every
  // L2 slice, and none is ever read back.
  size_t i = (size_t(blockIdx.x) * blockDim.x + threadIdx.x) * 97 % kTrafficWords;
  while (clock64() - start < spin) {
    if (traffic) {
      traffic[i] = unsigned(i);
      i = (i + size_t(gridDim.x) * blockDim.x * 33) % kTrafficWords;
    }
  }
}

struct NoiseDevice {
  unsigned* traffic = nullptr;  // kTrafficWords, never read (cases running at once share it)
  int max_shared_bytes = 0;     // the opt-in maximum of dynamic shared memory per CTA
  double cycles_per_microsecond = 0;
};

/// Created on first use and kept for the process: freeing it during static
/// destruction races the CUDA runtime's own teardown.
const NoiseDevice& noiseDevice() {
  static const NoiseDevice d = [] {
    NoiseDevice n;
    ULPCHECK_CUDA(cudaMalloc(&n.traffic, kTrafficWords * sizeof(unsigned)));
    int device = 0, clock_khz = 0;
    ULPCHECK_CUDA(cudaGetDevice(&device));
    ULPCHECK_CUDA(cudaDeviceGetAttribute(&n.max_shared_bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    ULPCHECK_CUDA(cudaFuncSetAttribute(scheduleLoad, cudaFuncAttributeMaxDynamicSharedMemorySize, n.max_shared_bytes));
    // The peak clock: under a lower actual clock a spin only lasts longer.
    ULPCHECK_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
    n.cycles_per_microsecond = clock_khz / 1000.0;
    return n;
  }();
  return d;
}

// The process's main thread: static initialisers run on it.
const std::thread::id kMainThread = std::this_thread::get_id();

/// The calling thread's stream for its loads, created on its first load.
/// One per thread: a case running beside others (SharedGpuScope) waits for
/// its own load only. Non-blocking, so that a launch on the legacy default
/// stream (a test's) does not wait for the load instead of running beside
/// it. Destroyed when a campaign's case thread ends (every load on it was
/// waited for); the main thread's is kept, as destroying a stream during
/// static destruction races the CUDA runtime's own teardown.
cudaStream_t noiseStream() {
  struct Owned {
    cudaStream_t stream = nullptr;
    ~Owned() {
      if (stream && std::this_thread::get_id() != kMainThread) cudaStreamDestroy(stream);  // a dead context: ignored
    }
  };
  thread_local Owned owned;
  if (!owned.stream) ULPCHECK_CUDA(cudaStreamCreateWithFlags(&owned.stream, cudaStreamNonBlocking));
  return owned.stream;
}

/// Different on every call, in this process and across processes: a launch
/// counter mixed with the clock.
uint64_t freshSeed() {
  static std::atomic<uint64_t> launches{0};
  const auto now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return counterHash(now, kShapeStream, launches.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace

ScheduleNoise::ScheduleNoise(bool enabled, Backend backend, int sm_count) {
  if (!applies(enabled, backend)) return;
  const NoiseDevice& dev = noiseDevice();
  const uint64_t seed = freshSeed();
  const auto draw = [seed](ShapeDraw what, uint64_t choices) {
    return counterHash(seed, kShapeStream, what) % choices;
  };

  const auto ctas = static_cast<unsigned>(1 + draw(kDrawCtas, uint64_t(kMaxCtasPerSm) * std::max(sm_count, 1)));
  const auto threads = static_cast<unsigned>(32 * (1 + draw(kDrawWarps, kMaxWarpsPerCta)));
  const auto shared_bytes = static_cast<size_t>(draw(kDrawShared, uint64_t(dev.max_shared_bytes) + 1));
  // The longest spin of this launch; each CTA draws its own below it.
  const double longest_us = kMinSpinMicroseconds +
                            draw(kDrawSpin, uint64_t(kMaxSpinMicroseconds - kMinSpinMicroseconds) + 1);
  const auto min_cycles = static_cast<long long>(kMinSpinMicroseconds * dev.cycles_per_microsecond);
  const auto spread_cycles =
      static_cast<unsigned long long>((longest_us - kMinSpinMicroseconds) * dev.cycles_per_microsecond);

  uncaught_at_launch_ = std::uncaught_exceptions();
  unsigned* traffic = draw(kDrawTraffic, 4) ? dev.traffic : nullptr;
  stream_ = noiseStream();
  scheduleLoad<<<ctas, threads, shared_bytes, cudaStream_t(stream_)>>>(seed, min_cycles, spread_cycles, traffic);
  ULPCHECK_CUDA_LAUNCH("scheduleLoad");
  launched_ = true;
}

ScheduleNoise::~ScheduleNoise() noexcept(false) {
  if (!launched_) return;
  if (std::uncaught_exceptions() > uncaught_at_launch_) {
    cudaStreamSynchronize(cudaStream_t(stream_));
    return;
  }
  ULPCHECK_CUDA(cudaStreamSynchronize(cudaStream_t(stream_)));
}

}  // namespace ulpcheck
