// The ulpcheck executable: exit codes for each kind of outcome and of bad
// input, and a repro command that replays a failure.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "harness/runner/exit_codes.h"
#include "tests/support/cli_support.h"

namespace ulpcheck {
namespace {

namespace fs = std::filesystem;
using testing::cli;
using testing::Result;

TEST(Cli, ListShowsKernelsAndProperties) {
  const Result r = cli("list");
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  for (const char* s : {"host_separate", "accuracy", "determinism", "batch_invariance", "memory_safety"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s;
}

TEST(Cli, BadArgumentsAreUsageErrors) {
  EXPECT_EQ(cli("").code, exit_code::kUsage);
  EXPECT_EQ(cli("frobnicate").code, exit_code::kUsage);
  EXPECT_EQ(cli("run --cases many").code, exit_code::kUsage);
  EXPECT_EQ(cli("run --backend host --dtype fp64").code, exit_code::kUsage);
  EXPECT_EQ(cli("run --backend host --seed -3").code, exit_code::kUsage);
  EXPECT_EQ(cli("run --backend host --kernel no_such_kernel").code, exit_code::kUsage);
  EXPECT_EQ(cli("run --backend host --property no_such_property").code, exit_code::kUsage);
  const Result r = cli("run --backend host --tier huge");
  EXPECT_EQ(r.code, exit_code::kUsage);
  EXPECT_NE(r.output.find("--tier"), std::string::npos) << r.output;
}

TEST(Cli, MalformedCasesAreRefusedClearly) {
  Result r = cli("repro 'op=rmsnorm kernel=host_separate dtype=fp32 M=0 N=4'");
  EXPECT_EQ(r.code, exit_code::kBadCase);
  EXPECT_NE(r.output.find("'M' must be >= 1"), std::string::npos) << r.output;
  r = cli("repro 'op=rmsnorm kernel=nope dtype=fp32 M=1 N=4'");
  EXPECT_EQ(r.code, exit_code::kBadCase);
  EXPECT_NE(r.output.find("no kernel variant 'nope'"), std::string::npos) << r.output;
}

TEST(Cli, ReproPassesForTheHostPortAndFailsForAMutant) {
  Result r = cli("repro 'op=rmsnorm kernel=host_separate dtype=bf16 M=3 N=17 dist=large_mean mean=0x1p10 sigma=0x1p2'");
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  r = cli("repro 'op=rmsnorm kernel=host_bug_bf16_rowsum dtype=fp32 M=1 N=1' --property accuracy");
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("dx"), std::string::npos) << "the worst elements are printed\n" << r.output;
}

TEST(Cli, ReproSaysWhichOraclePathComputedItsReference) {
  // As a run's closing line does: a large case that falls back (or is judged
  // on the GPU) says so, where its time went being the next line.
  const Result r = cli("repro 'op=layernorm kernel=host_twopass dtype=fp32 M=8 N=64' --property accuracy");
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("# oracle fast, judge auto: 1168 reference elements by the certified fast path"),
            std::string::npos)
      << r.output;  // 8 x (2 x 64 + 2) + 2 x 64: y, mean, rstd, dx, dgamma, dbeta
}

TEST(Cli, ReproRepeatCountsTheRunsThatFail) {
  // The host mirror of the cuda_atomic race loses a row on every third call.
  const std::string race = "repro 'op=rmsnorm kernel=host_bug_atomic_partials_race dtype=fp32 M=7 N=8644 ctas=3' "
                           "--property accuracy";
  Result r = cli(race + " --repeat 6");
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("failed 2 of 6 runs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("dw"), std::string::npos) << "the first failure is shown in full\n" << r.output;
  r = cli("repro 'op=rmsnorm kernel=host_atomic dtype=fp32 M=7 N=8644 ctas=3' --property accuracy --repeat 3");
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("failed 0 of 3 runs"), std::string::npos) << r.output;
  EXPECT_EQ(cli(race + " --repeat 0").code, exit_code::kUsage);
  EXPECT_EQ(cli(race + " --repeat x").code, exit_code::kUsage);
}

TEST(Cli, RunReportsCodePathsAndTheOnesNeverReached) {
  const Result r = cli("run --backend host --kernel host_separate --property memory_safety --cases 3 --tier smoke "
                       "--seed 1 --no-save --no-corpus");
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("# paths of host_separate (cases):"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("NEVER REACHED by this run"), std::string::npos) << "3 cases cannot reach every path\n"
                                                                           << r.output;
}

TEST(Cli, APropertyThatJudgedNothingIsItsOwnExitCode) {
  // Named, but applies to no selected kernel: rmsnorm has no fused variant.
  Result r = cli("run --backend host --op rmsnorm --property fused_vs_unfused --cases 2 --tier smoke --no-save");
  EXPECT_EQ(r.code, exit_code::kNothingJudged) << r.output;
  EXPECT_NE(r.output.find("NOTHING JUDGED"), std::string::npos) << r.output;
  // Over every op it applies to allreduce_rmsnorm's fused variants: judged.
  r = cli("run --backend host --property fused_vs_unfused --cases 20 --tier smoke --seed 3 --no-save --no-corpus");
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  // Applies, but every case was inconclusive (statistics saved in bf16: a
  // correct kernel may save either bf16 neighbour of a row's rstd near a
  // rounding boundary, and dgamma sums that 2^-8 of x-hat over 4096 rows,
  // past 1/64 of its value), and another op's pass must not hide it.
  const fs::path dir = fs::temp_directory_path() / ("ulpcheck-unjudged-" + std::to_string(::getpid()));
  fs::create_directories(dir / "layernorm" / "accuracy" / "regression");
  std::ofstream(dir / "layernorm" / "accuracy" / "regression" / "c.case")
      << "op=layernorm kernel=host_twopass dtype=bf16 M=4096 N=4 eps=0x1.0c6f7ap-20 dist=normal sigma=0x1.dp-5 "
         "stats=bf16\n";
  r = cli("run --backend host --op layernorm --property accuracy --cases 0 --corpus " + dir.string());
  EXPECT_EQ(r.code, exit_code::kNothingJudged) << r.output;
  EXPECT_NE(r.output.find("inconclusive"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

TEST(Cli, RunFindsShrinksAndSavesAFailure) {
  const fs::path dir = fs::temp_directory_path() / ("ulpcheck-cli-" + std::to_string(::getpid()));
  const fs::path json = dir / "out.jsonl";
  fs::create_directories(dir);
  const Result r =
      cli("run --backend host --kernel host_bug_drop_tail --property memory_safety --cases 200 --tier smoke "
          "--seed 9 --corpus " +
          dir.string() + " --json " + json.string());
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_EQ(testing::reproArgsIn(r.output).rfind("repro '", 0), 0u) << r.output;
  EXPECT_TRUE(fs::is_directory(dir / "rmsnorm" / "memory_safety" / "crashing"));
  std::ifstream in(json);
  std::string line, last;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    last = line;
  }
  EXPECT_GT(lines, 1);
  EXPECT_NE(last.find("\"summary\""), std::string::npos);
  // The saved case replays as a failure through `repro <file>`.
  for (const auto& f : fs::directory_iterator(dir / "rmsnorm" / "memory_safety" / "crashing"))
    EXPECT_EQ(cli("repro " + f.path().string()).code, exit_code::kPropertyFailed);
  fs::remove_all(dir);
}

TEST(Cli, CorruptCorpusIsABadCaseError) {
  const fs::path dir = fs::temp_directory_path() / ("ulpcheck-badcorpus-" + std::to_string(::getpid()));
  fs::create_directories(dir / "rmsnorm" / "accuracy" / "regression");
  std::ofstream(dir / "rmsnorm" / "accuracy" / "regression" / "x.case") << "op=rmsnorm kernel=k M=1\n";
  const Result r = cli("run --backend host --cases 1 --corpus " + dir.string());
  EXPECT_EQ(r.code, exit_code::kBadCase) << r.output;
  EXPECT_NE(r.output.find("x.case"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

TEST(Cli, DefaultRunOnTheHostPasses) {
  const Result r = cli("run --backend host --cases 20 --tier smoke --seed 1 --no-save");
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("backend: host"), std::string::npos) << "says which backend it used\n" << r.output;
}

TEST(Cli, PerturbScheduleIsAcceptedByRunAndRepro) {
  Result r = cli("run --backend host --perturb-schedule --cases 10 --tier smoke --seed 1 --no-save");
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("no effect on the host backend"), std::string::npos) << "says it changes nothing\n"
                                                                               << r.output;
  // A failure found under perturbation is reproduced under it: the printed
  // repro command carries the flag, and repro accepts it.
  r = cli("run --backend host --kernel host_bug_drop_tail --property memory_safety --cases 50 --tier smoke --seed 9 "
          "--no-save --no-shrink --no-corpus --perturb-schedule");
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  const std::string repro = testing::reproArgsIn(r.output);
  ASSERT_EQ(repro.rfind("repro '", 0), 0u) << r.output;
  EXPECT_NE(repro.find("--perturb-schedule"), std::string::npos) << repro;
  EXPECT_EQ(cli(repro).code, exit_code::kPropertyFailed) << repro;
  EXPECT_EQ(cli("repro 'op=rmsnorm kernel=host_separate dtype=fp32 M=2 N=8' --perturb-schedule").code, exit_code::kOk);
}

TEST(Cli, MalformedPerturbScheduleIsAUsageError) {
  EXPECT_EQ(cli("run --backend host --perturb-schedule=sometimes").code, exit_code::kUsage);
  EXPECT_EQ(cli("list --perturb-schedule").code, exit_code::kUsage);
}

/// The mutant rows of a kill matrix's JSON file: name -> in_worker.
std::map<std::string, bool> mutantsInWorker(const std::string& json) {
  std::map<std::string, bool> rows;
  std::ifstream in(json);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "mutant") rows[j["mutant"]] = j["in_worker"];
  }
  return rows;
}

TEST(CliMutants, KillMatrixOfOneMutantNamesTheKillAndItsRepro) {
  const std::string json = ::testing::TempDir() + "km_worker.jsonl";
  const Result r =
      cli("mutants --backend host --mutant host_bug_bf16_rowsum --time-per-mutant 3 --tier smoke --json " + json);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  // In worker processes, as plugins run, a fresh one for each row: a mutant
  // that faults or hangs is a failing case of it and the matrix goes on
  // (PluginFaults shows the worker's side; PythonDoor.EachKillMatrixRow... the fresh worker).
  EXPECT_NE(r.output.find("variants in worker processes, a fresh one for each"), std::string::npos) << r.output;
  EXPECT_EQ(mutantsInWorker(json), (std::map<std::string, bool>{{"host_bug_bf16_rowsum", true}}));
  EXPECT_NE(r.output.find("host_bug_bf16_rowsum"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("killed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ulpcheck repro 'op=rmsnorm kernel=host_bug_bf16_rowsum"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("median time to first detection"), std::string::npos) << r.output;
}

TEST(CliMutants, InProcessRunsTheMatrixInThisProcess) {
  const std::string json = ::testing::TempDir() + "km_in_process.jsonl";
  const Result r = cli("mutants --backend host --mutant host_bug_rstd_bf16 --time-per-mutant 2 --tier smoke "
                       "--no-controls --in-process --json " +
                       json);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("every variant in this process"), std::string::npos) << r.output;
  EXPECT_EQ(mutantsInWorker(json), (std::map<std::string, bool>{{"host_bug_rstd_bf16", false}}));
}

TEST(CliMutants, BadArgumentsAreUsageErrors) {
  EXPECT_EQ(cli("mutants --backend host --mutant no_such_mutant").code, exit_code::kUsage);
  EXPECT_EQ(cli("mutants --backend host --time-per-mutant -1").code, exit_code::kUsage);
  EXPECT_EQ(cli("mutants --backend host --tier huge").code, exit_code::kUsage);
}

}  // namespace
}  // namespace ulpcheck
