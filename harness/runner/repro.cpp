#include "harness/runner/repro.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/phase_timer.h"
#include "harness/report/table.h"
#include "harness/runner/coordinator.h"
#include "harness/runner/corpus.h"
#include "harness/runner/exit_codes.h"
#include "harness/runner/jsonl.h"
#include "harness/runner/run.h"
#include "harness/runner/run_case.h"
#include "properties/property.h"

namespace ulpcheck {

ReproCase readReproCase(const std::string& text, const std::string& kernel) {
  ReproCase c;
  std::error_code ec;
  if (std::filesystem::is_regular_file(text, ec)) {
    // Under a corpus (<op>/<property>/<kind>/file.case) the folders must agree
    // with the case; a case file copied anywhere else replays as it is.
    const std::filesystem::path p = std::filesystem::absolute(text, ec);
    const std::string op_folder = p.parent_path().parent_path().parent_path().filename().string();
    const std::string property_folder = p.parent_path().parent_path().filename().string();
    const bool in_corpus = findOp(op_folder) && findProperty(property_folder);
    const CorpusEntry entry = readCorpusFile(text, in_corpus ? op_folder : "", in_corpus ? property_folder : "");
    c.spec = entry.spec;
    c.repeat = entry.repeat;
  } else if (text.find('=') == std::string::npos && text.find(".case") != std::string::npos) {
    throw CaseParseError(fmt::format("{}: no such case file", text));
  } else {
    c.spec = parseCaseString(text);
  }
  if (!findOp(c.spec.op)) throw CaseParseError(fmt::format("unknown op '{}' (ops: {})", c.spec.op, opNames()));
  if (!kernel.empty()) c.spec.kernel = kernel;
  c.kernel = OpAdapter::findKernel(c.spec.op, c.spec.kernel);
  if (!c.kernel)
    throw CaseParseError(
        fmt::format("op '{}' has no kernel variant '{}' (see `ulpcheck list`)", c.spec.op, c.spec.kernel));
  return c;
}

int reproCase(const ReproCase& c, const ReproRequest& request, ExecContext exec) {
  const int repeat = std::max(request.repeat ? request.repeat : c.repeat, 1);
  std::unique_ptr<JsonlWriter> json = openJsonLines(request.json);
  exec.determinism_repeats = kThoroughDeterminismRepeats;  // one case: afford the runs a race needs to show
  exec.call_timeout_s = request.case_timeout_s;
  const CaseSpec& spec = c.spec;
  fmt::print("# case: {}{}\n", toCaseString(spec), repeat > 1 ? fmt::format(" ({} runs, each afresh)", repeat) : "");
  const auto t0 = std::chrono::steady_clock::now();
  bool failed = false, hung = false;
  std::vector<std::string> unjudged;  // properties that apply (or were named) and judged nothing
  // Each property said (and its JSON record written) as soon as it is final.
  runCase(spec, request.properties, exec, repeat, [&](const ReplayResult& r) {
    const Outcome& o = r.outcome;
    // With --repeat: how many runs failed, then the first failure (or the last pass) in full.
    const std::string tally = repeat > 1 ? fmt::format("failed {} of {} runs; ", r.failed, r.runs) : "";
    fmt::print("\n{:<18} {:<8} {}{}\n", r.property, verdictName(r.failed ? Verdict::Fail : o.verdict), tally,
               o.summary);
    fmt::print("{}{}", formatStats(o), formatFindings(o));
    failed |= r.failed > 0;
    hung |= r.hung > 0;
    if (!r.failed && !o.judged()) unjudged.push_back(r.property);
    if (json)
      json->write({{"type", "repro"},
                   {"case", toJson(spec)},
                   {"property", r.property},
                   {"runs", r.runs},
                   {"failed_runs", r.failed},
                   {"outcome", toJson(o)}});
    std::fflush(stdout);
  });
  fmt::print(
      "\n# {}\n# {}\n", formatOracleCounts(processOracleCounts(), exec),
      formatPhaseTimes(phaseSeconds(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
  if (sayJsonLinesError(json.get())) return exit_code::kRuntimeError;
  if (hung) return exit_code::kHang;
  if (failed) return exit_code::kPropertyFailed;
  // A repro that judged nothing is not a pass, as a run's property that judged no case is not.
  if (!unjudged.empty()) {
    fmt::print("# NOTHING JUDGED: {} (skipped, inconclusive or not applicable)\n", fmt::join(unjudged, ", "));
    return exit_code::kNothingJudged;
  }
  return exit_code::kOk;
}

}  // namespace ulpcheck
