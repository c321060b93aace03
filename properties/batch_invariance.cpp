// Property: a row's outputs are bitwise the same whatever batch it is in:
// alone (M = 1), and shifted inside a larger batch of other rows. Catches
// launch configurations or reduction orders chosen from M (vLLM #48271).
#include <algorithm>

#include <fmt/format.h>

#include "core/rng.h"
#include "properties/bitwise.h"
#include "properties/generators.h"
#include "properties/property.h"

namespace ulpcheck {

namespace {

Outcome checkBatchInvariance(CaseContext& ctx) {
  const CaseSpec& c = ctx.spec();
  const RunResult& base = ctx.baseRun();
  struct Placement {
    std::string name;
    RowLayout layout;
    std::vector<int64_t> position_of;  // base row -> position in layout, -1 if absent
  };
  std::vector<Placement> placements;

  // Alone: the first, middle and last rows each as a batch of one (not for a
  // variant that takes no batch that small: LayoutPreconditions::min_rows).
  std::vector<int64_t> alone{0, c.M / 2, c.M - 1};
  if (ctx.kernel().preconditions.min_rows > 1) alone.clear();
  std::sort(alone.begin(), alone.end());
  alone.erase(std::unique(alone.begin(), alone.end()), alone.end());
  for (int64_t row : alone) {
    Placement p{fmt::format("row {} alone (M=1)", row), {row}, std::vector<int64_t>(c.M, -1)};
    p.position_of[row] = 0;
    placements.push_back(std::move(p));
  }

  // Embedded: the whole batch shifted by `offset` inside `extra` rows of other
  // data (logical ids >= M), keeping the batch within the tier's size.
  const uint64_t h = counterHash(c.seed, 0xba7c4, 0);
  const int64_t room = std::max<int64_t>(1, maxElements(Tier::Default) / c.N - c.M);
  const int64_t extra = 1 + int64_t(h % uint64_t(std::min<int64_t>(std::max<int64_t>(c.M, 64), room)));
  const int64_t offset = int64_t((h >> 32) % uint64_t(extra + 1));
  Placement embedded{fmt::format("batch of M={} at offset {}", c.M + extra, offset), {}, std::vector<int64_t>(c.M)};
  for (int64_t pos = 0; pos < c.M + extra; ++pos) {
    const bool ours = pos >= offset && pos < offset + c.M;
    embedded.layout.push_back(ours ? pos - offset : c.M + pos);
    if (ours) embedded.position_of[pos - offset] = pos;
  }
  placements.push_back(std::move(embedded));

  Outcome o;
  for (const Placement& p : placements) {
    const RunResult other = ctx.run(p.layout);
    const BitwiseDiff d = compareBitwise(base, other, [&](int64_t r) { return p.position_of[r]; });
    if (!d.differing) continue;
    Finding f = *d.first;
    f.note = fmt::format("{}: {}", p.name, f.note);
    f.inputs = ctx.op().describeInputs(c, f.tensor, f.row, f.col);
    o.findings.push_back(f);
    o.verdict = ctx.kernel().contracts.batch_invariant ? Verdict::Fail : Verdict::Expected;
    o.summary = fmt::format("{}{} elements differ when {}; first {}[{},{}] {}", ctx.coldBaseRunNote(), d.differing,
                            p.name, f.tensor, f.row, f.col, f.note);
    return o;
  }
  o.summary = fmt::format("rows identical in {} other batches", placements.size());
  return o;
}

const bool registered = registerProperty(
    {"batch_invariance", "a row's outputs are bitwise identical alone and at another position in a larger batch",
     checkBatchInvariance});

}  // namespace
}  // namespace ulpcheck
