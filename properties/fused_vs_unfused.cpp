// Property: a fused variant's outputs that its contract names
// (Contracts::bitwise_with_unfused) equal, bit for bit and on every rank,
// those of the unfused pipeline it replaces (Contracts::unfused_pipeline) on
// the same case. This is what a fused allreduce + residual + RMSNorm that
// skips the round trip of the sum through the activation dtype breaks
// (aiter PR #2586): every value stays within a loose tolerance, the bits do not.
#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "core/datagen.h"
#include "properties/bitwise.h"
#include "properties/property.h"

namespace ulpcheck {

namespace {

Outcome checkFusedVsUnfused(CaseContext& ctx) {
  const Contracts& contract = ctx.kernel().contracts;
  Outcome o;
  if (!OpAdapter::findKernel(ctx.spec().op, contract.unfused_pipeline)) {
    o.verdict = Verdict::Fail;
    o.summary = fmt::format("the contract names unfused pipeline '{}', which this build does not register",
                            contract.unfused_pipeline);
    return o;
  }
  CaseSpec unfused = ctx.spec();
  unfused.kernel = contract.unfused_pipeline;
  const RunResult reference = ctx.op().run(unfused, identityRows(unfused.M), ctx.exec());
  const RunResult& fused = ctx.baseRun();

  // "t" and every rank's "t@r" for each named tensor t.
  auto named = [&](const std::string& name) {
    const std::string stem = name.substr(0, name.find('@'));
    return std::find(contract.bitwise_with_unfused.begin(), contract.bitwise_with_unfused.end(), stem) !=
           contract.bitwise_with_unfused.end();
  };
  int compared = 0;
  for (const OutputTensor& t : reference.outputs) compared += named(t.name) && fused.find(t.name);
  if (compared == 0) {
    o.verdict = Verdict::Fail;
    o.summary = fmt::format("none of the outputs the contract names ({}) was produced by both",
                            fmt::join(contract.bitwise_with_unfused, ", "));
    return o;
  }
  // With an unfused pipeline that orders its operations its own way, only
  // the rows the spec determines bit for bit are owed (Contracts::
  // bitwise_rows_where_exact); the others are the accuracy property's.
  std::function<int64_t(int64_t)> rows = nullptr;
  std::string scope = "every row";
  if (!contract.bitwise_rows_where_exact.empty()) {
    const std::vector<ReferenceTensor>& oracle = ctx.reference();
    const auto by = std::find_if(oracle.begin(), oracle.end(),
                                 [&](const ReferenceTensor& t) { return t.name == contract.bitwise_rows_where_exact; });
    if (by == oracle.end()) {
      o.verdict = Verdict::Fail;
      o.summary = fmt::format("the oracle has no tensor '{}' to tell determined rows by",
                              contract.bitwise_rows_where_exact);
      return o;
    }
    std::vector<bool> determined(size_t(by->rows), true);
    int64_t count = 0;
    for (int64_t r = 0; r < by->rows; ++r) {
      for (int64_t c = 0; c < by->cols && determined[size_t(r)]; ++c)
        determined[size_t(r)] = by->budget[size_t(r * by->cols + c)] == 0.0;
      count += determined[size_t(r)];
    }
    if (count == 0) {
      o.verdict = Verdict::Inconclusive;
      o.summary = fmt::format("no row the spec determines bit for bit ({} of every row is rounded in fp32 in some "
                              "order), so the order {} chose may show",
                              contract.bitwise_rows_where_exact, contract.unfused_pipeline);
      return o;
    }
    rows = [determined](int64_t r) { return determined[size_t(r)] ? r : int64_t(-1); };
    scope = fmt::format("the {} of {} rows the spec determines", count, by->rows);
  }
  const BitwiseDiff d = compareBitwise(reference, fused, rows, named);
  if (d.differing) {
    Finding f = *d.first;
    f.note = fmt::format("{} ({} vs {})", f.note, contract.unfused_pipeline, ctx.spec().kernel);
    f.inputs = ctx.op().describeInputs(ctx.spec(), f.tensor, f.row, f.col);
    o.verdict = Verdict::Fail;
    o.summary = fmt::format("{} elements differ from the unfused pipeline {}; first {}[{},{}] {}", d.differing,
                            contract.unfused_pipeline, f.tensor, f.row, f.col, f.note);
    o.findings.push_back(f);
    return o;
  }
  o.summary = fmt::format("{} outputs bitwise equal to {} in {}", compared, contract.unfused_pipeline, scope);
  return o;
}

const bool registered = registerProperty(
    {"fused_vs_unfused", "a fused variant's contracted outputs equal its unfused pipeline's bit for bit",
     checkFusedVsUnfused, false,
     // Fused variants: those whose contract names the unfused pipeline they replace.
     [](const OpAdapter&, const KernelInfo& k) { return !k.contracts.unfused_pipeline.empty(); }});

}  // namespace
}  // namespace ulpcheck
