// Kernels from outside ulpcheck, through the plugin ABI
// (include/ulpcheck/plugin.h): the example library's variants are judged
// like built-in ones, a defect in one is caught and reproduced through its
// plugin, and a plugin that cannot be used is refused with a clear error.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "harness/runner/exit_codes.h"
#include "tests/support/cli_support.h"

namespace ulpcheck {
namespace {

using testing::atN;
using testing::cli;
using testing::expectFaultIsolated;
using testing::Result;

const std::string kExample = std::string(" --plugin ") + ULPCHECK_EXAMPLE_PLUGIN;

TEST(Plugin, ListShowsTheVariantsAndWhereTheyCameFrom) {
  const Result r = cli("list" + kExample);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  for (const char* s : {"mylib_rmsnorm_host", "mylib_rmsnorm_host_bf16_dw", "from plugin", "sha256 "})
    EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;
}

TEST(Plugin, ADefectInAPluginKernelIsCaughtShrunkAndReplaysThroughThePlugin) {
  const Result r = cli("run --kernel mylib_rmsnorm_host_bf16_dw --property accuracy --cases 50 --tier smoke --seed 1 "
                       "--no-save --no-corpus" +
                       kExample);
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  const std::string repro = testing::reproArgsIn(r.output);
  ASSERT_FALSE(repro.empty()) << r.output;
  EXPECT_NE(repro.find("--plugin '"), std::string::npos) << "the repro loads the plugin again: " << repro;
  EXPECT_EQ(cli(repro).code, exit_code::kPropertyFailed) << repro;
}

TEST(Plugin, GeneratedCasesKeepTheVariantsPreconditions) {
  const std::string json = ::testing::TempDir() + "plugin-pre.jsonl";
  const Result r = cli(std::string("run --plugin ") + ULPCHECK_TEST_PLUGIN_GOOD +
                       " --kernel test_rmsnorm_contiguous --cases 150 --seed 5 --no-save --no-corpus --json " + json);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  std::ifstream in(json);
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] != "case") continue;
    ++cases;
    const std::string N = j["case"]["N"].dump(), ld = j["case"]["ld"].dump();
    EXPECT_EQ(N, ld) << line;
    EXPECT_LE(std::stoll(nlohmann::json::parse(N).get<std::string>()), 512) << line;
  }
  EXPECT_GT(cases, 100);
  // A case that breaks them is refused, saying why, not run on wrong rows.
  const Result bad =
      cli(std::string("repro 'op=rmsnorm kernel=test_rmsnorm_contiguous dtype=fp32 M=2 N=5 ld=8' --plugin ") +
          ULPCHECK_TEST_PLUGIN_GOOD);
  EXPECT_EQ(bad.code, exit_code::kNothingRan) << bad.output;
  EXPECT_NE(bad.output.find("needs contiguous rows"), std::string::npos) << bad.output;
}

TEST(Plugin, AnErrorReturnIsAFailingCaseWithThePluginsMessage) {
  const Result r = cli(std::string("repro 'op=rmsnorm kernel=test_rmsnorm_fails_past_64_rows dtype=fp32 M=65 N=8' "
                                   "--property accuracy --plugin ") +
                       ULPCHECK_TEST_PLUGIN_GOOD);
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("rmsnorm_backward returned 3: scratch too small"), std::string::npos) << r.output;
  // At 64 rows it works, but batch invariance runs the rows inside a larger
  // batch too, and that run fails.
  const std::string at_64 = "repro 'op=rmsnorm kernel=test_rmsnorm_fails_past_64_rows dtype=fp32 M=64 N=8' --plugin " +
                            std::string(ULPCHECK_TEST_PLUGIN_GOOD);
  EXPECT_EQ(cli(at_64 + " --property accuracy").code, exit_code::kOk);
  EXPECT_EQ(cli(at_64 + " --property batch_invariance").code, exit_code::kPropertyFailed);
}

TEST(PluginFaults, ASegfaultIsAFailingCaseAndTheRunGoesOn) {
  expectFaultIsolated(ULPCHECK_TEST_PLUGIN_GOOD, "test_rmsnorm_segfaults_at_n7", atN(7), "killed by signal 11",
                      "--tier smoke --case-timeout 2");
}

TEST(PluginFaults, AnAbortIsAFailingCaseAndTheRunGoesOn) {
  expectFaultIsolated(ULPCHECK_TEST_PLUGIN_GOOD, "test_rmsnorm_aborts_at_n3", atN(3), "killed by signal 6",
                      "--tier smoke --case-timeout 2");
}

TEST(PluginFaults, AHangIsKilledAfterTheCaseTimeoutAndIsAFailingCase) {
  // A hang is exit code 5 (the exit-code list's), though the run went on.
  expectFaultIsolated(ULPCHECK_TEST_PLUGIN_GOOD, "test_rmsnorm_hangs_at_n5", atN(5), "did not return within 2 s",
                      "--tier smoke --case-timeout 2", exit_code::kHang);
}

TEST(Plugin, APluginThatCannotBeUsedIsRefusedClearly) {
  auto expectRefused = [](const std::string& plugin, const std::string& says) {
    const Result r = cli("list --plugin " + plugin);
    EXPECT_EQ(r.code, exit_code::kUsage) << plugin << "\n" << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << says << "\n" << r.output;
  };
  expectRefused("/nonexistent/libnothing.so", "no such file");
  expectRefused(ULPCHECK_CLI, "cannot be loaded");  // an executable, not a shared library
  expectRefused(ULPCHECK_TEST_PLUGIN_NO_ENTRY, "exports no ulpcheck_plugin_v1");
  expectRefused(ULPCHECK_TEST_PLUGIN_BAD_ABI, "ABI version 99");
  expectRefused(ULPCHECK_TEST_PLUGIN_BAD_OP, "op 'softmax' is not one of");
  expectRefused(ULPCHECK_TEST_PLUGIN_TAKEN_NAME, "the name is taken");
}

}  // namespace
}  // namespace ulpcheck
