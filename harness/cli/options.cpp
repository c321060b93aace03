#include "harness/cli/options.h"

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include <fmt/format.h>

#include "core/datagen.h"
#include "core/device.h"
#include "core/memory_limit.h"
#include "core/parallel.h"
#include "harness/runner/corpus.h"
#include "harness/runner/exit_codes.h"

namespace ulpcheck::cli {

int64_t parseCount(const char* option, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || errno == ERANGE || v < 0)
    throw UsageError(fmt::format("{}: '{}' is not a count >= 0 (or auto)", option, text));
  return v;
}

std::pair<int, int> parseShard(const std::string& text) {
  if (text.empty()) return {0, 1};
  int i = 0, n = 0;
  char slash = 0, extra = 0;
  if (std::sscanf(text.c_str(), "%d%c%d%c", &i, &slash, &n, &extra) != 3 || slash != '/' || n < 1 || i < 1 || i > n)
    throw UsageError(fmt::format("--shard: '{}' is not i/n with 1 <= i <= n (e.g. 2/4)", text));
  return {i - 1, n};
}

uint64_t parseSeed(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 0);
  if (text.empty() || *end || errno == ERANGE || text[0] == '-')
    throw UsageError(fmt::format("--seed: '{}' is not an unsigned 64-bit integer (decimal or 0x hex)", text));
  return v;
}

std::vector<DType> parseDTypes(const std::vector<std::string>& names) {
  std::vector<DType> out;
  for (const auto& n : names) {
    const auto t = parseDType(n);
    if (!t) throw UsageError(fmt::format("--dtype: '{}' is not one of fp32, fp16, bf16", n));
    out.push_back(*t);
  }
  return out;
}

Tier parseTier(const std::string& name) {
  for (Tier t : {Tier::Smoke, Tier::Default, Tier::Nightly})
    if (name == tierName(t)) return t;
  throw UsageError(fmt::format("--tier: '{}' is not one of smoke, default, nightly", name));
}

OracleSettings oracleSettings(std::string oracle, std::string judge) {
  OracleSettings s;
  const char* env_oracle = std::getenv("ULPCHECK_ORACLE");
  const char* env_judge = std::getenv("ULPCHECK_JUDGE");
  const std::string oracle_from = oracle.empty() ? "ULPCHECK_ORACLE=" : "--oracle ";
  const std::string judge_from = judge.empty() ? "ULPCHECK_JUDGE=" : "--judge ";
  if (oracle.empty() && env_oracle) oracle = env_oracle;
  if (judge.empty() && env_judge) judge = env_judge;
  if (!oracle.empty()) {
    const auto mode = parseOracleMode(oracle);
    if (!mode) throw UsageError(fmt::format("{}'{}' is not one of fast, mpfr, audit", oracle_from, oracle));
    s.mode = *mode;
  }
  if (!judge.empty()) {
    const auto where = parseJudgeWhere(judge);
    if (!where) throw UsageError(fmt::format("{}'{}' is not one of auto, host, gpu", judge_from, judge));
    s.judge = *where;
  }
  return s;
}

namespace {

/// $ULPCHECK_MAX_HELD_REFERENCE: a size as $ULPCHECK_MAX_MEMORY's, or 0;
/// nothing where it is not set or not one.
std::optional<uint64_t> heldReferenceVariable() {
  const char* text = std::getenv("ULPCHECK_MAX_HELD_REFERENCE");
  if (!text || !*text) return std::nullopt;
  if (std::string_view(text) == "0") return 0;
  if (const uint64_t bytes = parseMemorySize(text)) return bytes;
  return std::nullopt;
}

}  // namespace

ExecContext execContext(const std::string& backend, bool perturb_schedule, const OracleSettings& oracle, bool quiet) {
  const DeviceInfo& dev = queryDevice();
  ExecContext ctx;
  ctx.pool = &ThreadPool::shared();
  ctx.oracle = oracle.mode;
  ctx.judge = oracle.judge;
  if (backend == "cuda" || (backend == "auto" && dev.available)) {
    if (!dev.available) throw UsageError(fmt::format("the cuda backend needs a GPU: {}", dev.reason));
    ctx.backend = Backend::Cuda;
    ctx.sm_count = dev.sm_count;
    setGenerateOnDevice(true);  // the same bits, made on the GPU for large inputs (core/datagen.h)
    if (!quiet)
      fmt::print("# backend: cuda — {} (sm_{}{}, {} SMs, {:.1f} GiB); oracle on {} host threads\n", dev.name,
                 dev.cc_major, dev.cc_minor, dev.sm_count, dev.total_bytes / 1073741824.0, ctx.pool->size());
  } else if (backend == "host" || backend == "auto") {
    ctx.backend = Backend::Host;
    if (!quiet)
      fmt::print("# backend: host port on the CPU ({}); oracle on {} host threads\n",
                 dev.available ? "chosen with --backend host" : dev.reason, ctx.pool->size());
  } else {
    throw UsageError(fmt::format("--backend: '{}' is not one of auto, host, cuda", backend));
  }
  ctx.perturb_schedule = perturb_schedule;
  if (const std::optional<uint64_t> held = heldReferenceVariable()) ctx.max_held_reference_bytes = *held;
  if (perturb_schedule && !quiet)
    fmt::print("# schedule perturbation: {}\n",
               ctx.backend == Backend::Cuda ? "every run launches beside a random load on another stream"
                                            : "has no effect on the host backend (host ports run in program order)");
  return ctx;
}

void checkCorpusOption(const std::string& corpus) {
  std::error_code ec;
  const char* layout = "a corpus is a folder holding <op>/<property>/regression/ (replayed) and crashing/ (saved)";
  if (corpus.empty()) {
    // $ULPCHECK_CORPUS may name a corpus not made yet (crashing cases go
    // there, or to ./ulpcheck-corpus), but not a file.
    const char* env = std::getenv("ULPCHECK_CORPUS");
    if (env && *env && std::filesystem::exists(env, ec) && !std::filesystem::is_directory(env, ec))
      throw UsageError(fmt::format("ULPCHECK_CORPUS={}: not a folder ({})", env, layout));
    return;
  }
  if (!std::filesystem::exists(corpus, ec))
    throw UsageError(fmt::format("--corpus {}: no such folder ({}; create it, or leave --corpus out for {})", corpus,
                                 layout, defaultCorpusDir()));
  if (!std::filesystem::is_directory(corpus, ec))
    throw UsageError(fmt::format("--corpus {}: not a folder ({})", corpus, layout));
}

namespace {
/// The JSON lines are whole already; the kernel workers die with this
/// process (remote.cpp's Spawner).
void sayInterrupted(int sig) {
  const char* msg = sig == SIGINT ? "\nulpcheck: interrupted (SIGINT); every result measured so far is in the JSON "
                                    "lines, where --json was given\n"
                                  : "\nulpcheck: terminated (SIGTERM); every result measured so far is in the JSON "
                                    "lines, where --json was given\n";
  const ssize_t ignored = ::write(2, msg, std::strlen(msg));
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
}  // namespace

void sayWhenInterrupted() {
  // A signal the process was started ignoring (a background job's SIGINT) stays ignored.
  for (int sig : {SIGINT, SIGTERM})
    if (std::signal(sig, sayInterrupted) == SIG_IGN) std::signal(sig, SIG_IGN);
}

std::string thisProgram() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "ulpcheck";
  if (const char* path = std::getenv("PATH"))
    for (std::string_view rest = path; !rest.empty();) {
      const size_t colon = rest.find(':');
      const std::string dir(rest.substr(0, colon));
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
      if (!dir.empty() && fs::equivalent(fs::path(dir) / "ulpcheck", exe, ec)) return "ulpcheck";
    }
  const std::string s = exe.string();
  if (s.find_first_of(" '\"\\$`!*?;&|<>()") == std::string::npos) return s;
  std::string quoted = "'";
  for (char c : s) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

void checkMemoryLimitVariable() {
  if (const char* limit = std::getenv("ULPCHECK_MAX_MEMORY"); limit && *limit && !parseMemorySize(limit))
    throw UsageError(fmt::format("ULPCHECK_MAX_MEMORY='{}': give the host memory ulpcheck may use in bytes or with "
                                 "a K, M, G or T suffix (e.g. 64G)",
                                 limit));
  if (const char* held = std::getenv("ULPCHECK_MAX_HELD_REFERENCE"); held && *held && !heldReferenceVariable())
    throw UsageError(fmt::format("ULPCHECK_MAX_HELD_REFERENCE='{}': give the most memory a case's reference may hold "
                                 "whole in bytes or with a K, M, G or T suffix (e.g. 4G), or 0 to stream every case",
                                 held));
}

}  // namespace ulpcheck::cli
