// Robustness: what a new user meets when something is wrong. Each probe runs
// the ulpcheck executable as that user would, with one mistake in its input
// (a case string, a command line, a plugin, a corpus file, a report's JSON)
// or one fault or interruption during a run, and holds the outcome to three
// things: the exit code of its cause, a message whose key words say what is
// wrong and where (a regression to a vague message fails), and, where a run is
// faulted or cut short, nothing written before the fault lost.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "harness/runner/coordinator.h"
#include "harness/runner/exit_codes.h"
#include "include/ulpcheck/plugin.h"
#include "oracles/oracle_mode.h"
#include "tests/support/cli_support.h"

namespace ulpcheck {
namespace {

namespace fs = std::filesystem;
using testing::cli;
using testing::Result;

const std::string kGood = ULPCHECK_TEST_PLUGIN_GOOD;

/// A folder of the test's own (TempDir, the test's name and the pid), gone afterwards.
class Scratch {
 public:
  Scratch() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::path(::testing::TempDir()) /
            ("ulpcheck-robustness-" + std::string(info->name()) + "-" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Scratch() {
    std::error_code ec;
    // Folders a probe made read-only must be writable again to be removed.
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_directory()) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

/// Runs a shell command line (for a working directory, an environment
/// variable or runs side by side); returns its exit code and output.
Result shell(const std::string& command) {
  FILE* p = popen(("( " + command + " ) 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

/// The exit code is `code` and the output holds every one of `words`.
void expectSays(const Result& r, int code, std::initializer_list<std::string> words) {
  EXPECT_EQ(r.code, code) << r.output;
  for (const std::string& w : words)
    EXPECT_NE(r.output.find(w), std::string::npos) << "says '" << w << "'\n" << r.output;
}

void writeFile(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Lines of a file that end in a newline (a line still being written is not counted).
int completeLines(const fs::path& path) {
  std::ifstream in(path);
  int n = 0;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0)
    for (std::streamsize i = 0; i < in.gcount(); ++i) n += buf[i] == '\n';
  return n;
}

/// Every line of a JSON-lines file, each required to be a whole JSON object
/// with a "type" (a failure names the line).
/// `cut_last`: the last line may be cut (a SIGKILL can land inside the write
/// of a record that crosses a page; nothing else may).
std::vector<nlohmann::json> expectWholeRecords(const fs::path& path, bool cut_last = false) {
  std::vector<nlohmann::json> records;
  const std::string text = readFile(path);
  const bool unterminated = !text.empty() && text.back() != '\n';
  std::istringstream in(text);
  int number = 0, lines = int(std::count(text.begin(), text.end(), '\n')) + unterminated;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (cut_last && unterminated && number == lines) break;
    const auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("type")) {
      ADD_FAILURE() << path << ":" << number << " is not a whole record: " << line.substr(0, 200);
      continue;
    }
    records.push_back(j);
  }
  return records;
}

int countType(const std::vector<nlohmann::json>& records, const std::string& type) {
  int n = 0;
  for (const auto& r : records) n += r["type"] == type;
  return n;
}

/// A run interrupted by a signal: how it ended and how many whole lines its
/// JSON file held when the signal was sent.
struct Interrupted {
  int status = 0;
  int lines_before = 0;
};

/// Starts `ulpcheck args` in the background, no shell between, its output in
/// `log`; returns its pid (< 0: fork failed).
pid_t startInBackground(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<char*> argv{const_cast<char*>(ULPCHECK_CLI)};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    // As from a terminal: the signals the test sends have their default action.
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(ULPCHECK_CLI, argv.data());
    _exit(127);
  }
  return pid;
}

/// Starts `ulpcheck args` in the background (its output in `log`), waits
/// until `json` holds `lines` whole lines, then sends `sig` and waits for it
/// to end (SIGKILL after 30 s more, a failure).
Interrupted interruptOnceWritten(const std::vector<std::string>& args, const fs::path& json, int lines, int sig,
                                 const fs::path& log) {
  Interrupted r;
  const pid_t pid = startInBackground(args, log);
  if (pid < 0) {  // never kill(-1, ...)
    ADD_FAILURE() << "fork failed";
    return r;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((r.lines_before = completeLines(json)) < lines) {
    if (waitpid(pid, &r.status, WNOHANG) == pid) {
      ADD_FAILURE() << "the run ended before writing " << lines << " lines:\n" << readFile(log);
      return r;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "no " << lines << " lines in 60 s:\n" << readFile(log);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, sig);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (waitpid(pid, &r.status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > give_up) {
      ADD_FAILURE() << "still running 30 s after signal " << sig;
      kill(pid, SIGKILL);
      waitpid(pid, &r.status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return r;
}

/// A long host campaign streaming JSON lines, for the interruption probes.
std::vector<std::string> longRun(const fs::path& json) {
  return {"run",   "--backend", "host", "--op",      "rmsnorm",     "--cases", "20000",  "--tier",
          "smoke", "--seed",    "5",    "--no-save", "--no-corpus", "--quiet", "--json", json.string()};
}

/// What a run cut short by `sig` leaves behind: every line a whole record,
/// none lost of those there when it was interrupted, its cases among them,
/// and a report of them that says it is cut short.
void expectCutShortRunKeepsItsRecords(int sig) {
  const Scratch dir;
  const fs::path json = dir / "run.jsonl";
  const Interrupted r = interruptOnceWritten(longRun(json), json, 40, sig, dir / "run.log");
  EXPECT_TRUE(WIFSIGNALED(r.status) || (WIFEXITED(r.status) && WEXITSTATUS(r.status) != 0))
      << "a run of 20,000 cases stopped by signal " << sig << " ends unfinished";
  const auto records = expectWholeRecords(json, /*cut_last=*/sig == SIGKILL);
  EXPECT_GE(int(records.size()), r.lines_before) << "records written before the signal are kept";
  EXPECT_GE(countType(records, "case"), 40) << "the case records are there";
  EXPECT_EQ(countType(records, "summary"), 0) << "20,000 cases cannot have finished";
  const Result page = cli("report " + json.string() + " -o " + (dir / "page.html"));
  EXPECT_EQ(page.code, exit_code::kOk) << page.output;
  const std::string html = readFile(dir.path() / "page.html");
  EXPECT_NE(html.find("CUT SHORT"), std::string::npos) << "the page says the run was cut short";
  EXPECT_NE(html.find("host_separate"), std::string::npos) << "the page is rebuilt from the cases";
}

/// A real run's JSON lines (two cases of one kernel), for the report probes.
std::vector<std::string> realRecordLines(const Scratch& dir) {
  const fs::path json = dir / "real.jsonl";
  const Result r =
      cli("run --backend host --kernel host_separate --cases 2 --tier smoke --seed 1 --no-save --no-corpus "
          "--quiet --json " +
          json.string());
  EXPECT_NE(r.code, exit_code::kUsage) << r.output;
  std::vector<std::string> lines;
  std::ifstream in(json);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  EXPECT_GE(lines.size(), 4u) << r.output;
  return lines;
}

fs::path writeLines(const fs::path& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const auto& l : lines) out << l << '\n';
  return path;
}

// ---------------------------------------------------------------------------
// Case strings a user types or pastes wrongly: refused before anything runs
// (exit 3), naming the field and what it must be.

Result repro(const std::string& case_text) { return cli("repro '" + case_text + "'"); }

const std::string kCase = "op=rmsnorm kernel=host_separate dtype=fp32 M=2 N=8";

TEST(Robustness, AnUnknownCaseKeyIsNamed) {
  // A misspelled key ("sigam=") must not be dropped silently: the case would run another spec.
  expectSays(repro(kCase + " sigam=2"), exit_code::kBadCase, {"malformed case", "unknown key 'sigam'"});
}

TEST(Robustness, ACaseFieldWithoutAnEqualsSignIsNamed) {
  // A value lost when the case was pasted.
  expectSays(repro("op=rmsnorm kernel=host_separate dtype=fp32 M=2 N"), exit_code::kBadCase,
             {"'N' is not of the form key=value"});
}

TEST(Robustness, AMissingRequiredKeyIsNamed) {
  // The op is not guessed from the kernel.
  expectSays(repro("kernel=host_separate dtype=fp32 M=2 N=8"), exit_code::kBadCase, {"missing required key 'op'"});
}

TEST(Robustness, AKeyGivenTwiceIsRefused) {
  // Two shapes pasted into one case: neither is taken silently.
  expectSays(repro(kCase + " M=3"), exit_code::kBadCase, {"key 'M' given twice"});
}

TEST(Robustness, ANonNumericRowCountNamesTheField) {
  expectSays(repro("op=rmsnorm kernel=host_separate dtype=fp32 M=two N=8"), exit_code::kBadCase,
             {"'M'", "'two' is not an integer"});
  expectSays(repro("op=rmsnorm kernel=host_separate dtype=fp32 M=2.5 N=8"), exit_code::kBadCase,
             {"'M'", "'2.5' is not an integer"});
}

TEST(Robustness, AZeroRowCountIsRefused) {
  expectSays(repro("op=rmsnorm kernel=host_separate dtype=fp32 M=0 N=8"), exit_code::kBadCase,
             {"'M' must be >= 1, got 0"});
}

TEST(Robustness, AShapeBeyondTheGeneratorsIndexIsRefusedBeforeAnyAllocation) {
  // 2^31 + 1 columns: refused at once, not after gigabytes are allocated.
  expectSays(repro("op=rmsnorm kernel=host_separate dtype=fp32 M=1 N=2147483649"), exit_code::kBadCase,
             {"1x2147483649", "beyond the 2^31"});
}

TEST(Robustness, ARowStrideShorterThanTheRowIsRefused) {
  // ld < N would make rows overlap.
  expectSays(repro(kCase + " ld=4"), exit_code::kBadCase, {"'ld' (4) must be >= N (8)"});
}

TEST(Robustness, AnEpsOutOfRangeSaysTheRange) {
  expectSays(repro(kCase + " eps=-1"), exit_code::kBadCase, {"'eps' must be in [2^-60, 1]", "-0x1p+0"});
  // 10 where 1e-5 was meant.
  expectSays(repro(kCase + " eps=10"), exit_code::kBadCase, {"'eps' must be in [2^-60, 1]", "0x1.4p+3"});
}

TEST(Robustness, AnUnknownDtypeListsTheKnownOnes) {
  expectSays(repro("op=rmsnorm kernel=host_separate dtype=fp8 M=2 N=8"), exit_code::kBadCase,
             {"'dtype'", "'fp8' is not one of fp32, fp16, bf16"});
}

TEST(Robustness, AnUnknownDistributionIsNamed) {
  expectSays(repro(kCase + " dist=gaussian"), exit_code::kBadCase, {"'dist'", "unknown distribution 'gaussian'"});
}

TEST(Robustness, ANonPositiveSigmaIsRefused) {
  expectSays(repro(kCase + " sigma=0"), exit_code::kBadCase, {"'sigma' must be positive and finite"});
  expectSays(repro(kCase + " sigma=-1"), exit_code::kBadCase, {"'sigma' must be positive and finite"});
  expectSays(repro(kCase + " sigma=oops"), exit_code::kBadCase, {"'sigma'", "'oops' is not a number"});
}

TEST(Robustness, AnUnknownOpIsNamed) {
  // An op ulpcheck does not have: refused, naming it and the ops there are
  // (not "softmax has no kernel variant host_separate", as if it were one).
  expectSays(repro("op=softmax kernel=host_separate dtype=fp32 M=2 N=8"), exit_code::kBadCase,
             {"unknown op 'softmax'", "rmsnorm"});
  expectSays(cli("run --backend host --op softmax"), exit_code::kUsage, {"--op softmax: no such op", "layernorm"});
}

TEST(Robustness, AMisspelledKernelIsNamed) {
  expectSays(repro("op=rmsnorm kernel=host_seperate dtype=fp32 M=2 N=8"), exit_code::kBadCase,
             {"op 'rmsnorm' has no kernel variant 'host_seperate'", "ulpcheck list"});
}

TEST(Robustness, ValuesThatOverflowFp16AreRefused) {
  // A large mean meant for fp32 pasted into an fp16 case: the inputs would be inf.
  expectSays(repro("op=rmsnorm kernel=host_separate dtype=fp16 M=2 N=8 dist=large_mean mean=1e6"), exit_code::kBadCase,
             {"dist=large_mean", "beyond the largest fp16 (65504)"});
  expectSays(repro("op=rmsnorm kernel=host_separate dtype=fp16 M=2 N=8 sigma=1e6"), exit_code::kBadCase,
             {"beyond the largest fp16 (65504)"});
}

TEST(Robustness, ZeroRanksIsRefused) {
  expectSays(repro("op=allreduce_rmsnorm kernel=host_fused_oneshot dtype=fp32 M=2 N=8 ranks=0"), exit_code::kBadCase,
             {"'ranks' must be in [1, 64], got 0"});
}

TEST(Robustness, ANegativeCtaCountIsRefused) {
  expectSays(repro(kCase + " ctas=-3"), exit_code::kBadCase, {"'ctas' must be in [0, 2147483647], got -3"});
}

TEST(Robustness, AnEmptyCaseStringIsRefused) {
  // `repro "$CASE"` with CASE unset.
  expectSays(repro(""), exit_code::kBadCase, {"empty case string"});
}

// ---------------------------------------------------------------------------
// Command lines: refused before any work (exit 2), naming the option and
// what it takes.

TEST(Robustness, AnUnknownSubcommandIsAUsageError) {
  expectSays(cli("frobnicate"), exit_code::kUsage, {"'frobnicate' is not a command", "run", "--help"});
}

TEST(Robustness, AnUnknownOptionIsNamed) {
  // A flag of another tool (or of a later ulpcheck).
  expectSays(cli("run --backend host --frobnicate"), exit_code::kUsage, {"--frobnicate"});
}

TEST(Robustness, ANegativeCaseCountIsNamed) {
  expectSays(cli("run --backend host --cases -1"), exit_code::kUsage, {"--cases", "'-1' is not a count >= 0"});
}

TEST(Robustness, AJunkSeedIsNamed) {
  expectSays(cli("run --backend host --seed junk"), exit_code::kUsage,
             {"--seed", "'junk' is not an unsigned 64-bit integer"});
}

TEST(Robustness, AShardPastItsCountIsRefused) {
  // CI matrix jobs numbered past the matrix.
  expectSays(cli("run --backend host --shard 3/2"), exit_code::kUsage, {"--shard", "'3/2'", "1 <= i <= n"});
}

TEST(Robustness, ShardsAreNumberedFromOne) {
  // A 0-based job index.
  expectSays(cli("run --backend host --shard 0/1"), exit_code::kUsage, {"--shard", "'0/1'", "1 <= i <= n"});
}

TEST(Robustness, AnUnknownTierListsTheKnownOnes) {
  expectSays(cli("run --backend host --tier huge"), exit_code::kUsage,
             {"--tier", "'huge' is not one of smoke, default, nightly"});
}

TEST(Robustness, AnUnknownBackendListsTheKnownOnes) {
  expectSays(cli("run --backend gpu9"), exit_code::kUsage, {"--backend", "'gpu9' is not one of auto, host, cuda"});
}

TEST(Robustness, GpusOnTheHostBackendSaysWhatToUseInstead) {
  // --gpus on a machine (or backend) without CUDA: points to --workers.
  expectSays(cli("run --backend host --gpus 2"), exit_code::kUsage, {"--gpus needs the cuda backend", "--workers"});
}

TEST(Robustness, ZeroConcurrentCasesIsRefused) {
  expectSays(cli("run --backend host --concurrent-cases 0"), exit_code::kUsage,
             {"--concurrent-cases 0", "give 1 to 256, or auto"});
}

TEST(Robustness, AnUnknownOracleListsTheKnownOnes) {
  expectSays(cli("run --backend host --oracle bogus"), exit_code::kUsage,
             {"--oracle", "'bogus' is not one of fast, mpfr, audit"});
}

TEST(Robustness, AnUnknownJudgeListsTheKnownOnes) {
  expectSays(cli("run --backend host --judge bogus"), exit_code::kUsage,
             {"--judge", "'bogus' is not one of auto, host, gpu"});
}

TEST(Robustness, ANegativeTimeBudgetIsRefused) {
  // Each time limit named, not "time limits must be >= 0".
  expectSays(cli("run --backend host --time-budget -1"), exit_code::kUsage, {"--time-budget -1", ">= 0"});
  expectSays(cli("run --backend host --shrink-budget -1"), exit_code::kUsage, {"--shrink-budget -1", ">= 0"});
  expectSays(cli("repro '" + kCase + "' --case-timeout -1"), exit_code::kUsage, {"--case-timeout -1", "> 0"});
}

TEST(Robustness, ReproWithoutACaseSaysACaseIsRequired) {
  expectSays(cli("repro"), exit_code::kUsage, {"case is required"});
}

// ---------------------------------------------------------------------------
// Plugins that cannot be used: refused as a whole (exit 2), naming the file
// and what is wrong with it.

void expectPluginRefused(const std::string& plugin, std::initializer_list<std::string> words) {
  const Result r = cli("list --plugin " + plugin);
  expectSays(r, exit_code::kUsage, {"plugin", plugin});
  for (const std::string& w : words)
    EXPECT_NE(r.output.find(w), std::string::npos) << "says '" << w << "'\n" << r.output;
  EXPECT_EQ(r.output.find("kernel variants:"), std::string::npos) << "nothing is listed\n" << r.output;
}

TEST(Robustness, APluginPathThatDoesNotExistIsNamed) {
  // A plugin path from another machine's build folder.
  expectPluginRefused("/nonexistent/libnothing.so", {"no such file"});
}

TEST(Robustness, ATextFileIsNotAPlugin) {
  // A linker script or a source file passed by mistake.
  const Scratch dir;
  writeFile(dir.path() / "libnotes.so", std::string(200, 'x') + "\nnot a shared library, just text\n");
  expectPluginRefused(dir / "libnotes.so", {"cannot be loaded"});
}

TEST(Robustness, AnExecutableIsNotAPlugin) {
  // The ulpcheck binary itself instead of the plugin built beside it.
  expectPluginRefused(ULPCHECK_CLI, {"cannot be loaded"});
}

TEST(Robustness, APluginOfAnotherAbiVersionSaysBothVersions) {
  expectPluginRefused(ULPCHECK_TEST_PLUGIN_BAD_ABI,
                      {"plugin ABI version 99", fmt::format("reads versions 1 to {}", ULPCHECK_ABI_VERSION)});
}

TEST(Robustness, APluginVariantOfAnUnknownOpNamesTheVariantAndTheOps) {
  expectPluginRefused(ULPCHECK_TEST_PLUGIN_BAD_OP, {"variant 0 ('test_softmax')", "op 'softmax' is not one of"});
}

TEST(Robustness, ALibraryWithoutTheEntryPointIsNotAPlugin) {
  expectPluginRefused(ULPCHECK_TEST_PLUGIN_NO_ENTRY, {"exports no ulpcheck_plugin_v1"});
}

TEST(Robustness, APluginVariantNamedLikeABuiltInOneSaysWhoHasTheName) {
  expectPluginRefused(ULPCHECK_TEST_PLUGIN_TAKEN_NAME, {"'host_separate'", "the name is taken", "built-in"});
}

TEST(Robustness, APluginBuiltAgainstAnotherHeaderSaysTheSizes) {
  // A stale copy of plugin.h in the user's tree.
  expectPluginRefused(
      ULPCHECK_TEST_PLUGIN_BAD_VARIANT_SIZE,
      {"its ulpcheck_variant is", fmt::format("bytes, version {}'s are", ULPCHECK_ABI_VERSION), "another header"});
}

TEST(Robustness, APluginEntryPointReturningNoTableIsRefused) {
  // The library's own initialisation failed and it returned null.
  expectPluginRefused(ULPCHECK_TEST_PLUGIN_NULL_TABLE, {"ulpcheck_plugin_v1() returned no plugin table"});
}

TEST(Robustness, APluginRmsnormWithoutABackwardIsRefused) {
  expectPluginRefused(ULPCHECK_TEST_PLUGIN_NO_BACKWARD,
                      {"'test_rmsnorm_no_backward'", "needs both its forward and backward entry points"});
}

TEST(Robustness, APluginVariantNameWithASpaceIsRefused) {
  // A name that could not be typed back on a command line or in a case string.
  expectPluginRefused(ULPCHECK_TEST_PLUGIN_BAD_NAME, {"'test rmsnorm'", "its name must be letters, digits"});
}

TEST(Robustness, APluginDtypeMaskOfNoKnownDtypeIsRefused) {
  expectPluginRefused(ULPCHECK_TEST_PLUGIN_BAD_DTYPES, {"'test_rmsnorm_fp8'", "dtypes mask 0x80"});
}

TEST(Robustness, APluginRmsNormDeclaringLayerNormsStatisticsIsRefused) {
  // An RMSNorm has no mean: the contract would be ignored, and believed judged.
  expectPluginRefused(
      ULPCHECK_TEST_PLUGIN_RMSNORM_TWO_PASS,
      {"'test_rmsnorm_two_pass'", "ULPCHECK_TWO_PASS_STATISTICS is LayerNorm's", "rmsnorm has no mean"});
}

TEST(Robustness, APluginOfNoVariantsIsRefused) {
  expectPluginRefused(ULPCHECK_TEST_PLUGIN_NO_VARIANTS, {"declares 0 variants"});
}

// ---------------------------------------------------------------------------
// A plugin kernel that crashes or hangs, replayed with `repro`: a failing case
// (exit 1; 5 for a hang) saying what happened, the case's other properties
// not run (they would fault the same way, a hang costing each a timeout), and
// the --json file holding every property's record.

/// Replays one case of the good test plugin and checks the fault is reported
/// by the first property, the `properties - 1` others said not run, and
/// every record in the JSON file.
void expectReproFault(const std::string& case_text, const std::string& options, int properties, const std::string& says,
                      int code = exit_code::kPropertyFailed) {
  const Scratch dir;
  const std::string json = dir / "repro.jsonl";
  const Result r =
      cli("repro '" + case_text + "' --plugin " + kGood + " --case-timeout 2 " + options + " --json " + json);
  expectSays(r, code, {says});
  int fail_lines = 0, not_run = 0;
  for (size_t at = 0; (at = r.output.find(says, at)) != std::string::npos; at += says.size()) ++fail_lines;
  for (size_t at = 0; (at = r.output.find("not run: the kernel faulted", at)) != std::string::npos; ++at) ++not_run;
  EXPECT_EQ(fail_lines, 1) << "the property that met the fault says what happened\n" << r.output;
  EXPECT_EQ(not_run, properties - 1) << "the others say why they did not run\n" << r.output;
  const auto records = expectWholeRecords(json);
  EXPECT_EQ(countType(records, "repro"), properties);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records[0]["outcome"]["verdict"], "FAIL") << records[0].dump();
  EXPECT_EQ(records[0]["outcome"].value("fault", false), true) << records[0].dump();
  EXPECT_NE(records[0]["outcome"].value("summary", "").find(says), std::string::npos) << records[0].dump();
  EXPECT_EQ(records[0]["failed_runs"], 1) << records[0].dump();
  for (size_t i = 1; i < records.size(); ++i) EXPECT_EQ(records[i]["outcome"]["verdict"], "skip") << records[i].dump();
}

TEST(Robustness, ReproOfASegfaultingPluginKernelSaysSignal11) {
  expectReproFault("op=rmsnorm kernel=test_rmsnorm_segfaults_at_n7 dtype=fp32 M=2 N=7", "", 4,
                   "killed by signal 11 (Segmentation fault)");
}

TEST(Robustness, ReproOfAnAbortingPluginKernelSaysSignal6) {
  // A failed assert() inside the user's library.
  expectReproFault("op=rmsnorm kernel=test_rmsnorm_aborts_at_n3 dtype=fp32 M=2 N=3", "", 4, "killed by signal 6");
}

TEST(Robustness, ReproOfAHangingPluginKernelIsKilledAfterTheCaseTimeout) {
  // A deadlocked kernel: killed after --case-timeout, not waited on forever,
  // and the other properties not made to wait a timeout each: exit 5, the
  // hang's own code.
  const auto t0 = std::chrono::steady_clock::now();
  expectReproFault("op=rmsnorm kernel=test_rmsnorm_hangs_at_n5 dtype=fp32 M=2 N=5", "", 4, "did not return within 2 s",
                   exit_code::kHang);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30);
}

TEST(Robustness, ReproOfAPluginErrorReturnCarriesItsMessageIntoTheJson) {
  expectReproFault("op=rmsnorm kernel=test_rmsnorm_fails_past_64_rows dtype=fp32 M=65 N=8", "", 4,
                   "rmsnorm_backward returned 3: scratch too small");
}

TEST(Robustness, ACrashedWorkerIsRestartedForEveryRepeatedRun) {
  // --repeat on a crashing case: each run meets a fresh worker and fails the same way.
  expectSays(cli("repro 'op=rmsnorm kernel=test_rmsnorm_segfaults_at_n7 dtype=fp32 M=2 N=7' --property accuracy "
                 "--repeat 3 --plugin " +
                 kGood),
             exit_code::kPropertyFailed, {"failed 3 of 3 runs", "killed by signal 11"});
}

// ---------------------------------------------------------------------------
// Corrupt corpus files (hand-edited, merged badly): the run refuses to start
// (exit 3), naming the file and, where there is one, the line.

/// Runs a one-case rmsnorm campaign over a corpus holding one file, `rel`.
void expectCorpusRefused(const std::string& rel, const std::string& text, std::initializer_list<std::string> words) {
  const Scratch dir;
  const fs::path corpus = dir.path() / "corpus";
  writeFile(corpus / rel, text);
  const Result r = cli("run --backend host --op rmsnorm --cases 1 --tier smoke --no-save --corpus " + corpus.string());
  expectSays(r, exit_code::kBadCase, {"malformed corpus file", (corpus / rel).string()});
  for (const std::string& w : words)
    EXPECT_NE(r.output.find(w), std::string::npos) << "says '" << w << "'\n" << r.output;
  EXPECT_EQ(r.output.find("#kernel"), std::string::npos) << "no case ran\n" << r.output;
}

const std::string kCaseLine = "op=rmsnorm kernel=host_separate dtype=fp32 M=2 N=8\n";

TEST(Robustness, ACorpusFileOfTwoCasesNamesBothLines) {
  // Two regression cases concatenated into one file.
  expectCorpusRefused("rmsnorm/accuracy/regression/two.case", "# why\n" + kCaseLine + kCaseLine,
                      {"two.case:3: a second case line (the first is line 2)"});
}

TEST(Robustness, ACorpusFileOfOnlyCommentsIsRefused) {
  // The case line deleted, the comment saying why kept.
  expectCorpusRefused("rmsnorm/accuracy/regression/empty.case", "# a large-mean row\n\n# keep it\n",
                      {"no case line (only comments or empty)"});
}

TEST(Robustness, ACorpusRepeatOfZeroSaysTheRange) {
  expectCorpusRefused("rmsnorm/determinism/regression/race.case", "# repeat: 0\n" + kCaseLine,
                      {"race.case:1:", "'repeat:' takes a count from 1 to"});
}

TEST(Robustness, ACorpusRepeatThatIsNotANumberSaysTheRange) {
  expectCorpusRefused("rmsnorm/determinism/regression/race.case", "# why\n# repeat: many\n" + kCaseLine,
                      {"race.case:2:", "'repeat:' takes a count from 1 to", "many"});
}

TEST(Robustness, ACorpusCaseUnderAnotherOpsFolderIsRefused) {
  // A LayerNorm case saved by hand under rmsnorm/.
  expectCorpusRefused("rmsnorm/accuracy/regression/ln.case", "op=layernorm kernel=host_twopass dtype=fp32 M=2 N=8\n",
                      {"ln.case:1:", "case is for op 'layernorm' but the file lies under 'rmsnorm'"});
}

TEST(Robustness, ACorpusFolderNamingNoPropertyIsRefused) {
  // A misspelled property folder: its cases would otherwise never replay.
  expectCorpusRefused("rmsnorm/acuracy/regression/x.case", kCaseLine, {"no property named 'acuracy'"});
}

TEST(Robustness, AnUnparseableCorpusCaseLineNamesTheLineAndTheField) {
  expectCorpusRefused("rmsnorm/accuracy/regression/bad.case",
                      "# found by hand\nop=rmsnorm kernel=host_separate dtype=fp32 M=2 N=8 sigma=oops\n",
                      {"bad.case:2:", "'sigma'", "'oops' is not a number"});
}

TEST(Robustness, ReproOfACorruptCorpusFileNamesItsLine) {
  // The same file handed to `repro` directly.
  const Scratch dir;
  const fs::path file = dir.path() / "corpus" / "rmsnorm" / "accuracy" / "regression" / "two.case";
  writeFile(file, kCaseLine + kCaseLine);
  expectSays(cli("repro " + file.string()), exit_code::kBadCase,
             {"malformed corpus file", file.string() + ":2:", "a second case line"});
}

// ---------------------------------------------------------------------------
// Runs interrupted from outside (Ctrl-C, a CI job's timeout, the OOM killer):
// the JSON lines written so far stay whole records, and the report of them
// still comes out, marked CUT SHORT.

TEST(Robustness, ARunKilledBySigkillKeepsEveryRecordWritten) { expectCutShortRunKeepsItsRecords(SIGKILL); }

TEST(Robustness, ARunStoppedBySigtermKeepsEveryRecordWritten) { expectCutShortRunKeepsItsRecords(SIGTERM); }

TEST(Robustness, ARunInterruptedBySigintKeepsEveryRecordWritten) { expectCutShortRunKeepsItsRecords(SIGINT); }

// ---------------------------------------------------------------------------
// Several runs saving failures into one corpus at once (CI shards on one
// checkout, a developer's two terminals): every file saved is one whole case
// that replays.

TEST(Robustness, ConcurrentRunsSavingIntoOneCorpusLeaveWholeCaseFiles) {
  const Scratch dir;
  const fs::path corpus = dir.path() / "corpus";
  fs::create_directories(corpus);
  std::string cmd;
  for (int seed : {1, 22, 333})
    cmd += fmt::format("( {} run --backend host --kernel host_bug_drop_tail --property memory_safety --cases 40 "
                       "--tier smoke --seed {} --shrink-budget 2 --quiet --corpus {} > {}/run{}.log 2>&1; "
                       "echo $? > {}/rc{} ) & ",
                       ULPCHECK_CLI, seed, corpus.string(), dir.path().string(), seed, dir.path().string(), seed);
  const Result all = shell(cmd + "wait");
  EXPECT_EQ(all.code, 0) << all.output;
  for (int seed : {1, 22, 333}) {
    EXPECT_EQ(readFile(dir.path() / fmt::format("rc{}", seed)), "1\n")
        << "seed " << seed << " found the defect:\n"
        << readFile(dir.path() / fmt::format("run{}.log", seed));
    EXPECT_NE(readFile(dir.path() / fmt::format("run{}.log", seed)).find("saved: "), std::string::npos);
  }
  int files = 0;
  for (const auto& f : fs::recursive_directory_iterator(corpus)) {
    if (!f.is_regular_file()) continue;
    ++files;
    EXPECT_EQ(f.path().parent_path(), corpus / "rmsnorm" / "memory_safety" / "crashing") << f.path();
    EXPECT_EQ(f.path().extension(), ".case") << f.path();
    std::ifstream in(f.path());
    int case_lines = 0;
    for (std::string line; std::getline(in, line);) case_lines += !line.empty() && line[0] != '#';
    EXPECT_EQ(case_lines, 1) << f.path() << ":\n" << readFile(f.path());
    const Result again = cli("repro " + f.path().string());
    EXPECT_EQ(again.code, exit_code::kPropertyFailed) << f.path() << "\n" << readFile(f.path()) << again.output;
  }
  EXPECT_GE(files, 1);
}

// ---------------------------------------------------------------------------
// A corpus the process cannot write (an installed, read-only share/ folder;
// a mistyped path): a failure found is still saved, under ./ulpcheck-corpus,
// and the run says where.

/// An existing corpus folder this process cannot create files under: a
/// read-only folder or, where the process is root and permissions do not stop
/// it, /proc (nothing can be created there).
std::string unwritableCorpus(const Scratch& dir) {
  const fs::path ro = dir.path() / "read-only";
  fs::create_directories(ro);
  fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                          fs::perms::others_read | fs::perms::others_exec);
  if (!std::ofstream(ro / "probe")) return ro.string();
  fs::remove(ro / "probe");
  return "/proc";
}

void expectSavedUnderTheWorkingFolder(const Scratch& dir, const std::string& environment,
                                      const std::string& corpus_option, const std::string& unwritable) {
  const fs::path work = dir.path() / "work";
  fs::create_directories(work);
  const Result r = shell("cd " + work.string() + " && " + environment + " " + ULPCHECK_CLI +
                         " run --backend host --kernel host_bug_drop_tail --property memory_safety --cases 30 "
                         "--tier smoke --seed 9 --shrink-budget 2 --no-corpus " +
                         corpus_option);
  expectSays(r, exit_code::kPropertyFailed,
             {unwritable, "cannot be created", "saved under ./ulpcheck-corpus instead",
              "saved: ulpcheck-corpus/rmsnorm/memory_safety/crashing/"});
  const fs::path saved = work / "ulpcheck-corpus" / "rmsnorm" / "memory_safety" / "crashing";
  ASSERT_TRUE(fs::is_directory(saved)) << r.output;
  int files = 0;
  for (const auto& f : fs::directory_iterator(saved)) {
    ++files;
    EXPECT_EQ(cli("repro " + f.path().string()).code, exit_code::kPropertyFailed) << f.path();
  }
  EXPECT_GE(files, 1);
}

TEST(Robustness, AnUnwritableCorpusFromTheEnvironmentSavesUnderTheWorkingFolder) {
  const Scratch dir;
  expectSavedUnderTheWorkingFolder(dir, "ULPCHECK_CORPUS=/dev/null/corpora", "", "/dev/null/corpora");
}

TEST(Robustness, AnUnwritableCorpusOptionSavesUnderTheWorkingFolder) {
  const Scratch dir;
  const std::string corpus = unwritableCorpus(dir);
  expectSavedUnderTheWorkingFolder(dir, "", "--corpus " + corpus, corpus);
  if (corpus != "/proc") {
    EXPECT_TRUE(fs::is_empty(corpus)) << "nothing was written into " << corpus;
  }
}

// ---------------------------------------------------------------------------
// `report` on input that is not a run's JSON lines (exit 3), naming the file
// and the line.

TEST(Robustness, ReportOfAMissingFileNamesIt) {
  // The --json of a run that never started.
  const Scratch dir;
  expectSays(cli("report " + (dir / "never-written.jsonl") + " -o " + (dir / "page.html")), exit_code::kBadCase,
             {"cannot report", "never-written.jsonl"});
  EXPECT_FALSE(fs::exists(dir.path() / "page.html"));
}

TEST(Robustness, ReportOfAnEmptyFileSaysItHoldsNoRecords) {
  // A run killed before its first record.
  const Scratch dir;
  writeFile(dir.path() / "empty.jsonl", "");
  expectSays(cli("report " + (dir / "empty.jsonl") + " -o " + (dir / "page.html")), exit_code::kBadCase,
             {"cannot report", "empty.jsonl", "holds no records"});
}

TEST(Robustness, ReportOfAFileWithAGarbageMiddleLineNamesTheLine) {
  // Two runs' output interleaved with a log line (`| tee` into one file).
  const Scratch dir;
  std::vector<std::string> lines = realRecordLines(dir);
  lines.insert(lines.begin() + 2, "# rmsnorm 3/20 cases, 0 failures, 0s, ETA 0s");
  const fs::path bad = writeLines(dir.path() / "mixed.jsonl", lines);
  expectSays(cli("report " + bad.string() + " -o " + (dir / "page.html")), exit_code::kBadCase,
             {"cannot report", bad.string() + ":3:", "not JSON"});
}

TEST(Robustness, ReportOfJsonThatIsNotARecordNamesTheLine) {
  // Another tool's JSON lines: valid JSON, not ulpcheck records.
  const Scratch dir;
  std::vector<std::string> lines = realRecordLines(dir);
  lines.insert(lines.begin() + 1, "[1, 2, 3]");
  const fs::path array = writeLines(dir.path() / "array.jsonl", lines);
  expectSays(cli("report " + array.string() + " -o " + (dir / "page.html")), exit_code::kBadCase,
             {array.string() + ":2:", "not a ulpcheck record", "\"type\""});
  lines[1] = R"({"name": "test_rmsnorm", "passed": true})";
  const fs::path untyped = writeLines(dir.path() / "untyped.jsonl", lines);
  expectSays(cli("report " + untyped.string() + " -o " + (dir / "page.html")), exit_code::kBadCase,
             {untyped.string() + ":2:", "not a ulpcheck record"});
}

// ---------------------------------------------------------------------------
// Selections that run nothing (exit 6) or judge nothing (exit 7): never a
// pass that checked nothing.

TEST(Robustness, ADtypeTheKernelDoesNotTakeRunsNothing) {
  // The good test plugin's variants take fp32 and bf16 only.
  expectSays(cli("run --plugin " + kGood +
                 " --kernel test_rmsnorm_contiguous --dtype fp16 --cases 2 --tier smoke "
                 "--no-save --no-corpus"),
             exit_code::kNothingRan,
             {"test_rmsnorm_contiguous takes none of the dtypes selected: it takes fp32, bf16", "0 generated cases"});
  // Replayed on it, such a case cannot run here (6), as a spec or a width it lacks; not a malformed case (3).
  expectSays(cli("repro 'op=rmsnorm kernel=test_rmsnorm_contiguous dtype=fp16 M=2 N=8' --plugin " + kGood),
             exit_code::kNothingRan, {"cannot run here", "does not take dtype fp16"});
}

TEST(Robustness, ReproOfASpecTheKernelDoesNotImplementSaysWhy) {
  // A bias case from a host port replayed on a plugin variant without one.
  expectSays(
      cli("repro 'op=rmsnorm kernel=test_rmsnorm_fails_past_64_rows dtype=fp32 M=2 N=8 bias=yes' --plugin " + kGood),
      exit_code::kNothingRan, {"cannot run here", "implements RMSNorm without a bias only"});
}

TEST(Robustness, ReproOfARowWiderThanTheKernelTakesSaysWhy) {
  expectSays(cli("repro 'op=rmsnorm kernel=test_rmsnorm_contiguous dtype=fp32 M=2 N=1024' --plugin " + kGood),
             exit_code::kNothingRan, {"cannot run here", "takes at most 512 columns", "N=1024"});
}

TEST(Robustness, APropertyThatAppliesToNoSelectedKernelJudgesNothing) {
  // fused_vs_unfused asked of the RMSNorm op, which has no fused variant.
  expectSays(cli("run --backend host --op rmsnorm --property fused_vs_unfused --cases 2 --tier smoke --no-save "
                 "--no-corpus"),
             exit_code::kNothingJudged, {"NOTHING JUDGED", "--property fused_vs_unfused applies to no"});
}

// ---------------------------------------------------------------------------
// Found wanting by the probes of issue 28, and now held: nothing lost, nothing
// passed silently, ulpcheck itself never dies, a cause's own exit code and
// words.

/// Whether process `pid` is gone (or a zombie no one has reaped yet).
bool gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || text.compare(paren + 2, 1, "Z") == 0;
}

/// Every live descendant of `pid`, with its command line.
std::vector<std::pair<pid_t, std::string>> descendants(pid_t pid) {
  std::map<pid_t, pid_t> parent;
  std::map<pid_t, std::string> command;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string text;
    if (!std::getline(stat, text)) continue;
    const size_t paren = text.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(text.substr(paren + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (state == 'Z') continue;
    const pid_t p = pid_t(std::stol(name));
    parent[p] = ppid;
    std::string cmd = readFile(e.path() / "cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    command[p] = cmd;
  }
  std::vector<std::pair<pid_t, std::string>> out;
  std::set<pid_t> tree{pid};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [p, pp] : parent)
      if (tree.count(pp) && tree.insert(p).second) {
        out.emplace_back(p, command[p]);
        grew = true;
      }
  }
  return out;
}

/// Starts `ulpcheck args`, waits until it has `kernel_workers` descendants
/// running `ulpcheck worker --fd` (a kernel worker in its call), sends `sig`
/// to the coordinator alone, and expects every descendant gone within 10 s:
/// an orphaned worker would hold the GPU on a runner until its kernel returned.
void expectWorkersDieWithTheirCoordinator(const std::vector<std::string>& args, int kernel_workers, int sig) {
  const Scratch dir;
  const fs::path log = dir.path() / "run.log";
  const pid_t pid = startInBackground(args, log);
  ASSERT_GT(pid, 0);
  std::vector<std::pair<pid_t, std::string>> tree;
  auto countWorkers = [&] {
    int n = 0;
    for (const auto& [p, cmd] : tree) n += cmd.find(" worker --fd ") != std::string::npos;
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (tree = descendants(pid); countWorkers() < kernel_workers; tree = descendants(pid)) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid || std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "no " << kernel_workers << " kernel workers appeared:\n" << readFile(log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, sig);
  int status = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > give_up) {
      ADD_FAILURE() << "the coordinator is still running 30 s after signal " << sig;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (const auto& [p, cmd] : tree) {
    while (!gone(p) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(gone(p)) << "pid " << p << " (" << cmd << ") outlived its coordinator, ended by signal " << sig;
    if (!gone(p)) kill(p, SIGKILL);
  }
  if (sig != SIGKILL) {  // SIGKILL leaves no chance to say anything
    EXPECT_NE(readFile(log).find(sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)"), std::string::npos)
        << readFile(log);
  }
}

/// A repro whose plugin kernel hangs for two minutes: its worker is in the call.
std::vector<std::string> hangingRepro() {
  return {"repro",          "op=rmsnorm kernel=test_rmsnorm_hangs_at_n5 dtype=fp32 M=2 N=5",
          "--property",     "accuracy",
          "--case-timeout", "100",
          "--plugin",       kGood};
}

TEST(Robustness, AKernelWorkerInItsCallDiesWithItsCoordinatorOnSigkill) {
  expectWorkersDieWithTheirCoordinator(hangingRepro(), 1, SIGKILL);
}

TEST(Robustness, AKernelWorkerInItsCallDiesWithItsCoordinatorOnSigterm) {
  expectWorkersDieWithTheirCoordinator(hangingRepro(), 1, SIGTERM);
}

TEST(Robustness, AKernelWorkerInItsCallDiesWithItsCoordinatorOnSigint) {
  expectWorkersDieWithTheirCoordinator(hangingRepro(), 1, SIGINT);
}

TEST(Robustness, CampaignWorkersAndTheirKernelWorkersDieWithTheCoordinator) {
  // Two campaign workers (`run --report-to-coordinator`), each with its own
  // plugin kernel worker: all four end with the coordinator.
  expectWorkersDieWithTheirCoordinator(
      {"run", "--backend", "host", "--workers", "2", "--plugin", kGood, "--kernel", "test_rmsnorm_contiguous",
       "--cases", "100000", "--tier", "smoke", "--seed", "3", "--no-save", "--no-corpus", "--quiet"},
      2, SIGKILL);
}

TEST(Robustness, AJsonFileThatCannotBeWrittenEndsTheRunWithExitCode4) {
  // /dev/full: every write fails (ENOSPC), as on a full disk. The table is
  // still printed; the run does not exit 0.
  expectSays(cli("run --backend host --op rmsnorm --kernel host_separate --cases 20 --tier smoke --seed 1 --no-save "
                 "--no-corpus --json /dev/full"),
             exit_code::kRuntimeError,
             {"cannot write the JSON lines to '/dev/full': No space left on device", "# I/O ERROR", "host_separate"});
}

TEST(Robustness, AJsonFileCutByAFullDiskKeepsWholeRecordsOnly) {
  // A file-size limit (ulimit -f: 200 KiB in sh's 512-byte blocks) stands for a disk that fills up
  // mid-run: the record being written when it filled is taken back, so the
  // file holds whole lines only, and `report` reports them.
  const Scratch dir;
  const std::string json = dir / "run.jsonl";
  const Result r = shell("ulimit -f 400; " + std::string(ULPCHECK_CLI) +
                         " run --backend host --op rmsnorm --kernel host_separate --cases 200 --tier smoke --seed 1 "
                         "--no-save --no-corpus --json " +
                         json);
  expectSays(r, exit_code::kRuntimeError, {"cannot write the JSON lines", "File too large", "whole records"});
  const std::string text = readFile(json);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n') << "no record cut mid-line";
  const auto records = expectWholeRecords(json);
  EXPECT_GT(countType(records, "case"), 5);
  expectSays(cli("report " + json + " -o " + (dir / "page.html")), exit_code::kOk, {"HTML report"});
}

TEST(Robustness, AReportOfJsonLinesCutMidRecordReportsTheWholeOnes) {
  // A run killed while writing its last record (an older ulpcheck, a full
  // disk elsewhere): the whole records are reported and the cut one named.
  const Scratch dir;
  std::vector<std::string> lines = realRecordLines(dir);
  const fs::path cut = dir.path() / "cut.jsonl";
  {
    std::ofstream out(cut);
    for (size_t i = 0; i + 1 < lines.size(); ++i) out << lines[i] << '\n';
    out << lines.back().substr(0, lines.back().size() / 2);  // no newline: cut mid-record
  }
  const Result r = cli("report " + cut.string() + " -o " + (dir / "page.html"));
  expectSays(r, exit_code::kOk, {"the last line is cut mid-record", cut.string() + ":" + std::to_string(lines.size())});
  EXPECT_NE(readFile(dir.path() / "page.html").find("the last line is cut mid-record"), std::string::npos);
  // Garbage in the middle is still malformed input, not a cut.
  lines.insert(lines.begin() + 1, "{\"type\": \"case\", ");
  const fs::path middle = writeLines(dir.path() / "middle.jsonl", lines);
  expectSays(cli("report " + middle.string() + " -o " + (dir / "page.html")), exit_code::kBadCase,
             {middle.string() + ":2:", "not JSON"});
}

TEST(Robustness, AReportWrittenOverItsOwnInputIsRefused) {
  const Scratch dir;
  const fs::path json = writeLines(dir.path() / "run.jsonl", realRecordLines(dir));
  const std::string before = readFile(json);
  expectSays(cli("report " + json.string() + " -o " + json.string()), exit_code::kUsage,
             {"is one of the JSON-lines files to report"});
  EXPECT_EQ(readFile(json), before) << "the input is untouched";
}

TEST(Robustness, AFolderGivenForAReportInputOrAPluginIsSaidToBeAFolder) {
  const Scratch dir;
  expectSays(cli("report " + dir.path().string() + " -o " + (dir / "page.html")), exit_code::kBadCase, {"is a folder"});
  expectSays(cli("list --plugin " + dir.path().string()), exit_code::kUsage, {"is a folder", "shared library"});
}

TEST(Robustness, TwoVariantsOfOneNameInOnePluginAreRefused) {
  // One correct, one aborting on every call: `--kernel NAME` would run the
  // first only and pass without the other ever judged.
  expectPluginRefused(ULPCHECK_TEST_PLUGIN_DUPLICATE_NAME,
                      {"variants 0 and 1 are both named 'test_rmsnorm_twice'", "unique"});
  expectSays(cli("run --backend host --kernel test_rmsnorm_twice --cases 5 --plugin " +
                 std::string(ULPCHECK_TEST_PLUGIN_DUPLICATE_NAME)),
             exit_code::kUsage, {"both named"});
}

TEST(Robustness, APythonFileThatRegistersNothingIsRefused) {
  // Not a pass of the built-in variants: the user's kernels were never judged.
  expectSays(
      cli("run --backend host --cases 5 --python " + std::string(ULPCHECK_SOURCE_DIR) + "/tests/plugins/no_kernels.py"),
      exit_code::kUsage, {"no_kernels.py registers no variant", "ulpcheck.rmsnorm("});
}

TEST(Robustness, APythonWithoutTorchIsNamedWithTheVariableThatPicksAnother) {
  // An interpreter without torch (site-packages left out): one line naming
  // the interpreter, the missing module and ULPCHECK_PYTHON, no traceback.
  if (std::string(ULPCHECK_TEST_PYTHON).empty()) GTEST_SKIP() << "no Python with torch found at configure time";
  if (shell(std::string(ULPCHECK_TEST_PYTHON) + " -S -c 'import torch'").code == 0)
    GTEST_SKIP() << ULPCHECK_TEST_PYTHON << " finds torch without its site folders: no torch-less interpreter to make";
  const Scratch dir;
  const std::string python = dir / "python-without-torch";
  writeFile(python, "#!/bin/sh\nexec " + std::string(ULPCHECK_TEST_PYTHON) + " -S \"$@\"\n");
  fs::permissions(python, fs::perms::owner_all);
  const Result r = shell("ULPCHECK_PYTHON=" + python + " " + std::string(ULPCHECK_CLI) + " list --python " +
                         std::string(ULPCHECK_SOURCE_DIR) + "/python/ulpcheck/adapters/torch_ops.py");
  expectSays(r, exit_code::kUsage, {"imports the module 'torch'", "lacks", "ULPCHECK_PYTHON"});
  EXPECT_EQ(r.output.find("Traceback"), std::string::npos) << r.output;
}

TEST(Robustness, WithoutAGpuTheMessageSaysSoNotThatADriverIsTooOld) {
  // A CUDA variant asked for on a machine without a GPU (the CI runner).
  const Result r = cli("repro 'op=rmsnorm kernel=cuda_separate dtype=fp32 M=2 N=8'");
  if (r.code == exit_code::kOk) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_NE(r.code, exit_code::kOk);
  EXPECT_EQ(r.output.find("insufficient"), std::string::npos) << r.output;
  EXPECT_TRUE(r.output.find("no GPU") != std::string::npos ||
              r.output.find("built without CUDA") != std::string::npos ||
              r.output.find("no kernel variant 'cuda_separate'") != std::string::npos)
      << r.output;
}

TEST(Robustness, AReproThatJudgedNothingIsNotAPass) {
  // Every property skipped (the case cannot fit in memory): exit 7, as a
  // run's property that judged no case.
  // (What the process may use is set, so the probe holds on any machine.)
  expectSays(shell("ULPCHECK_MAX_MEMORY=16G " + std::string(ULPCHECK_CLI) +
                   " repro 'op=rmsnorm kernel=host_separate dtype=fp32 M=1048576 N=1048576'"),
             exit_code::kNothingJudged, {"does not fit in host memory", "NOTHING JUDGED"});
  // Judged by no property with full power: inconclusive (statistics saved
  // in bf16: dgamma sums over 4096 rows the bf16 rounding of rstd that a
  // correct kernel may take either way near a boundary).
  expectSays(cli("repro 'op=layernorm kernel=host_twopass dtype=bf16 M=4096 N=4 eps=0x1.0c6f7ap-20 dist=normal "
                 "sigma=0x1.dp-5 stats=bf16' --property accuracy"),
             exit_code::kNothingJudged, {"inconclusive", "NOTHING JUDGED: accuracy"});
  // A property named that does not apply to the case's kernel.
  expectSays(cli("repro '" + kCase + "' --property fused_vs_unfused"), exit_code::kNothingJudged,
             {"does not apply", "NOTHING JUDGED: fused_vs_unfused"});
}

TEST(Robustness, ACaseTooLargeForThisMachineIsRefusedBeforeAnyAllocation) {
  // 2^31 rows once grew to 24 GB before the OOM killer ended ulpcheck (exit
  // 137, nothing said): now its estimate is weighed first.
  const auto t0 = std::chrono::steady_clock::now();
  expectSays(shell("ULPCHECK_MAX_MEMORY=16G " + std::string(ULPCHECK_CLI) +
                   " repro 'op=rmsnorm kernel=host_separate dtype=fp32 M=2147483648 N=1'"),
             exit_code::kNothingJudged,
             {"does not fit in host memory: the case needs about", "this process may use 16.0 GiB",
              "ULPCHECK_MAX_MEMORY=16G"});
  // Without the variable, the machine's own limit (MemTotal here, a cgroup's, ...).
  expectSays(repro("op=rmsnorm kernel=host_separate dtype=fp32 M=2147483648 N=1"), exit_code::kNothingJudged,
             {"does not fit in host memory", "this process may use"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10);
  // What the process may use can be set, and a campaign skips what exceeds it.
  expectSays(shell("ULPCHECK_MAX_MEMORY=64M " + std::string(ULPCHECK_CLI) +
                   " run --backend host --kernel host_separate --property memory_safety --cases 30 --tier default "
                   "--seed 4 --no-save --no-corpus"),
             exit_code::kOk, {"skipped", "a case skipped: does not fit in host memory"});
  expectSays(shell("ULPCHECK_MAX_MEMORY=lots " + std::string(ULPCHECK_CLI) + " list"), exit_code::kUsage,
             {"ULPCHECK_MAX_MEMORY='lots'", "64G"});
}

/// Runs the CLI with `args` (its output discarded) and returns its exit
/// code and peak resident memory in bytes (max RSS, as the kernel counts it).
std::pair<int, int64_t> cliPeakBytes(const std::string& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string command = "exec " + std::string(ULPCHECK_CLI) + " " + args + " > /dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, int64_t(usage.ru_maxrss) * 1024};
}

/// The peak a case's pre-run estimate gives (OpAdapter::peakHostBytes), as
/// the refusal of a process allowed 1 MiB says it, in bytes; 0 if it does not.
double estimatedPeakBytes(const std::string& c) {
  const Result r = shell("ULPCHECK_MAX_MEMORY=1M " + std::string(ULPCHECK_CLI) + " repro '" + c + "'");
  const std::string say = "needs about ";
  const size_t at = r.output.find(say);
  if (at == std::string::npos) return 0;
  std::istringstream in(r.output.substr(at + say.size()));
  double value = 0;
  std::string unit;
  in >> value >> unit;
  const std::map<std::string, double> units = {{"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
  const auto u = units.find(unit);
  return u == units.end() ? 0 : value * u->second;
}

TEST(Robustness, AWideCaseOnTheHostStaysWithinTwiceItsTensorsPlus256MiB) {
  // 64 rows of 2^18 columns: the oracle's column sums took one chunk of the
  // fixed chunking per 4 rows, all held until the end (16 x 96 bytes a
  // column, 400 MB): 947 MB for LayerNorm against this bound of 776 MiB.
  // Folded as they come (mp::ColumnFold, sweepChunksInOrder): 640 MB.
  constexpr int64_t M = 64, N = int64_t{1} << 18, kBytes = 4;  // fp32
  const struct {
    const char* c;
    int64_t tensor_bytes;  // every tensor of the case: inputs, outputs, gradients, statistics
  } cases[] = {
      // x, dy, y, dx; gamma, beta, dgamma, dbeta; mean, rstd
      {"op=layernorm kernel=host_twopass dtype=fp32 M=64 N=262144", 4 * M * N * kBytes + 4 * N * kBytes + 2 * M * 4},
      // x, dy, y, dx; w, dw; rstd
      {"op=rmsnorm kernel=host_separate dtype=fp32 M=64 N=262144", 4 * M * N * kBytes + 2 * N * kBytes + M * 4},
  };
  for (const auto& c : cases) {
    const auto [code, peak] = cliPeakBytes(std::string("repro '") + c.c + "' --property accuracy");
    EXPECT_TRUE(code == exit_code::kOk || code == exit_code::kNothingJudged) << c.c << ": exit " << code;
    const int64_t bound = 2 * c.tensor_bytes + (int64_t{256} << 20);
    EXPECT_LE(peak, bound) << c.c << ": " << peak / (1 << 20) << " MiB at its peak, bound " << bound / (1 << 20)
                           << " MiB";
    EXPECT_GT(peak, c.tensor_bytes) << c.c << ": a peak below its own tensors measured nothing";
    // The estimate weighed before the case runs is within 1.5x of it.
    const double estimate = estimatedPeakBytes(c.c);
    EXPECT_LE(estimate, 1.5 * double(peak)) << c.c << ": estimated " << estimate << ", measured " << peak;
    EXPECT_GE(1.5 * estimate, double(peak)) << c.c << ": estimated " << estimate << ", measured " << peak;
  }
}

TEST(Robustness, CtaAndRankCountsBeyond32BitsAreRefusedNotWrapped) {
  expectSays(repro(kCase + " ctas=4294967297"), exit_code::kBadCase,
             {"'ctas' must be in [0, 2147483647], got 4294967297"});
  expectSays(repro(kCase + " ctas=999999999999"), exit_code::kBadCase, {"got 999999999999"});
  expectSays(repro("op=allreduce_rmsnorm kernel=host_unfused dtype=fp32 M=2 N=8 ranks=4294967298"), exit_code::kBadCase,
             {"'ranks' must be in [1, 64], got 4294967298"});
}

TEST(Robustness, AWorkspaceSizeThatIsAnErrorCodeFailsTheCaseNotUlpcheck) {
  // workspace_bytes answering (size_t)-1 once segfaulted ulpcheck; SIZE_MAX -
  // 4096 wrapped to "cannot map 0 bytes".
  const std::string plugin = ULPCHECK_TEST_PLUGIN_HUGE_WORKSPACE;
  expectSays(cli("repro 'op=rmsnorm kernel=test_rmsnorm_workspace_minus_one dtype=fp32 M=4 N=8' --plugin " + plugin),
             exit_code::kPropertyFailed,
             {"workspace_bytes returned 18446744073709551615 (-1 as a signed size)", "M=4 N=8"});
  expectSays(cli("repro 'op=rmsnorm kernel=test_rmsnorm_workspace_wraps dtype=fp32 M=4 N=8' --plugin " + plugin),
             exit_code::kPropertyFailed, {"workspace_bytes returned 18446744073709547519"});
  // A size only too large for this machine: the case does not fit (skipped, exit 7).
  expectSays(shell("ULPCHECK_MAX_MEMORY=16G " + std::string(ULPCHECK_CLI) +
                   " repro 'op=rmsnorm kernel=test_rmsnorm_workspace_16tib dtype=fp32 M=4 N=8' --plugin " + plugin),
             exit_code::kNothingJudged, {"does not fit in memory", "'workspace'"});
  // A campaign goes on past each such case.
  expectSays(cli("run --backend host --kernel test_rmsnorm_workspace_minus_one --cases 10 --tier smoke --seed 2 "
                 "--no-save --no-corpus --shrink-budget 1 --plugin " +
                 plugin),
             exit_code::kPropertyFailed, {"workspace_bytes returned", "generated cases"});
}

TEST(Robustness, APluginWhoseLibraryCrashesAsItLoadsIsRefusedNotFatal) {
  // Its static constructor segfaults: a child that loads it first dies instead of ulpcheck.
  expectPluginRefused(ULPCHECK_TEST_PLUGIN_CRASHING_CONSTRUCTOR,
                      {"killed by signal 11", "library constructor", "ulpcheck did not load it"});
}

TEST(Robustness, APluginWhoseLibraryExitsAsItLoadsIsRefusedNotAPass) {
  // Its constructor calls exit(0): in ulpcheck's own process that would be a
  // silent exit 0, read as a pass.
  expectPluginRefused(ULPCHECK_TEST_PLUGIN_EXITING_CONSTRUCTOR,
                      {"ended the process that tried", "exited with status 0", "ulpcheck did not load it"});
  expectSays(cli("run --backend host --cases 3 --tier smoke --no-save --plugin " +
                 std::string(ULPCHECK_TEST_PLUGIN_EXITING_CONSTRUCTOR)),
             exit_code::kUsage, {"ulpcheck did not load it"});
}

TEST(Robustness, AnEntryPointWithoutExternCIsNamedForWhatItIs) {
  expectPluginRefused(ULPCHECK_TEST_PLUGIN_CXX_ENTRY, {"with C++ linkage", "_Z18ulpcheck_plugin_v1v", "extern \"C\""});
}

TEST(Robustness, AnExplicitCorpusThatIsNotAFolderIsAUsageError) {
  expectSays(cli("run --backend host --cases 1 --tier smoke --corpus /etc/passwd"), exit_code::kUsage,
             {"--corpus /etc/passwd: not a folder"});
  expectSays(cli("run --backend host --cases 1 --tier smoke --corpus /nonexistent/corpus"), exit_code::kUsage,
             {"--corpus /nonexistent/corpus: no such folder"});
  expectSays(shell("ULPCHECK_CORPUS=/etc/passwd " + std::string(ULPCHECK_CLI) + " run --backend host --cases 1"),
             exit_code::kUsage, {"ULPCHECK_CORPUS=/etc/passwd: not a folder"});
  // One not made yet is allowed (crashing cases go there), said even with --quiet.
  expectSays(shell("ULPCHECK_CORPUS=/nonexistent/corpus " + std::string(ULPCHECK_CLI) +
                   " run --backend host --op rmsnorm --kernel host_separate --cases 1 --tier smoke --no-save --quiet"),
             exit_code::kOk, {"no regression cases replayed: the corpus /nonexistent/corpus does not exist"});
  // An empty corpus is allowed (crashing cases are saved there), and said.
  const Scratch dir;
  expectSays(cli("run --backend host --op rmsnorm --kernel host_separate --cases 1 --tier smoke --no-save --corpus " +
                 dir.path().string()),
             exit_code::kOk, {"replayed 0 regression cases (" + dir.path().string() + " holds none)"});
}

TEST(Robustness, AFailingRunStopsCheckingWhatItHasDecided) {
  // The failure comes in the first cases; the failed (kernel, property)
  // cells are decided, not topped up for a minute to end BELOW TARGET.
  const Result r = cli("run --backend host --op rmsnorm --kernel host_bug_rstd_bf16 --seed 1 --no-save --no-corpus "
                       "--shrink-budget 2");
  expectSays(r, exit_code::kPropertyFailed, {"FAILED accuracy"});
  EXPECT_EQ(r.output.find("BELOW TARGET"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("topping up"), std::string::npos) << r.output;
}

TEST(Robustness, ARunBelowItsTargetIsNotAPass) {
  // Five cases cannot give every cell six judged ones: BELOW TARGET, exit 7.
  expectSays(cli("run --backend host --op rmsnorm --kernel host_separate --cases 5 --per-cell 6 --tier smoke --seed 1 "
                 "--no-save --no-corpus"),
             exit_code::kNothingJudged, {"BELOW TARGET"});
  // Unless the time budget the user gave cut it short, which the run says.
  expectSays(cli("run --backend host --op rmsnorm --kernel host_separate --per-cell 1000 --time-budget 1 --tier smoke "
                 "--seed 1 --no-save --no-corpus"),
             exit_code::kOk, {"BELOW TARGET", "time budget reached"});
}

TEST(Robustness, ReportPathsAreCheckedBeforeTheCampaignRuns) {
  const Scratch dir;
  for (const std::string option : {"--html", "--junit", "--json"}) {
    Result r = cli("run --backend host --cases 50 --tier smoke --no-save " + option + " " + dir.path().string());
    expectSays(r, exit_code::kUsage, {option, "is a folder"});
    EXPECT_EQ(r.output.find("generated cases"), std::string::npos) << "refused before the campaign\n" << r.output;
    r = cli("run --backend host --cases 50 --tier smoke --no-save " + option + " " + (dir / "missing/report.out"));
    expectSays(r, exit_code::kUsage, {option, "does not exist"});
  }
}

TEST(Robustness, ACaseFileReplaysWhereverItWasCopied) {
  // Copied out of the corpus, or saved under ./ulpcheck-corpus: the case line is the case.
  const Scratch dir;
  const std::string text = "# a copy\nop=rmsnorm kernel=host_bug_bf16_rowsum dtype=fp32 M=1 N=1\n";
  writeFile(dir.path() / "x.case", text);
  expectSays(cli("repro " + (dir / "x.case") + " --property accuracy"), exit_code::kPropertyFailed, {"FAIL"});
  writeFile(dir.path() / "ulpcheck-corpus/rmsnorm/accuracy/crashing/y.case", text);
  expectSays(shell("cd " + dir.path().string() + " && " + ULPCHECK_CLI +
                   " repro ulpcheck-corpus/rmsnorm/accuracy/crashing/y.case --property accuracy"),
             exit_code::kPropertyFailed, {"FAIL"});
  expectSays(cli("repro " + (dir / "missing.case")), exit_code::kBadCase, {"missing.case: no such case file"});
}

TEST(Robustness, ABitwiseFailureIsShownAsTwoRunsBitsNotAsAnErrorBudget) {
  // batch_invariance's finding is one run's bits against another's: no
  // exact value, ulp or budget columns of zeros.
  const Result r = cli("repro 'op=rmsnorm kernel=host_bug_threads_from_m dtype=fp32 M=1 N=37 seed=0x2' --property "
                       "batch_invariance");
  expectSays(r, exit_code::kPropertyFailed, {"reference run", "bits / inputs", "0xbf564668 vs 0xbf564669"});
  EXPECT_EQ(r.output.find("correctly rounded"), std::string::npos) << r.output;
}

TEST(Robustness, FaultsAreCountedAsFaultsAndEveryFailingCaseIsCounted) {
  // More than five faults: five recorded, all counted, none "judged with full power".
  const Result r = cli("run --backend host --plugin " + kGood +
                       " --kernel test_rmsnorm_segfaults_at_n7 --cases 400 "
                       "--tier smoke --seed 11 --no-save --no-corpus --no-shrink --case-timeout 5");
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("faulted (the kernel crashed, hung or returned an error)"), std::string::npos) << r.output;
  const size_t at = r.output.find("failing cases (5 recorded above");
  EXPECT_NE(at, std::string::npos) << r.output;
}

TEST(Robustness, ACutShortRunsPageDoesNotInventAFailureAndKeepsRegressionMessages) {
  const Scratch dir;
  const fs::path json = dir.path() / "run.jsonl";
  interruptOnceWritten(longRun(json), json, 40, SIGKILL, dir.path() / "run.log");
  expectSays(cli("report " + json.string() + " -o " + (dir / "page.html")), exit_code::kOk, {"HTML report"});
  const std::string page = readFile(dir.path() / "page.html");
  EXPECT_NE(page.find("CUT SHORT: no failure among"), std::string::npos) << page.substr(0, 3000);
  EXPECT_EQ(page.find("1 failing"), std::string::npos);
  // A failing regression case in a run cut short keeps its message on the page.
  writeFile(dir.path() / "corpus/rmsnorm/accuracy/regression/r.case",
            "op=rmsnorm kernel=host_separate dtype=fp32 M=1 N=1\n");
  const fs::path json2 = dir.path() / "run2.jsonl";
  interruptOnceWritten(
      {"run",         "--backend", "host",        "--op",    "rmsnorm",  "--kernel",       "host_bug_bf16_rowsum",
       "--property",  "accuracy",  "--cases",     "20000",   "--tier",   "smoke",          "--seed",
       "5",           "--no-save", "--no-shrink", "--quiet", "--corpus", (dir / "corpus"), "--json",
       json2.string()},
      json2, 3, SIGKILL, dir.path() / "run2.log");
  expectSays(cli("report " + json2.string() + " -o " + (dir / "page2.html")), exit_code::kOk, {"HTML report"});
  const std::string page2 = readFile(dir.path() / "page2.html");
  EXPECT_NE(page2.find("FAILED accuracy (regression)"), std::string::npos) << page2.substr(0, 3000);
  EXPECT_NE(page2.find("elements over budget"), std::string::npos) << "its message\n" << page2.substr(0, 4000);
}

TEST(Robustness, TheHelpAndTheRepoLinesSayWhatTheBinaryDoes) {
  // --workers' and --concurrent-cases' defaults as workerLayout and the CLI compute them.
  expectSays(cli("run --help"), exit_code::kOk,
             {"default on the GPU: one per GPU used", fmt::format("at most {}", kMaxConcurrentCases)});
  // --judge auto's threshold, as accuracyOnGpu applies it, on every command that judges.
  for (const std::string command : {"run", "repro", "mutants"})
    expectSays(cli(command + " --help"), exit_code::kOk,
               {fmt::format("cases of 2^{} elements and more", std::countr_zero(uint64_t(kGpuJudgeMinElements)))});
  // The footer's exit codes are the values the binary returns for each cause.
  expectSays(cli("run --help"), exit_code::kOk,
             {fmt::format("exit codes: {} all passed", exit_code::kOk),
              fmt::format("{} a property failed", exit_code::kPropertyFailed),
              fmt::format("{} bad arguments", exit_code::kUsage),
              fmt::format("{} malformed case, corpus or JSON-lines file", exit_code::kBadCase),
              fmt::format("{} a fault that ended the run", exit_code::kRuntimeError),
              fmt::format("{} a case hung", exit_code::kHang),
              fmt::format("{} nothing matched the selection", exit_code::kNothingRan),
              fmt::format("{} judged too little", exit_code::kNothingJudged)});
  // A repro line names the binary that ran by its path: pasted, it runs.
  const Result r = cli(
      "run --backend host --kernel host_bug_drop_tail --property memory_safety --cases 50 --tier smoke "
      "--seed 9 --no-save --no-shrink --no-corpus");
  const std::string args = testing::reproArgsIn(r.output);
  ASSERT_FALSE(args.empty()) << r.output;
  expectSays(shell(std::string(ULPCHECK_CLI) + " " + args), exit_code::kPropertyFailed, {"memory_safety"});
  // A misspelled command is named.
  expectSays(cli("rnu --cases 3"), exit_code::kUsage, {"'rnu' is not a command", "run"});
  // --workers 0 is not "the default".
  expectSays(cli("run --backend host --workers 0 --cases 1"), exit_code::kUsage, {"--workers 0"});
}

}  // namespace
}  // namespace ulpcheck
