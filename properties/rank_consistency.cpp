// Property: every rank of a multi-rank op holds the same bits. An op reports
// rank r's copy of output t as "t@r" beside rank 0's "t"; each is compared
// with rank 0's bit for bit. Ranks that reduce in different orders (each
// rank starting the sum from its own partial, say) disagree here long before
// any tolerance would notice.
#include <fmt/format.h>

#include "properties/bitwise.h"
#include "properties/property.h"

namespace ulpcheck {

namespace {

Outcome checkRankConsistency(CaseContext& ctx) {
  const RunResult& run = ctx.baseRun();
  Outcome o;
  int compared = 0;
  BitwiseDiff d;
  for (const OutputTensor& t : run.outputs) {
    const auto at = t.name.find('@');
    if (at == std::string::npos) continue;
    const OutputTensor* rank0 = run.find(t.name.substr(0, at));
    if (!rank0) {
      o.verdict = Verdict::Fail;
      o.summary = fmt::format("'{}' has no rank-0 counterpart '{}'", t.name, t.name.substr(0, at));
      return o;
    }
    compareTensors(*rank0, t, d);
    if (d.differing && d.first && d.first->note.find(" on ") == std::string::npos)
      d.first->note = fmt::format("{} on rank 0 vs {}", d.first->note, t.name);
    ++compared;
  }
  if (compared == 0) {
    o.verdict = Verdict::Fail;
    o.summary = "a multi-rank case produced no per-rank outputs ('t@r') to compare";
    return o;
  }
  if (d.differing) {
    Finding f = *d.first;
    f.inputs = ctx.op().describeInputs(ctx.spec(), f.tensor, f.row, f.col);
    o.verdict = Verdict::Fail;
    o.summary = fmt::format("ranks disagree in {} elements; first {}[{},{}] {}", d.differing, f.tensor, f.row, f.col,
                            f.note);
    o.findings.push_back(f);
    return o;
  }
  o.summary = fmt::format("{} per-rank outputs bitwise equal to rank 0's", compared);
  return o;
}

const bool registered = registerProperty(
    {"rank_consistency", "every rank of a multi-rank op holds bitwise identical outputs", checkRankConsistency, false,
     [](const OpAdapter& op, const KernelInfo&) { return op.multiRank(); },
     [](const CaseSpec& c) { return c.ranks > 1; }});

}  // namespace
}  // namespace ulpcheck
