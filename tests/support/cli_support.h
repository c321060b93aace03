// Runs the ulpcheck executable as a user would, for the CLI suites.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "harness/runner/exit_codes.h"

namespace ulpcheck::testing {

/// In a test's body or SetUp (of a suite that defines ULPCHECK_TEST_PYTHON):
/// skips it where configure found no Python with torch, else hands that
/// interpreter to ulpcheck ($ULPCHECK_PYTHON).
#define ULPCHECK_REQUIRE_PYTHON_WITH_TORCH()                                                               \
  do {                                                                                                     \
    if (std::string(ULPCHECK_TEST_PYTHON).empty())                                                         \
      GTEST_SKIP() << "no Python with torch found at configure time ($ULPCHECK_PYTHON, /usr/bin/python3; " \
                      "ci/install-deps installs Debian's python3-torch)";                                  \
    setenv("ULPCHECK_PYTHON", ULPCHECK_TEST_PYTHON, 1);                                                    \
  } while (0)

struct Result {
  int code;            // exit status (-1: killed by a signal)
  std::string output;  // stdout and stderr together
};

inline Result cli(const std::string& args) {
  const std::string cmd = std::string(ULPCHECK_CLI) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

/// The arguments of the first command a `reproduce:` line of `output` prints,
/// after its program, which must be this very binary named by its path (a
/// repro command works wherever it is pasted; build/ulpcheck is not on PATH).
/// Empty if there is none.
inline std::string reproArgsIn(const std::string& output) {
  // The binary as the build names it, with its links resolved (as
  // /proc/self/exe gives it), or `ulpcheck` where it is the one on PATH.
  std::error_code ec;
  const std::string resolved = std::filesystem::canonical(ULPCHECK_CLI, ec).string();
  for (const std::string& program : {std::string(ULPCHECK_CLI), resolved, std::string("ulpcheck")}) {
    const std::string prefix = "reproduce: " + program + " ";
    const size_t at = output.find(prefix);
    if (program.empty() || at == std::string::npos) continue;
    const size_t from = at + prefix.size();
    return output.substr(from, output.find('\n', from) - from);
  }
  return "";
}

/// The failure `output` reports fails again when its repro command runs on
/// its own (exit `code`), saying `says`.
inline void expectReproFailsAgain(const std::string& output, const std::string& says,
                                  int code = exit_code::kPropertyFailed) {
  const std::string repro = reproArgsIn(output);
  ASSERT_EQ(repro.rfind("repro '", 0), 0u) << output;
  const Result again = cli(repro);
  EXPECT_EQ(again.code, code) << repro << "\n" << again.output;
  EXPECT_NE(again.output.find(says), std::string::npos) << again.output;
}

/// A campaign over a plugin variant that faults in one shape regime
/// (in_regime(N)): every fault is a failing case (exit 1; 5 where the kernel
/// hung) saying what happened, its repro fails again, and at least 90% of
/// the other cases are still judged in the same run.
inline void expectFaultIsolated(const std::string& plugin, const std::string& kernel,
                                const std::function<bool(int64_t)>& in_regime, const std::string& says,
                                const std::string& options, int exit_code = exit_code::kPropertyFailed) {
  const std::string json = ::testing::TempDir() + kernel + ".jsonl";
  const Result r = cli("run --plugin " + plugin + " --kernel " + kernel + " --cases 100 --seed 11 --shrink-budget 4 " +
                       options + " --no-save --no-corpus --json " + json);
  EXPECT_EQ(r.code, exit_code) << r.output;
  EXPECT_NE(r.output.find(says), std::string::npos) << says << "\n" << r.output;
  std::ifstream in(json);
  int faulting = 0, others = 0, others_judged = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] != "case") continue;
    const bool bad = in_regime(std::stoll(j["case"]["N"].get<std::string>()));
    const std::string verdict = j["outcome"]["verdict"];
    if (bad) {
      faulting += verdict == "FAIL";
    } else {
      ++others;
      others_judged += verdict == "pass" || verdict == "expected";
    }
  }
  EXPECT_GT(faulting, 0) << "the regime was reached";
  EXPECT_GE(others_judged, others * 9 / 10) << others_judged << " of " << others << " other cases judged";
  std::printf("%s: %d failing cases in the regime; %d of %d other cases judged\n", kernel.c_str(), faulting,
              others_judged, others);
  expectReproFailsAgain(r.output, says, exit_code);
}

/// Cases a campaign's JSON lines (--json) passed, per property.
inline std::map<std::string, int> passedPerProperty(const std::string& json) {
  std::map<std::string, int> passed;
  std::ifstream in(json);
  for (std::string line; std::getline(in, line);) {
    const auto r = nlohmann::json::parse(line);
    if (r["type"] == "case" && r["outcome"]["verdict"] == "pass") ++passed[r["property"].get<std::string>()];
  }
  return passed;
}

/// Expects each of `properties` to have passed more than `more_than` cases of the campaign whose JSON lines
/// are `json` (its output printed otherwise).
inline void expectEachPassedMoreThan(const std::string& json, std::initializer_list<const char*> properties,
                                     int more_than, const std::string& output) {
  const std::map<std::string, int> passed = passedPerProperty(json);
  for (const char* p : properties) EXPECT_GT(passed.count(p) ? passed.at(p) : 0, more_than) << p << "\n" << output;
}

inline std::function<bool(int64_t)> atN(int64_t n) {
  return [n](int64_t N) { return N == n; };
}

}  // namespace ulpcheck::testing
