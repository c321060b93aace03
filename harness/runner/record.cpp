#include "harness/runner/record.h"

#include <ctime>

#include <fmt/format.h>

#include "harness/runner/corpus.h"
#include "properties/op.h"

namespace ulpcheck {

std::string today() {
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

namespace {
std::string& cliProgramSetting() {
  static std::string program = "ulpcheck";
  return program;
}
}  // namespace

void setCliProgram(std::string program) { cliProgramSetting() = std::move(program); }
const std::string& cliProgram() { return cliProgramSetting(); }

std::string reproCommand(const CaseSpec& spec, const std::string& property, bool perturb_schedule, int repeats,
                         double case_timeout_s) {
  return cliProgram() + " " + reproArgs(spec, property, perturb_schedule, repeats, case_timeout_s);
}

std::string reproArgs(const CaseSpec& spec, const std::string& property, bool perturb_schedule, int repeats,
                      double case_timeout_s) {
  // A plugin's variant needs its plugin loaded again.
  const KernelInfo* k = OpAdapter::findKernel(spec.op, spec.kernel);
  return fmt::format("repro '{}' --property {}{}{}{}{}", toCaseString(spec), property,
                     perturb_schedule ? " --perturb-schedule" : "",
                     repeats > 1 ? fmt::format(" --repeat {}", repeats) : "",
                     case_timeout_s > 0 ? fmt::format(" --case-timeout {:g}", case_timeout_s) : "",
                     !k                        ? ""
                     : !k->plugin_path.empty() ? fmt::format(" --plugin '{}'", k->plugin_path)
                     : !k->python_file.empty() ? fmt::format(" --python '{}'", k->python_file)
                                               : "");
}

std::string reproCommand(const FailureRecord& f) {
  return reproCommand(f.shrunk, f.property, f.perturb_schedule, f.repeats, f.case_timeout_s);
}

nlohmann::json caseRecord(const char* kind, const CaseSpec& spec, const std::string& property, const Outcome& o,
                          double seconds, int64_t index) {
  nlohmann::json j = {{"type", kind}, {"case", toJson(spec)}, {"property", property}, {"seconds", seconds}};
  if (index >= 0) j["index"] = index;
  j["outcome"] = toJson(o);
  return j;
}

nlohmann::json generatedFailureRecord(const FailureRecord& f, const std::string& repro) {
  nlohmann::json j = {{"type", "failure"},
                      {"kind", "generated"},
                      {"property", f.property},
                      {"case_index", f.case_index},
                      {"original", toJson(f.original)},
                      {"shrunk", toJson(f.shrunk)},
                      {"shrink_steps", f.shrink_steps},
                      {"shrink_finished", f.shrink_finished},
                      {"seconds_to_detect", f.seconds_to_detect},
                      {"repro", repro},
                      {"corpus_file", f.corpus_file},
                      {"outcome", toJson(f.outcome)}};
  if (f.as_found) j["as_found"] = true;  // only then: the lines of other failures stay as they were
  return j;
}

// As a generated failure's: a report of JSON lines cut short still has its message.
nlohmann::json regressionFailureRecord(const FailureRecord& f) {
  return {{"type", "failure"},
          {"kind", "regression"},
          {"property", f.property},
          {"original", toJson(f.original)},
          {"shrunk", toJson(f.shrunk)},
          {"repro", reproCommand(f)},
          {"corpus_file", f.corpus_file},
          {"outcome", toJson(f.outcome)}};
}

std::string saveFailingCase(const std::string& corpus_dir, const std::string& property, const CaseSpec& shrunk,
                            const std::vector<std::string>& comments,
                            const std::function<void(const std::string&)>& warn) {
  try {
    return saveCrashingCase(corpus_dir, property, shrunk, comments);
  } catch (const CorpusError& e) {  // an installed corpus may be read-only
    std::string file = saveCrashingCase(kFallbackCrashingRoot, property, shrunk, comments);
    warn(fmt::format("{}; saved under ./{} instead", e.what(), kFallbackCrashingRoot));
    return file;
  }
}

}  // namespace ulpcheck
