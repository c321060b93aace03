// Kernels from outside ulpcheck, through the plugin ABI
// (include/ulpcheck/plugin.h): the example library's variants are judged
// like built-in ones, a defect in one is caught and reproduced through its
// plugin, and a plugin that cannot be used is refused with a clear error.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>
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

/// The specs of the case records of a run's JSON lines, per kernel: "plain",
/// or its weights' dtype and bias as the case JSON has them ("wdtype=fp32
/// bias=yes"; a spec field at its default is left out).
std::map<std::string, std::set<std::string>> specsJudged(const std::string& json) {
  std::map<std::string, std::set<std::string>> specs;
  std::ifstream in(json);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] != "case") continue;
    std::string spec;
    for (const char* key : {"wdtype", "bias"})
      if (j["case"].contains(key))
        spec += fmt::format("{}{}={}", spec.empty() ? "" : " ", key, j["case"][key].get<std::string>());
    specs[j["case"]["kernel"]].insert(spec.empty() ? "plain" : spec);
  }
  return specs;
}

TEST(Plugin, AVersion1PluginLoadsAndPassesUnchanged) {
  // Built against version 1's header (tests/plugins/v1), before `spec` and the bias tensors existed.
  const std::string v1 = std::string(" --plugin ") + ULPCHECK_TEST_PLUGIN_GOOD_V1;
  const Result list = cli("list" + v1);
  EXPECT_EQ(list.code, exit_code::kOk) << list.output;
  EXPECT_NE(list.output.find("test_rmsnorm_contiguous"), std::string::npos) << list.output;
  EXPECT_EQ(list.output.find("test_rmsnorm_ignores_the_bias"), std::string::npos)
      << "a version 2 variant" << list.output;
  const std::string json = ::testing::TempDir() + "plugin-v1.jsonl";
  const Result r = cli("run --kernel test_rmsnorm_contiguous --kernel test_rmsnorm_fails_past_64_rows --cases 60 "
                       "--tier smoke --seed 3 --no-save --no-corpus --json " +
                       json + v1);
  // The second variant fails past 64 rows, as it does built against version 2.
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("scratch too small for more than 64 rows"), std::string::npos) << r.output;
  const auto specs = specsJudged(json);
  ASSERT_TRUE(specs.count("test_rmsnorm_contiguous")) << r.output;
  EXPECT_EQ(specs.at("test_rmsnorm_contiguous"), std::set<std::string>{"plain"}) << "it declared no spec";
  const Result contiguous = cli("run --kernel test_rmsnorm_contiguous --cases 60 --tier smoke --seed 3 --no-save "
                                "--no-corpus" +
                                v1);
  EXPECT_EQ(contiguous.code, exit_code::kOk) << contiguous.output;
}

TEST(Plugin, AnRmsNormQuantVariantIsJudgedThroughTheCAbi) {
  // Version 6: E4M3 output and a static scale through the ABI. The correct
  // variant passes every property; the one truncating its conversion fails
  // accuracy, the rounding bias naming it.
  const std::string good = std::string(" --plugin ") + ULPCHECK_TEST_PLUGIN_GOOD;
  const Result r =
      cli("run --op rmsnorm_quant --kernel test_rmsnorm_quant --per-cell 10 --seed 3 --no-save --no-corpus" + good);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("accuracy           "), std::string::npos) << r.output;
  const Result bad = cli("repro 'op=rmsnorm_quant kernel=test_rmsnorm_quant_truncating dtype=fp32 M=16 N=256 seed=0x4' "
                         "--property accuracy" +
                         good);
  EXPECT_EQ(bad.code, exit_code::kPropertyFailed) << bad.output;
  EXPECT_NE(bad.output.find("outside the values the spec admits"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("rounding biased"), std::string::npos) << bad.output;
}

TEST(Plugin, AFusedAddRmsNormQuantVariantIsJudgedThroughTheCAbi) {
  // Version 7: residual_out beside the E4M3 output through the ABI; the
  // truncating conversion fails accuracy as in rmsnorm_quant's.
  const std::string good = std::string(" --plugin ") + ULPCHECK_TEST_PLUGIN_GOOD;
  const Result r = cli("run --op fused_add_rmsnorm_quant --kernel test_fused_add_rmsnorm_quant --per-cell 10 --seed 3 "
                       "--no-save --no-corpus" +
                       good);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("accuracy           "), std::string::npos) << r.output;
  const Result bad = cli("repro 'op=fused_add_rmsnorm_quant kernel=test_fused_add_rmsnorm_quant_truncating dtype=fp32 "
                         "M=16 N=256 seed=0x4' --property accuracy" +
                         good);
  EXPECT_EQ(bad.code, exit_code::kPropertyFailed) << bad.output;
  EXPECT_NE(bad.output.find("outside the values the spec admits"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("residual_out"), std::string::npos) << "judged beside y\n" << bad.output;
}

TEST(Plugin, AVersion6PluginLoadsAndPassesUnchanged) {
  // Built against version 6's header (tests/plugins/v6), before
  // fused_add_rmsnorm_quant: read with version 6's variant size.
  const std::string v6 = std::string(" --plugin ") + ULPCHECK_TEST_PLUGIN_GOOD_V6;
  const Result list = cli("list" + v6);
  EXPECT_EQ(list.code, exit_code::kOk) << list.output;
  EXPECT_EQ(list.output.find("test_fused_add_rmsnorm_quant"), std::string::npos) << "a version 7 variant\n"
                                                                                 << list.output;
  const Result quant = cli("run --op rmsnorm_quant --kernel test_rmsnorm_quant --per-cell 10 --seed 3 --no-save "
                           "--no-corpus" +
                           v6);
  EXPECT_EQ(quant.code, exit_code::kOk) << quant.output;
}

TEST(Plugin, AVersion5PluginLoadsAndPassesUnchanged) {
  // Built against version 5's header (tests/plugins/v5), before
  // rmsnorm_quant: read with version 5's variant size.
  const std::string v5 = std::string(" --plugin ") + ULPCHECK_TEST_PLUGIN_GOOD_V5;
  const Result list = cli("list" + v5);
  EXPECT_EQ(list.code, exit_code::kOk) << list.output;
  EXPECT_EQ(list.output.find("test_rmsnorm_quant"), std::string::npos) << "a version 6 variant\n" << list.output;
  const Result all = cli("run --op fused_add_rmsnorm --kernel test_fused_add_rmsnorm --per-cell 10 --seed 3 "
                         "--no-save --no-corpus" +
                         v5);
  EXPECT_EQ(all.code, exit_code::kOk) << all.output;
}

TEST(Plugin, AVersion4PluginLoadsAndPassesUnchanged) {
  // Built against version 4's header (tests/plugins/v4), before the
  // multi-rank door: read with version 4's variant size.
  const std::string v4 = std::string(" --plugin ") + ULPCHECK_TEST_PLUGIN_GOOD_V4;
  const Result all = cli("run --op fused_add_rmsnorm --kernel test_fused_add_rmsnorm --per-cell 10 --seed 3 "
                         "--no-save --no-corpus" +
                         v4);
  EXPECT_EQ(all.code, exit_code::kOk) << all.output;
}

TEST(Plugin, AVersion3PluginLoadsAndPassesUnchanged) {
  // Built against version 3's header (tests/plugins/v3), before unfused
  // pipelines: read with version 3's variant size, its fused add has its
  // backward, and every variant passes.
  const std::string v3 = std::string(" --plugin ") + ULPCHECK_TEST_PLUGIN_GOOD_V3;
  const Result r = cli("repro 'op=fused_add_rmsnorm kernel=test_fused_add_rmsnorm dtype=bf16 M=9 N=40'" + v3);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("dresidual"), std::string::npos) << r.output;
  const Result all = cli("run --op fused_add_rmsnorm --kernel test_fused_add_rmsnorm --per-cell 10 --seed 3 "
                         "--no-save --no-corpus" +
                         v3);
  EXPECT_EQ(all.code, exit_code::kOk) << all.output;
}

TEST(Plugin, AVersion2PluginLoadsAndPassesUnchanged) {
  // Built against version 2's header (tests/plugins/v2), before fused add's
  // backward: its fused add variant is judged on its forward only, and
  // passes; built against this header its backward is judged too.
  const std::string v2 = std::string(" --plugin ") + ULPCHECK_TEST_PLUGIN_GOOD_V2;
  const Result list = cli("list" + v2);
  EXPECT_EQ(list.code, exit_code::kOk) << list.output;
  for (const char* name : {"test_rmsnorm_contiguous", "test_rmsnorm_ignores_the_bias", "test_fused_add_rmsnorm"})
    EXPECT_NE(list.output.find(name), std::string::npos) << name << "\n" << list.output;
  const Result bias = cli("run --kernel test_rmsnorm_ignores_the_bias --property accuracy --per-cell 30 --seed 11 "
                          "--no-save --no-corpus" +
                          v2);
  EXPECT_EQ(bias.code, exit_code::kPropertyFailed) << "its declared bias reaches its cases\n" << bias.output;
  const std::string fused = "repro 'op=fused_add_rmsnorm kernel=test_fused_add_rmsnorm dtype=bf16 M=9 N=40'";
  const Result forward_only = cli(fused + v2);
  EXPECT_EQ(forward_only.code, exit_code::kOk) << forward_only.output;
  EXPECT_NE(forward_only.output.find("residual_out"), std::string::npos) << forward_only.output;
  EXPECT_EQ(forward_only.output.find("dresidual"), std::string::npos) << "forward only\n" << forward_only.output;
  const Result with_backward = cli(fused + " --plugin " + ULPCHECK_TEST_PLUGIN_GOOD);
  EXPECT_EQ(with_backward.code, exit_code::kOk) << with_backward.output;
  EXPECT_NE(with_backward.output.find("dresidual"), std::string::npos) << with_backward.output;
}

TEST(Plugin, DeclaredSpecsAreGeneratedAndJudged) {
  // mylib's host RMSNorm declares fp32 weights and a bias ("fp32_weights=true bias_variants=true").
  const std::string json = ::testing::TempDir() + "plugin-spec.jsonl";
  const Result r =
      cli("run --kernel mylib_rmsnorm_host --per-cell 30 --seed 11 --no-save --no-corpus --json " + json + kExample);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  const auto specs = specsJudged(json)["mylib_rmsnorm_host"];
  for (const char* label : {"plain", "wdtype=fp32", "bias=yes", "wdtype=fp32 bias=yes"})
    EXPECT_TRUE(specs.count(label)) << label << " among " << ::testing::PrintToString(specs);
  // A variant that declares a spec and gets it wrong fails on that spec's cases.
  for (const char* kernel : {"test_rmsnorm_ignores_the_bias", "test_rmsnorm_fp32_weights_read_as_activations"}) {
    const Result bad = cli(std::string("run --kernel ") + kernel + " --property accuracy --per-cell 30 --seed 11 " +
                           "--no-save --no-corpus --plugin " + ULPCHECK_TEST_PLUGIN_GOOD);
    EXPECT_EQ(bad.code, exit_code::kPropertyFailed) << kernel << "\n" << bad.output;
    const std::string repro = testing::reproArgsIn(bad.output);
    EXPECT_NE(repro.find(std::string(kernel) == "test_rmsnorm_ignores_the_bias" ? "bias=yes" : "wdtype=fp32"),
              std::string::npos)
        << kernel << ": the shrunk case keeps the spec it gets wrong: " << repro;
  }
}

TEST(Plugin, AFusedAddRmsNormThroughTheCAbiIsJudgedOnItsDeclaredSpecs) {
  // mylib's fused add declares "fp32_weights=true fp32_residual=true".
  const std::string json = ::testing::TempDir() + "plugin-fused-add.jsonl";
  const Result r = cli("run --op fused_add_rmsnorm --kernel mylib_fused_add_rmsnorm_host --per-cell 30 --seed 11 "
                       "--no-save --no-corpus --json " +
                       json + kExample);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  std::set<std::string> specs;
  std::ifstream in(json);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "case")
      specs.insert(fmt::format("{} {}", j["case"].value("wdtype", "T"), j["case"].value("res", "T")));
  }
  for (const char* spec : {"T T", "fp32 T", "T fp32", "fp32 fp32"})
    EXPECT_TRUE(specs.count(spec)) << spec << " among " << ::testing::PrintToString(specs);
}

TEST(Plugin, FusedAddDefectsThroughTheCAbiAreCaught) {
  // mylib's defect variants: the norm of the unrounded sum where the rounded
  // one is declared (aiter PR #2586's class: y off where T's rounding of x +
  // residual falls), and a residual read from memory nobody wrote (vLLM PR
  // #41972's class: residual_out is not x + residual).
  for (const auto& [kernel, tensor] :
       {std::pair{"mylib_fused_add_rmsnorm_host_unrounded_sum", "worst y["},
        std::pair{"mylib_fused_add_rmsnorm_host_uninitialised_residual", "residual_out"}}) {
    const Result r = cli(fmt::format("run --op fused_add_rmsnorm --kernel {} --property accuracy --dtype bf16 "
                                     "--per-cell 30 --seed 11 --no-save --no-corpus{}",
                                     kernel, kExample));
    EXPECT_EQ(r.code, exit_code::kPropertyFailed) << kernel << "\n" << r.output;
    EXPECT_NE(r.output.find(tensor), std::string::npos) << kernel << "\n" << r.output;
  }
  // Declaring its unfused pipeline (ABI version 4: mylib_add_then_rmsnorm_host,
  // the add and the norm as two steps), aiter PR #2586's class is caught bit
  // for bit by fused_vs_unfused as well; the correct fused add equals it.
  const Result fused = cli(fmt::format("run --op fused_add_rmsnorm --kernel mylib_fused_add_rmsnorm_host_unrounded_sum "
                                       "--property fused_vs_unfused --per-cell 30 --seed 11 --no-save --no-corpus{}",
                                       kExample));
  EXPECT_EQ(fused.code, exit_code::kPropertyFailed) << fused.output;
  EXPECT_NE(fused.output.find("differ from the unfused pipeline mylib_add_then_rmsnorm_host; first y["),
            std::string::npos)
      << fused.output;
  const Result right = cli(fmt::format("run --op fused_add_rmsnorm --kernel mylib_fused_add_rmsnorm_host --property "
                                       "fused_vs_unfused --per-cell 30 --seed 11 --no-save --no-corpus{}",
                                       kExample));
  EXPECT_EQ(right.code, exit_code::kOk) << right.output;
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
  expectRefused(ULPCHECK_TEST_PLUGIN_ALLREDUCE_BAD_RANKS, "rank_counts 0x204 names a world size outside 1 to 8");
  expectRefused(ULPCHECK_TEST_PLUGIN_ALLREDUCE_NO_ENTRY, "allreduce_rmsnorm needs its entry point (ABI version 5)");
  expectRefused(ULPCHECK_TEST_PLUGIN_UNFUSED_WITHOUT_OUTPUTS,
                "it names an unfused pipeline but no output it equals bit for bit");
  expectRefused(ULPCHECK_TEST_PLUGIN_TAKEN_NAME, "the name is taken");
  // Spec declarations (ABI version 2): each refused naming the option and what it may be.
  expectRefused(ULPCHECK_TEST_PLUGIN_SPEC_UNKNOWN_OPTION, "'affine_variants' is not a spec option of rmsnorm");
  expectRefused(ULPCHECK_TEST_PLUGIN_SPEC_BAD_NAME, "rounding 'gemma' is not one of plain, llama");
  expectRefused(ULPCHECK_TEST_PLUGIN_SPEC_BAD_VALUE, "bias_variants: give true or false, not \"maybe\"");
}

}  // namespace
}  // namespace ulpcheck
