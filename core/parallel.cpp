#include "core/parallel.h"

#include <algorithm>
#include <cstdlib>
#include <exception>

namespace ulpcheck {

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

ThreadPool& ThreadPool::shared() {
  // $ULPCHECK_THREADS: a worker process of `ulpcheck run --workers` gets its
  // share of the cores, so workers do not fight over them.
  static ThreadPool pool([] {
    const char* env = std::getenv("ULPCHECK_THREADS");
    const long n = env ? std::strtol(env, nullptr, 10) : 0;
    return n > 0 && n < 4096 ? unsigned(n) : 0u;
  }());
  return pool;
}

namespace {
thread_local bool t_inside_pool = false;  // nested forChunks run serially instead of deadlocking

struct InsidePool {
  InsidePool() { t_inside_pool = true; }
  ~InsidePool() { t_inside_pool = false; }
};

void chunkOf(int64_t n, unsigned parts, unsigned i, int64_t& begin, int64_t& end) {
  begin = n * i / parts;
  end = n * (i + 1) / parts;
}
}  // namespace

unsigned ThreadPool::parallelism() const { return t_inside_pool ? 1u : size(); }

InlineChunks::InlineChunks() : outer_(t_inside_pool) { t_inside_pool = true; }
InlineChunks::~InlineChunks() { t_inside_pool = outer_; }

void ThreadPool::workerLoop(unsigned index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(unsigned, int64_t, int64_t)>* body;
    int64_t n;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      body = body_;
      n = n_;
    }
    int64_t begin, end;
    chunkOf(n, size(), index, begin, end);
    std::exception_ptr err;
    try {
      InsidePool guard;
      if (begin < end) (*body)(index, begin, end);
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (err && !error_) error_ = err;
    if (--pending_ == 0) done_.notify_all();
  }
}

void ThreadPool::forChunks(int64_t n, const std::function<void(unsigned, int64_t, int64_t)>& body) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1 || t_inside_pool) {
    body(0, 0, n);
    return;
  }
  std::lock_guard<std::mutex> call(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    n_ = n;
    error_ = nullptr;
    pending_ = static_cast<unsigned>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  int64_t begin, end;
  chunkOf(n, size(), 0, begin, end);
  std::exception_ptr mine;
  try {
    InsidePool guard;
    if (begin < end) body(0, begin, end);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace ulpcheck
