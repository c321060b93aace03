// The case corpus: corpora/<op>/<property>/{regression,crashing}/*.case.
// A file holds '#' comment lines and exactly one case line. Regression cases
// replay on every run (for every selected kernel of their op); failing cases
// found by a run are written to crashing/, to be promoted by a person. A
// comment line `# repeat: N` replays the case N times (each run afresh),
// failing if any run fails: the case of a race fails on some runs only.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "core/case_spec.h"

namespace ulpcheck {

struct CorpusError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CorpusEntry {
  std::string path;
  std::string op, property;  // from the path
  CaseSpec spec;
  std::vector<std::string> comments;
  int repeat = 1;  // `# repeat: N`
};

/// Most runs a `# repeat:` line may ask for.
inline constexpr int kMaxCorpusRepeat = 1000;

/// Parses one corpus file; throws CorpusError naming the file and line. `op`:
/// the op of the folder it lies in, which the case must be of (empty: a
/// case file outside a corpus, taken as it is).
CorpusEntry readCorpusFile(const std::string& path, const std::string& op, const std::string& property);

/// Every case under <root>/<op>/<property>/<kind>/ (kind: "regression" or
/// "crashing"), sorted by path. A missing root yields nothing.
std::vector<CorpusEntry> loadCorpus(const std::string& root, const std::string& kind);

/// Writes a case to <root>/<op>/<property>/crashing/<kernel>-<hash>.case and
/// returns its path; throws CorpusError when it cannot be written.
std::string saveCrashingCase(const std::string& root, const std::string& property, const CaseSpec& spec,
                             const std::vector<std::string>& comments);

/// The corpus a run uses when none is named: $ULPCHECK_CORPUS; else the one
/// installed beside the executable (<prefix>/share/ulpcheck/corpora, when
/// the executable is <prefix>/bin/ulpcheck); else the source tree's.
std::string defaultCorpusDir();

/// Where crashing cases go when `root` cannot be written (an installed,
/// read-only corpus): ./ulpcheck-corpus, like a fuzzer's crash files.
inline constexpr const char* kFallbackCrashingRoot = "ulpcheck-corpus";

}  // namespace ulpcheck
