#include "harness/runner/judge.h"

#include <algorithm>

#include <fmt/format.h>

#include "harness/runner/run_case.h"

namespace ulpcheck {

Tally::Tally(CampaignResult& result, std::function<void(const std::string&)> log)
    : result_(result), log_(std::move(log)) {}

void Tally::add(const CaseSpec& spec, const std::string& property, const Outcome& out, double seconds) {
  const CellKey key{spec.kernel, property, dtypeName(spec.dtype)};
  // Why a cell's cases are skipped (too large for this machine, more ranks
  // than GPUs): said at its first, not only in the JSON.
  if (out.verdict == Verdict::Skip && said_skip_.insert(key).second && log_)
    log_(fmt::format("{} {} {}: a case skipped: {}", spec.kernel, property, dtypeName(spec.dtype), out.summary));
  auto& regime = judged_by_regime_[key][spec.x.kind];
  regime.first += out.judged(), ++regime.second;
  CellStats& cell = result_.cells[key];
  ++cell.cases;
  cell.seconds += seconds;
  switch (out.verdict) {
    case Verdict::Pass: ++cell.passed; break;
    case Verdict::Fail: ++cell.failed, cell.faulted += out.fault, cell.hung += out.hang; break;
    case Verdict::Expected: ++cell.expected; break;
    case Verdict::Skip: ++cell.skipped; break;
    case Verdict::Inconclusive: ++cell.inconclusive; break;
  }
  if (out.judged()) ++result_.judged[{spec.kernel, property}];
  for (const TensorStats& s : out.stats) {
    cell.max_ulp = std::max(cell.max_ulp, s.max_ulp);
    cell.max_ratio = std::max(cell.max_ratio, s.max_ratio);
    if (s.errors.count) cell.errors[s.tensor].merge(s.errors);
  }
}

void Tally::cover(const CaseSpec& spec, int sm_count) {
  const KernelInfo& k = kernelOf(spec);
  if (k.paths_taken)
    for (const auto& path : k.paths_taken(RowShape{spec.dtype, spec.M, spec.N, spec.ld, spec.eps, spec.spec},
                                          LaunchEnv{sm_count, spec.ctas, nullptr}))
      ++result_.paths[spec.kernel][path];
}

const Tally::RegimeCounts& Tally::regimes(const CellKey& cell) const {
  static const RegimeCounts kNone;
  const auto it = judged_by_regime_.find(cell);
  return it == judged_by_regime_.end() ? kNone : it->second;
}

}  // namespace ulpcheck
