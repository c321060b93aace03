#include "harness/runner/top_up.h"

#include <algorithm>

#include "core/rng.h"

namespace ulpcheck {

namespace {
// Keys a top-up case's random draw apart from case i of the sequence.
constexpr uint64_t kTopUpSalt = 0x746f702d7570ULL;  // "top-up"
// Draws a top-up may make per case it may run (most are drawn again).
constexpr int64_t kTopUpDrawsPerCase = 64;
}  // namespace

TopUp::TopUp(const TopUpRequest& request, const Plan& plan, const Selection& sel)
    : request_(request),
      plan_(plan),
      sel_(sel),
      cap_((request.cases - plan.planned + plan.shard_count - 1) / plan.shard_count),
      end_(plan.planned + kTopUpDrawsPerCase * std::max<int64_t>(request.cases, 1)) {}

std::optional<rc::Shrinkable<CaseSpec>> TopUp::draw(int64_t i, const CellKey& cell,
                                                    const std::vector<std::pair<CellKey, int64_t>>& below,
                                                    const Tally::RegimeCounts& regimes) {
  const auto& [kernel, property, dtype_name] = cell;
  const DType dtype = *parseDType(dtype_name);
  auto generator = generators_.find({kernel, dtype});
  if (generator == generators_.end())
    generator = generators_
                    .emplace(std::pair{kernel, dtype},
                             gen::caseSpec(gen::CaseOptions{sel_.op->name(), {kernel}, {dtype}, request_.tier}))
                    .first;
  const rc::Random random(rc::Random::Key{request_.seed, uint64_t(i), kTopUpSalt, 0});
  rc::Shrinkable<CaseSpec> shrinkable = generator->second(random, int(i % 101));
  try {
    validateCase(shrinkable.value());
  } catch (const CaseParseError&) {
    return std::nullopt;
  }
  const CaseSpec& spec = shrinkable.value();
  const std::optional<std::vector<CellKey>> cells = sel_.cellsOf(spec);
  const bool needed = cells && std::any_of(cells->begin(), cells->end(), [&](const CellKey& c) {
                        return std::any_of(below.begin(), below.end(), [&](const auto& b) { return b.first == c; });
                      });
  if (!needed) return std::nullopt;
  auto judgedRate = [](const std::pair<int64_t, int64_t>& r) { return (r.first + 1.0) / (r.second + 2.0); };
  double best = judgedRate({0, 0});  // a regime not yet seen
  for (const auto& [dist, r] : regimes) best = std::max(best, judgedRate(r));
  const auto seen = regimes.find(spec.x.kind);
  const double rate = seen == regimes.end() ? judgedRate({0, 0}) : judgedRate(seen->second);
  const double u = double(mix64(request_.seed ^ mix64(uint64_t(i) ^ kTopUpSalt)) >> 11) * 0x1p-53;
  if (u >= rate / best) return std::nullopt;
  return shrinkable;
}

}  // namespace ulpcheck
