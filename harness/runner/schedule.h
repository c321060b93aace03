// The schedule stage, the only code of the engine with threads: runs the
// plan's cases one at a time, or several at once whose results are still
// taken in the sequence's order, so a campaign's results are those of one
// case at a time whatever the concurrency.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace ulpcheck {

struct ScheduleOptions {
  int64_t count = 0;                  // cases 0 .. count - 1
  std::function<bool(int64_t)> mine;  // the cases this run takes (a shard's); empty: all
  int threads = 1;                    // > 1: cases started at once, each on its own thread
  std::function<bool()> out_of_time;  // checked before a case starts; true: no more start
};

/// Runs `count` cases in order. For case i: `prepare(i)` makes its work
/// (under the schedule's lock: one at a time, in order, as a generator that
/// is not thread-safe needs), `execute(work)` runs it (on any thread), then
/// `commit(work)` takes it on the calling thread in the sequence's order and
/// says whether to go on. An exception from prepare is rethrown when its
/// case would be committed; one from commit stops the threads (each finishes
/// the case it started) and propagates. Returns true when out_of_time
/// stopped it.
template <typename Work>
bool runInOrder(const ScheduleOptions& o, const std::function<Work(int64_t)>& prepare,
                const std::function<void(Work&)>& execute, const std::function<bool(Work&)>& commit) {
  auto mine = [&](int64_t i) { return !o.mine || o.mine(i); };
  auto expired = [&] { return o.out_of_time && o.out_of_time(); };
  if (o.threads <= 1) {
    for (int64_t i = 0; i < o.count; ++i) {
      if (!mine(i)) continue;
      if (expired()) return true;
      Work work = prepare(i);
      execute(work);
      if (!commit(work)) break;
    }
    return false;
  }
  struct Slot {
    std::optional<Work> work;
    std::exception_ptr error;  // raised by prepare
  };
  std::mutex mutex;
  std::condition_variable changed;
  int64_t next = 0;  // the next case to start
  bool stop = false, timed_out = false;
  std::map<int64_t, Slot> done;
  auto startAndRun = [&] {
    for (;;) {
      int64_t index = 0;
      Slot slot;
      {
        std::lock_guard<std::mutex> lock(mutex);
        while (next < o.count && !mine(next)) ++next;
        if (stop || next >= o.count) return;
        if (expired()) {
          stop = timed_out = true;
          changed.notify_all();
          return;
        }
        index = next++;
        try {
          slot.work.emplace(prepare(index));
        } catch (...) {
          slot.error = std::current_exception();
        }
      }
      if (slot.work) execute(*slot.work);
      {
        std::lock_guard<std::mutex> lock(mutex);
        done.emplace(index, std::move(slot));
      }
      changed.notify_all();
    }
  };
  auto stopAll = [&] {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    changed.notify_all();
  };
  std::vector<std::thread> threads;
  // Stops and joins them however this thread leaves (a commit may throw).
  struct Join {
    std::vector<std::thread>& threads;
    const std::function<void()>& stop;
    ~Join() {
      stop();
      for (std::thread& t : threads) t.join();
    }
  };
  const std::function<void()> stop_all = stopAll;
  Join join{threads, stop_all};
  for (int k = 0; k < o.threads; ++k) threads.emplace_back(startAndRun);
  for (int64_t i = 0; i < o.count; ++i) {
    if (!mine(i)) continue;
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return done.count(i) || (stop && next <= i); });
      const auto it = done.find(i);
      if (it == done.end()) break;  // not started: the time ran out
      slot = std::move(it->second);
      done.erase(it);
    }
    if (!slot.work) std::rethrow_exception(slot.error);
    if (!commit(*slot.work)) break;
  }
  stopAll();
  std::lock_guard<std::mutex> lock(mutex);
  return timed_out;
}

}  // namespace ulpcheck
