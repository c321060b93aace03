// The schedule stage with a made-up case runner: whatever the threads, cases
// are committed in the sequence's order, a stop or an error ends the run
// where one case at a time would have ended it, and the time limit stops the
// starts.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "harness/runner/schedule.h"

namespace ulpcheck {
namespace {

struct FakeCase {
  int64_t index = 0;
  int64_t result = -1;  // set by execute
};

// Runs `count` fake cases, each sleeping a pseudo-random while so that they
// finish out of order; returns the indices committed, in commit order.
std::vector<int64_t> committedIndices(int threads, int64_t count, int64_t stop_after = -1,
                                      std::function<bool(int64_t)> mine = {}) {
  ScheduleOptions o;
  o.count = count;
  o.threads = threads;
  o.mine = std::move(mine);
  std::vector<int64_t> committed;
  std::atomic<int> executing{0}, most_at_once{0};
  runInOrder<FakeCase>(
      o, [](int64_t i) { return FakeCase{i}; },
      [&](FakeCase& c) {
        const int now = ++executing;
        for (int seen = most_at_once.load(); now > seen && !most_at_once.compare_exchange_weak(seen, now);) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds((c.index * 7919) % 13 * 200));
        c.result = c.index * c.index;
        --executing;
      },
      [&](FakeCase& c) {
        EXPECT_EQ(c.result, c.index * c.index) << "committed before it ran";
        committed.push_back(c.index);
        return c.index != stop_after;
      });
  if (threads > 1 && count >= 8) {
    EXPECT_GT(most_at_once.load(), 1) << "no two cases ran at once";
  }
  return committed;
}

std::vector<int64_t> iota(int64_t from, int64_t to, int64_t step = 1) {
  std::vector<int64_t> out;
  for (int64_t i = from; i < to; i += step) out.push_back(i);
  return out;
}

TEST(ScheduleStage, CommitsEveryCaseInOrderWhateverTheThreads) {
  for (int threads : {1, 2, 4, 8}) EXPECT_EQ(committedIndices(threads, 40), iota(0, 40)) << threads << " threads";
}

TEST(ScheduleStage, RunsOnlyTheShardsCases) {
  auto odd = [](int64_t i) { return i % 2 == 1; };
  EXPECT_EQ(committedIndices(1, 20, -1, odd), iota(1, 20, 2));
  EXPECT_EQ(committedIndices(4, 20, -1, odd), iota(1, 20, 2));
}

TEST(ScheduleStage, ACommitThatSaysStopEndsTheRunThere) {
  EXPECT_EQ(committedIndices(1, 40, 9), iota(0, 10));
  EXPECT_EQ(committedIndices(4, 40, 9), iota(0, 10));
}

TEST(ScheduleStage, APrepareErrorIsRaisedWhenItsCaseWouldBeCommitted) {
  for (int threads : {1, 4}) {
    ScheduleOptions o;
    o.count = 30;
    o.threads = threads;
    std::vector<int64_t> committed;
    EXPECT_THROW(runInOrder<FakeCase>(
                     o,
                     [](int64_t i) {
                       if (i == 6) throw std::runtime_error("case 6 cannot be drawn");
                       return FakeCase{i};
                     },
                     [](FakeCase&) {},
                     [&](FakeCase& c) {
                       committed.push_back(c.index);
                       return true;
                     }),
                 std::runtime_error);
    EXPECT_EQ(committed, iota(0, 6)) << threads << " threads";
  }
}

TEST(ScheduleStage, ACommitErrorPropagatesAndTheThreadsAreJoined) {
  ScheduleOptions o;
  o.count = 1000;
  o.threads = 4;
  std::atomic<int64_t> executed{0};
  EXPECT_THROW(runInOrder<FakeCase>(
                   o, [](int64_t i) { return FakeCase{i}; },
                   [&](FakeCase&) {
                     std::this_thread::sleep_for(std::chrono::milliseconds(1));
                     ++executed;
                   },
                   [](FakeCase& c) {
                     if (c.index == 3) throw std::logic_error("commit failed");
                     return true;
                   }),
               std::logic_error);
  // Returning at all shows the threads were joined; they stop starting cases soon after.
  EXPECT_LT(executed.load(), 1000);
}

TEST(ScheduleStage, TheTimeLimitStopsTheStartsAndIsReported) {
  for (int threads : {1, 4}) {
    ScheduleOptions o;
    o.count = 100;
    o.threads = threads;
    std::atomic<int> started{0};
    o.out_of_time = [&] { return started.load() >= 10; };
    std::vector<int64_t> committed;
    const bool timed_out = runInOrder<FakeCase>(
        o,
        [&](int64_t i) {
          ++started;
          return FakeCase{i};
        },
        [](FakeCase&) {},
        [&](FakeCase& c) {
          committed.push_back(c.index);
          return true;
        });
    EXPECT_TRUE(timed_out);
    EXPECT_EQ(committed, iota(0, 10)) << threads << " threads: the cases started are committed, in order";
  }
}

TEST(ScheduleStage, WithoutATimeLimitNothingIsReportedAsTimedOut) {
  ScheduleOptions o;
  o.count = 5;
  o.threads = 3;
  EXPECT_FALSE(runInOrder<FakeCase>(
      o, [](int64_t i) { return FakeCase{i}; }, [](FakeCase&) {}, [](FakeCase&) { return true; }));
}

}  // namespace
}  // namespace ulpcheck
