// Helpers shared by the ctest suites: run a campaign quietly and explain any
// failure in the gtest message, with its repro command.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "core/device.h"
#include "harness/report/table.h"
#include "harness/runner/campaign.h"
#include "harness/runner/mutants.h"
#include "properties/generators.h"

/// In a test's body: skips it, saying why, with fewer than n GPUs.
#define ULPCHECK_REQUIRE_GPUS(n)                                                        \
  do {                                                                                  \
    if (queryDevice().count < (n))                                                      \
      GTEST_SKIP() << "needs " << (n) << " GPUs, " << queryDevice().count << " visible" \
                   << (queryDevice().available ? "" : ": " + queryDevice().reason);     \
  } while (0)

namespace ulpcheck::testing {

inline ExecContext hostContext() { return ExecContext{Backend::Host, 132, &ThreadPool::shared()}; }

inline ExecContext cudaContext() { return ExecContext{Backend::Cuda, queryDevice().sm_count, &ThreadPool::shared()}; }

/// The GPU with every run launched beside a random load on another stream.
inline ExecContext perturbedCudaContext() {
  ExecContext ctx = cudaContext();
  ctx.perturb_schedule = true;
  return ctx;
}

/// The op a variant belongs to. Tests name variants alone, so a name two ops
/// share is an error here.
inline std::string opOf(const std::string& kernel) {
  std::string op;
  for (const KernelInfo& k : kernelCatalog()) {
    if (k.name != kernel) continue;
    if (!op.empty() && op != k.op) throw std::logic_error("kernel name '" + kernel + "' is registered by two ops");
    op = k.op;
  }
  if (op.empty()) throw std::logic_error("no kernel variant '" + kernel + "'");
  return op;
}

/// Of `count` cases of `kernel` as a campaign of `tier` draws them (seed
/// `seed`), those `keep` accepts (a GPU judge's tests: those it models).
template <typename Keep>
std::vector<CaseSpec> drawnCases(const std::string& kernel, Tier tier, uint64_t seed, int count, Keep keep) {
  gen::CaseOptions o;
  o.op = opOf(kernel);
  o.kernels = {kernel};
  o.tier = tier;
  rc::Random random(seed);
  std::vector<CaseSpec> cases;
  for (int n = 0; n < count; ++n) {
    const CaseSpec c = gen::caseSpec(o)(random.split(), rc::kNominalSize).value();
    if (keep(c)) cases.push_back(c);
  }
  return cases;
}

/// The correct (non-mutant) variants of every op on `backend`.
inline std::vector<std::string> correctKernels(Backend backend) {
  std::vector<std::string> out;
  for (const OpAdapter* op : opRegistry())
    for (auto& k : defaultKernels(op->name(), backend)) out.push_back(std::move(k));
  return out;
}

/// A campaign of `kernels` (of one op) that neither replays nor writes the
/// corpus (tests are hermetic).
inline CampaignOptions hermeticCampaign(std::vector<std::string> kernels, int64_t cases, uint64_t seed, Tier tier) {
  CampaignOptions o;
  o.op = opOf(kernels.at(0));
  o.kernels = std::move(kernels);
  o.cases = cases;
  o.seed = seed;
  o.tier = tier;
  o.replay_corpus = false;
  o.save_failures = false;
  return o;
}

/// A campaign of one kernel, hermetic.
inline CampaignResult runQuietly(const std::string& kernel, int64_t cases, uint64_t seed, Tier tier,
                                 const ExecContext& exec, std::vector<std::string> properties = {}) {
  CampaignOptions o = hermeticCampaign({kernel}, cases, seed, tier);
  o.properties = std::move(properties);
  return runCampaign(o, exec);
}

/// Only the regression corpus, replayed on one kernel.
inline CampaignResult replayCorpus(const std::string& kernel, const ExecContext& exec) {
  CampaignOptions o;
  o.op = opOf(kernel);
  o.kernels = {kernel};
  o.cases = 0;
  o.save_failures = false;
  return runCampaign(o, exec);
}

inline std::string explain(const CampaignResult& r) {
  std::string out = formatCampaignTable(r) + formatJudgedSummary(r);
  for (const auto& f : r.failures) out += formatFailure(f);
  if (!r.fatal_error.empty()) out += "FATAL: " + r.fatal_error + "\n";
  return out;
}

/// A campaign that passed and could have failed: no fatal error (a sticky
/// fault ends a campaign early), no failure, and every (kernel, property)
/// that applies judged at least `min_judged` cases, neither skipped (out of
/// memory, not runnable here) nor inconclusive.
inline void expectPassedAndJudged(const CampaignResult& r, const std::string& what, int64_t min_judged) {
  EXPECT_TRUE(r.fatal_error.empty()) << what << ": " << r.fatal_error;
  EXPECT_TRUE(r.failures.empty()) << what << "\n" << explain(r);
  EXPECT_FALSE(r.judged.empty()) << what << ": no property applies";
  for (const auto& [pair, n] : r.judged)
    EXPECT_GE(n, min_judged) << what << ": " << pair.second << " judged only " << n << " cases of " << pair.first
                             << "\n"
                             << explain(r);
}

/// The kill matrix of every mutant of `backend` as CI runs it: default tier
/// (some bugs live only at large M, as Liger-Kernel PR #950's M >= 32768),
/// each mutant's campaign ending at its declared kill. No controls: the
/// correct variants have suites of their own. A mutant gets a number of
/// cases, not seconds: under `ctest -j4` four suites share the GPU and the
/// cores, and a 30 s budget once ran out before a kill on the H100 that the
/// same cases make alone (the seconds are a guard against a hang only).
inline KillMatrix ciKillMatrix(Backend backend, const ExecContext& exec) {
  KillMatrixOptions o;
  o.backend = backend;
  o.max_cases = 3000;
  o.seconds_per_mutant = 600;
  o.stop_at_declared_kill = true;
  o.controls = false;
#if defined(ULPCHECK_CLI)
  o.cli = ULPCHECK_CLI;  // each kill replays through `ulpcheck repro`, as a user would run it
#endif
  o.seed = 0x6d7574;
  o.tier = Tier::Default;
  return runKillMatrix(o, exec);
}

/// Every mutant killed by the property it declares, its shrunk case no
/// larger than the one found and failing again when replayed alone (a race's
/// case fails again with some probability only: it is reported, not required).
inline void expectEveryMutantKilledAndShrunk(const KillMatrix& m) {
  EXPECT_EQ(m.exitCode(), 0) << formatKillMatrix(m);
  for (const MutantRow& row : m.rows) {
    ASSERT_TRUE(row.killedAsDeclared()) << row.mutant.name << " survived " << row.mutant.caught_by << "\n"
                                        << formatKillMatrix(m);
    const KillCell& cell = row.by_property.at(row.mutant.caught_by);
    const FailureRecord& f = *cell.kill;
    // Shrunk: never larger than found (a large-M bug keeps its M, so no fixed bound).
    EXPECT_LE(f.shrunk.M * f.shrunk.ld, f.original.M * f.original.ld) << row.mutant.name;
    EXPECT_TRUE(cell.replays || cell.intermittent) << reproCommand(f);
  }
}

/// Runs campaign `o` with its cases checked one at a time and `at_once` at a
/// time, and expects the same results: the same cases, the same failures
/// (same case, same shrunk case), the same tallies per cell and the same
/// verdict and summary for every check. A nondeterministic variant's
/// determinism checks and its error figures change from run to run by
/// contract, so only their count is compared. Returns the two results.
inline std::pair<CampaignResult, CampaignResult> expectSameResultsAtOnce(CampaignOptions o, const ExecContext& exec,
                                                                         int at_once) {
  struct Check {
    std::string verdict, summary;
  };
  const auto stable = [&](const std::string& kernel) {
    return OpAdapter::requireKernel(o.op, kernel).contracts.deterministic;
  };
  auto run = [&](int n, std::map<std::pair<int64_t, std::string>, Check>& checks) {
    CampaignOptions with = o;
    with.concurrent_cases = n;
    std::vector<nlohmann::json> records;
    const auto json = JsonlWriter::keeping([&](const nlohmann::json& r) { records.push_back(r); });
    with.json = json.get();
    CampaignResult r = runCampaign(with, exec);
    for (const nlohmann::json& j : records) {
      if (j["type"] != "case") continue;
      const bool by_contract = !stable(j["case"]["kernel"]) && j["property"] == "determinism";
      checks[{j["index"].get<int64_t>(), j["property"].get<std::string>()}] =
          by_contract ? Check{} : Check{j["outcome"]["verdict"], j["outcome"]["summary"]};
    }
    return r;
  };
  std::map<std::pair<int64_t, std::string>, Check> one, many;
  const CampaignResult a = run(1, one), b = run(at_once, many);
  EXPECT_TRUE(a.fatal_error.empty() && b.fatal_error.empty()) << a.fatal_error << b.fatal_error;
  EXPECT_EQ(a.cases_run, b.cases_run);
  EXPECT_EQ(a.topped_up_cases, b.topped_up_cases);
  EXPECT_EQ(one.size(), many.size());
  for (const auto& [key, check] : one) {
    const auto it = many.find(key);
    if (it == many.end()) {
      ADD_FAILURE() << "case " << key.first << " " << key.second << " checked one at a time only";
      continue;
    }
    EXPECT_EQ(check.verdict, it->second.verdict) << "case " << key.first << " " << key.second;
    EXPECT_EQ(check.summary, it->second.summary) << "case " << key.first << " " << key.second;
  }
  EXPECT_EQ(a.failures.size(), b.failures.size()) << explain(a) << explain(b);
  for (size_t f = 0; f < std::min(a.failures.size(), b.failures.size()); ++f) {
    EXPECT_EQ(a.failures[f].property, b.failures[f].property);
    EXPECT_EQ(a.failures[f].case_index, b.failures[f].case_index);
    EXPECT_EQ(toCaseString(a.failures[f].shrunk), toCaseString(b.failures[f].shrunk));
  }
  EXPECT_EQ(a.cells.size(), b.cells.size());
  for (const auto& [cell, x] : a.cells) {
    const auto& [kernel, property, dtype] = cell;
    const CellStats& y = b.cells.at(cell);
    const std::string at = kernel + " " + property + " " + dtype;
    EXPECT_EQ(x.cases, y.cases) << at;
    if (!stable(kernel) && property == "determinism") continue;
    EXPECT_EQ(x.passed, y.passed) << at;
    EXPECT_EQ(x.failed, y.failed) << at;
    EXPECT_EQ(x.expected, y.expected) << at;
    EXPECT_EQ(x.inconclusive, y.inconclusive) << at;
    EXPECT_EQ(x.skipped, y.skipped) << at;
    if (stable(kernel)) {
      EXPECT_EQ(x.max_ratio, y.max_ratio) << at;
    }
  }
  return {a, b};
}

/// Skips the calling test, printing why, when no GPU is usable.
#define ULPCHECK_REQUIRE_GPU()                                                                                \
  do {                                                                                                        \
    if (!::ulpcheck::queryDevice().available) GTEST_SKIP() << "no GPU: " << ::ulpcheck::queryDevice().reason; \
  } while (0)

}  // namespace ulpcheck::testing
