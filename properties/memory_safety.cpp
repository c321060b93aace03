// Property: every output element written (no NaN poison left), nothing
// written outside the outputs (canary red zones and row padding intact),
// inputs left unchanged, no kernel launch failed without the variant noticing.
#include <fmt/format.h>

#include "properties/property.h"

namespace ulpcheck {

namespace {

Outcome checkMemorySafety(CaseContext& ctx) {
  const MemoryReport& m = ctx.baseRun().memory;
  Outcome o;
  if (m.clean()) {
    o.summary = "all outputs written; canaries, padding and inputs intact";
    return o;
  }
  o.verdict = Verdict::Fail;
  o.summary = fmt::format(
      "{} unwritten, {} padding elements written, {} input elements modified, {} canary bytes damaged", m.unwritten,
      m.padding_written, m.inputs_modified, m.canary_bytes_damaged);
  if (!m.unchecked_launch.empty()) {
    o.summary += "; unchecked launch failure";
    Finding f;
    f.note = m.unchecked_launch;
    o.findings.push_back(f);
  }
  for (const std::string& d : m.details) {
    Finding f;
    f.note = d;
    o.findings.push_back(f);
  }
  return o;
}

const bool registered = registerProperty(
    {"memory_safety",
     "every output element written; no write outside outputs; inputs unchanged; no unchecked failed launch",
     checkMemorySafety});

}  // namespace
}  // namespace ulpcheck
