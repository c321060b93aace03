// A repro (`ulpcheck repro`): one case, from a case string or a corpus file,
// rerun (as often as asked, each run afresh) under each property that
// applies, each property said with its worst elements as soon as it is final.
#pragma once

#include <string>
#include <vector>

#include "core/case_spec.h"
#include "kernels/registry.h"
#include "properties/op.h"

namespace ulpcheck {

struct ReproCase {
  CaseSpec spec;
  const KernelInfo* kernel = nullptr;  // the variant it runs on (its backend decides the run's)
  int repeat = 0;                      // a corpus file's `# repeat:` (0: none said)
};

/// The case `text` names: a case string, or a .case file (under a corpus
/// folder, <op>/<property>/<kind>/, the folders must agree with it), run on
/// `kernel` where that is not empty. Throws CaseParseError or CorpusError
/// for a malformed case, an unknown op or variant.
ReproCase readReproCase(const std::string& text, const std::string& kernel);

struct ReproRequest {
  std::vector<std::string> properties;  // empty: every property that applies
  int repeat = 0;                       // runs; 0: once, or as often as the corpus file says
  double case_timeout_s = 300;          // a kernel call in a worker running longer is killed: its case fails
  std::string json;                     // the JSON-lines file to write (empty: none)
};

/// The repro's exit code (harness/runner/exit_codes.h): a hang, a failure,
/// nothing judged (no property judged the case) or a pass.
int reproCase(const ReproCase& c, const ReproRequest& request, ExecContext exec);

}  // namespace ulpcheck
