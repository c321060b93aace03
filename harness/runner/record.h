// The record stage: what a campaign writes as it goes. Its JSON-lines
// records (reports only read them), the failing cases it saves to the corpus,
// and the repro command of each.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/runner/campaign_result.h"

namespace ulpcheck {

/// The program repro commands name: the ulpcheck binary that runs, so a
/// printed command works where it is pasted. The CLI sets it (`ulpcheck` when
/// that is the binary found on PATH, else the binary's absolute path); by
/// default "ulpcheck".
void setCliProgram(std::string program);
const std::string& cliProgram();

/// The arguments of `ulpcheck` that reproduce a case (`repro '<case>' ...`;
/// run under schedule perturbation when it was found under one; `repeats` > 1
/// adds --repeat for failures that show on some runs only).
std::string reproArgs(const CaseSpec& spec, const std::string& property, bool perturb_schedule = false, int repeats = 1,
                      double case_timeout_s = 0);
/// The command that reproduces a case: cliProgram() and reproArgs.
std::string reproCommand(const CaseSpec& spec, const std::string& property, bool perturb_schedule = false,
                         int repeats = 1, double case_timeout_s = 0);
/// The command that reproduces a failure.
std::string reproCommand(const FailureRecord& f);

/// The JSON record of one check: `kind` "case" (generated case `index` of
/// the seed's sequence) or "regression" (a corpus replay, index -1).
nlohmann::json caseRecord(const char* kind, const CaseSpec& spec, const std::string& property, const Outcome& o,
                          double seconds, int64_t index = -1);

/// The JSON record of a failure: a generated one with its shrinking and its
/// repro `repro`, a regression one with reproCommand(f).
nlohmann::json generatedFailureRecord(const FailureRecord& f, const std::string& repro);
nlohmann::json regressionFailureRecord(const FailureRecord& f);

/// Saves a failing case under `corpus_dir`'s crashing/ folder, or under
/// ./ulpcheck-corpus where that cannot be written (an installed, read-only
/// corpus: said through `warn`); returns the file. `comments` head the file.
std::string saveFailingCase(const std::string& corpus_dir, const std::string& property, const CaseSpec& shrunk,
                            const std::vector<std::string>& comments,
                            const std::function<void(const std::string&)>& warn);

/// Today's date (UTC), for the comment of a saved case.
std::string today();

}  // namespace ulpcheck
