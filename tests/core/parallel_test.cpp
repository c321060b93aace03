// sweepChunksInOrder: every chunk's result reaches the fold once, in chunk
// order, whatever the pool, with no more than one wave of results alive.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <vector>

#include "core/parallel.h"

namespace ulpcheck {
namespace {

/// A chunk's result that counts how many are alive at once.
struct Counted {
  explicit Counted(int64_t k, std::atomic<int>& live, std::atomic<int>& most) : chunk(k), live_(&live) {
    const int now = ++live;
    for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
    }
  }
  ~Counted() { --*live_; }
  Counted(const Counted&) = delete;
  Counted& operator=(const Counted&) = delete;
  int64_t chunk;

 private:
  std::atomic<int>* live_;
};

TEST(SweepChunksInOrder, FoldsEveryChunkInOrderHoldingOneWaveAtMost) {
  for (unsigned threads : {1u, 2u, 3u, 8u})
    for (int64_t chunks : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{7}, int64_t{64}}) {
      ThreadPool pool(threads);
      std::atomic<int> live{0}, most{0};
      std::vector<int64_t> folded;
      std::vector<unsigned> workers;
      sweepChunksInOrder(
          pool, chunks,
          [&](unsigned worker, int64_t k) {
            EXPECT_LT(worker, pool.size());
            return std::make_unique<Counted>(k, live, most);
          },
          [&](int64_t k, std::unique_ptr<Counted> result) {
            EXPECT_EQ(result->chunk, k);
            folded.push_back(k);
          });
      std::vector<int64_t> expected(static_cast<size_t>(chunks));
      for (int64_t k = 0; k < chunks; ++k) expected[size_t(k)] = k;
      EXPECT_EQ(folded, expected) << threads << " threads, " << chunks << " chunks";
      EXPECT_LE(most.load(), int(threads)) << threads << " threads, " << chunks << " chunks";
      EXPECT_EQ(live.load(), 0);
    }
}

TEST(SweepChunksInOrder, InsideAnotherSweepOrInlineItHoldsOneResultAtATime) {
  ThreadPool pool(4);
  InlineChunks inline_chunks;  // a case among several running at once
  EXPECT_EQ(pool.parallelism(), 1u);
  std::atomic<int> live{0}, most{0};
  int64_t next = 0;
  sweepChunksInOrder(
      pool, 10, [&](unsigned, int64_t k) { return std::make_unique<Counted>(k, live, most); },
      [&](int64_t k, std::unique_ptr<Counted>) { EXPECT_EQ(k, next++); });
  EXPECT_EQ(next, 10);
  EXPECT_EQ(most.load(), 1);
}

TEST(SweepChunksInOrder, AChunksErrorReachesTheCallerAndStopsTheSweep) {
  ThreadPool pool(2);
  int64_t folded = 0;
  EXPECT_THROW(sweepChunksInOrder(
                   pool, 9,
                   [&](unsigned, int64_t k) {
                     if (k == 4) throw std::runtime_error("chunk 4");
                     return k;
                   },
                   [&](int64_t, int64_t) { ++folded; }),
               std::runtime_error);
  EXPECT_EQ(folded, 4);  // the waves before the failing one
}

}  // namespace
}  // namespace ulpcheck
