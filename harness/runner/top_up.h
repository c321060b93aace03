// The top-up stage: the plan gave each cell its share of cases, but a case
// may be inconclusive (or skipped). Further cases are drawn, each for a cell
// still short of judged cases (its kernel and dtype; the short cells taken
// in turn), and run if they apply to one, until none is short (or `cases`
// cases have run). The sequence's own cases would seldom be one: on two GPUs
// the real-rank fused variants' fp32 fused_vs_unfused cells, whose rows are
// mostly not determined bit for bit (NCCL's order may round them otherwise),
// were 14 and 16 of 50 after the whole cap. A draw in a value regime
// (distribution) where the cell's cases were seldom judged is mostly drawn
// again: kept with probability its judged rate (Laplace's) over the best
// regime's, so the cell is topped up where it can be judged without leaving
// the other regimes. Draws cost microseconds, runs do not.
//
// Top-up draw i is a pure function of (seed, i, the cell and what the cell
// judged so far), and a shard tops up its own share of each cell from its
// own indices and its share of the cases left, so shards never run the same
// case.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "harness/runner/judge.h"
#include "harness/runner/plan.h"
#include "harness/runner/selection.h"
#include "properties/generators.h"

namespace ulpcheck {

struct TopUpRequest {
  uint64_t seed = 0;
  Tier tier = Tier::Default;
  int64_t cases = 0;  // the campaign's cap on generated cases (the plan's and the top-up's)
};

class TopUp {
 public:
  TopUp(const TopUpRequest& request, const Plan& plan, const Selection& sel);
  /// The top-up cases this shard may run: its share of those the plan left.
  int64_t cap() const { return cap_; }
  /// Draws are numbered from the plan's end to endOfDraws().
  int64_t firstDraw() const { return plan_.planned; }
  int64_t endOfDraws() const { return end_; }
  /// Draw i, for `cell` (short of judged cases): the case when it applies to
  /// a cell in `below` and its value regime passes the cell's judged rate
  /// (`regimes`), else nullopt.
  std::optional<rc::Shrinkable<CaseSpec>> draw(int64_t i, const CellKey& cell,
                                               const std::vector<std::pair<CellKey, int64_t>>& below,
                                               const Tally::RegimeCounts& regimes);

 private:
  TopUpRequest request_;
  const Plan& plan_;
  const Selection& sel_;
  int64_t cap_, end_;
  std::map<std::pair<std::string, DType>, rc::Gen<CaseSpec>> generators_;  // per (kernel, dtype)
};

}  // namespace ulpcheck
