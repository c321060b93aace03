// A fixed pool of worker threads for the oracle (parallel over rows). Work is
// split into contiguous chunks; results never depend on the thread count.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ulpcheck {

class ThreadPool {
 public:
  explicit ThreadPool(unsigned threads = 0);  // 0: one per hardware thread
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }
  /// The threads a forChunks from the calling thread runs on: one inside a
  /// forChunks or under InlineChunks (it runs the chunks itself), else size().
  unsigned parallelism() const;

  /// Calls body(worker, begin, end) on disjoint chunks covering [0, n); worker
  /// is in [0, size()). Blocks until all chunks ran; rethrows the first error.
  void forChunks(int64_t n, const std::function<void(unsigned worker, int64_t begin, int64_t end)>& body);

  static ThreadPool& shared();

 private:
  void workerLoop(unsigned index);
  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one forChunks at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(unsigned, int64_t, int64_t)>* body_ = nullptr;
  int64_t n_ = 0;
  uint64_t generation_ = 0;
  unsigned pending_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
};

/// While one lives, every forChunks the calling thread makes runs its chunks
/// itself, in order: the thread is one of several running cases at once
/// (CampaignOptions::concurrent_cases), which already keep the cores busy,
/// and the pool serves one caller at a time.
class InlineChunks {
 public:
  InlineChunks();
  ~InlineChunks();
  InlineChunks(const InlineChunks&) = delete;
  InlineChunks& operator=(const InlineChunks&) = delete;

 private:
  bool outer_;
};

/// Runs body(worker, k), which returns chunk k's result, for every k of
/// [0, chunks) on the pool, a wave of pool.parallelism() chunks at a time,
/// and hands each wave's results to fold(k, result) in chunk order before
/// the next wave starts. Only one wave's results are held at once, whatever
/// the chunk count (a column sum's chunks of a wide tensor are each a few
/// tensors' worth of columns), and the fold sees them in the order a serial
/// loop would. `worker` is in [0, pool.size()), for scratch kept per worker.
template <typename Body, typename Fold>
void sweepChunksInOrder(ThreadPool& pool, int64_t chunks, Body body, Fold fold) {
  using Result = std::invoke_result_t<Body&, unsigned, int64_t>;
  const int64_t wave = std::max<int64_t>(1, pool.parallelism());
  std::vector<Result> results(static_cast<size_t>(std::min(wave, std::max<int64_t>(chunks, 0))));
  for (int64_t first = 0; first < chunks; first += wave) {
    const int64_t n = std::min(wave, chunks - first);
    pool.forChunks(n, [&](unsigned worker, int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) results[static_cast<size_t>(k)] = body(worker, first + k);
    });
    for (int64_t k = 0; k < n; ++k) fold(first + k, std::move(results[static_cast<size_t>(k)]));
  }
}

/// State of each worker of a sweep (sweepChunksInOrder's `worker`: its
/// scratch), made by `make` on the worker's first chunk and kept across the
/// waves; clear() lets it all go once the sweep is done.
template <typename T>
class PerWorker {
 public:
  PerWorker(const ThreadPool& pool, std::function<std::unique_ptr<T>()> make)
      : slots_(pool.size()), make_(std::move(make)) {}
  T& operator[](unsigned worker) {
    std::unique_ptr<T>& slot = slots_[worker];
    if (!slot) slot = make_();
    return *slot;
  }
  void clear() { slots_.clear(); }

 private:
  std::vector<std::unique_ptr<T>> slots_;
  std::function<std::unique_ptr<T>()> make_;
};

}  // namespace ulpcheck
