#include "harness/runner/plan.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace ulpcheck {

int64_t Plan::mineCount() const {
  int64_t n = 0;
  for (int64_t i = 0; i < planned; ++i) n += mine(i);
  return n;
}

Plan makePlan(const PlanRequest& request, const std::set<CellKey>& applicable_cells, const CaseCells& cells_of) {
  if (request.shard_count < 1 || request.shard_index < 0 || request.shard_index >= request.shard_count)
    throw std::invalid_argument(
        fmt::format("shard {} of {} does not exist", request.shard_index + 1, request.shard_count));
  Plan plan;
  plan.shard_index = request.shard_index;
  plan.shard_count = request.shard_count;
  plan.planned = request.cases;
  if (request.per_cell <= 0) return plan;
  // The seed's cases in order until every applicable cell has its share.
  // What applies to a case is known before it runs, so every shard computes
  // the same plan.
  std::map<CellKey, int64_t> counts, mine_counts;
  size_t filled = 0;
  plan.reached_target = applicable_cells.empty();
  for (plan.planned = 0; plan.planned < request.cases && !plan.reached_target; ++plan.planned) {
    const std::optional<std::vector<CellKey>> cells = cells_of(plan.planned);
    if (!cells) {
      ++plan.unfit;
      continue;
    }
    for (const CellKey& cell : *cells) {
      if (++counts[cell] == request.per_cell) ++filled;
      mine_counts[cell] += plan.mine(plan.planned);
    }
    plan.reached_target = filled == applicable_cells.size();
  }
  for (const auto& [cell, n] : counts)
    plan.cell_targets[cell] = (mine_counts[cell] * std::min(n, request.per_cell) + n - 1) / n;
  return plan;
}

}  // namespace ulpcheck
