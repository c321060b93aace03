// The plan stage: which of the seed's generated cases a campaign (or a shard
// of it) runs, and how many judged cases each (kernel, property, dtype) cell
// must reach. Pure: the seed's cases reach it as a function from an index to
// the cells the case would check, so it is tested without a kernel.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace ulpcheck {

/// A cell of a campaign: (kernel, property, dtype).
using CellKey = std::tuple<std::string, std::string, std::string>;

struct PlanRequest {
  int64_t cases = 0;     // generated cases; with per_cell, the most the plan may take
  int64_t per_cell = 0;  // > 0: the shortest prefix giving every applicable cell this many cases
  // Case i belongs to shard i mod shard_count: the shards of one plan are
  // disjoint and together are the whole.
  int shard_index = 0, shard_count = 1;
};

/// The cells generated case `index` of the seed's sequence would check, or
/// nullopt where its kernel does not take it (a dtype or layout: never run).
using CaseCells = std::function<std::optional<std::vector<CellKey>>(int64_t index)>;

struct Plan {
  int64_t planned = 0;         // cases 0 .. planned - 1 of the sequence
  int64_t unfit = 0;           // of them: a dtype or layout their kernel does not take (per-cell plans only)
  bool reached_target = true;  // false: `cases` ran out before every cell had per_cell
  // This shard's share of each cell's target (per-cell plans only), in
  // proportion to the plan's cases of the cell it runs, rounded up: the
  // shares of all shards add up to the target.
  std::map<CellKey, int64_t> cell_targets;
  int shard_index = 0, shard_count = 1;

  bool mine(int64_t index) const { return shard_count <= 1 || index % shard_count == shard_index; }
  /// The planned cases this shard runs.
  int64_t mineCount() const;
};

/// Plans a campaign over `applicable_cells` (every cell the selection could
/// check). Throws std::invalid_argument for a shard that does not exist.
Plan makePlan(const PlanRequest& request, const std::set<CellKey>& applicable_cells, const CaseCells& cells_of);

}  // namespace ulpcheck
