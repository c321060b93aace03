// A fixed pool of worker threads for the oracle (parallel over rows). Work is
// split into contiguous chunks; results never depend on the thread count.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ulpcheck {

class ThreadPool {
 public:
  explicit ThreadPool(unsigned threads = 0);  // 0: one per hardware thread
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

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

}  // namespace ulpcheck
