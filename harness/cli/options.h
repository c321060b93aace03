// The CLI's edge: option text to typed values (a UsageError naming the
// option for text that is not one), the environment variables ulpcheck reads
// (here and nowhere else), the run's context, and the process's signals.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "oracles/oracle_mode.h"
#include "properties/generators.h"
#include "properties/op.h"

namespace ulpcheck::cli {

/// A count >= 0 given to `option`.
int64_t parseCount(const char* option, const std::string& text);
/// "--shard i/n" (1-based, as CI matrices number their jobs) to (i - 1, n); "" is (0, 1).
std::pair<int, int> parseShard(const std::string& text);
/// --seed: decimal or 0x hex.
uint64_t parseSeed(const std::string& text);
std::vector<DType> parseDTypes(const std::vector<std::string>& names);
Tier parseTier(const std::string& name);

/// The run's oracle and judge: --oracle and --judge (empty: not given), else
/// $ULPCHECK_ORACLE and $ULPCHECK_JUDGE.
OracleSettings oracleSettings(std::string oracle, std::string judge);

/// Throws UsageError for a $ULPCHECK_MAX_MEMORY that is not a size, or a
/// $ULPCHECK_MAX_HELD_REFERENCE that is neither a size nor 0 (the most a
/// case's per-row reference may hold whole before it is streamed:
/// ExecContext::max_held_reference_bytes, read by execContext).
void checkMemoryLimitVariable();

/// An explicit --corpus must be a folder: a file or a path that does not
/// exist would replay nothing and say nothing. Without one,
/// $ULPCHECK_CORPUS may name a folder not made yet, but not a file.
void checkCorpusOption(const std::string& corpus);

/// Where cases run (--backend: `auto` picks the GPU when one is usable),
/// with the run's oracle settings and schedule perturbation; said on
/// stdout unless `quiet`.
ExecContext execContext(const std::string& backend, bool perturb_schedule, const OracleSettings& oracle,
                        bool quiet = false);

/// On SIGINT or SIGTERM: one line saying why the run ends there, then the
/// signal's own end (its exit status).
void sayWhenInterrupted();

/// How printed repro commands name this program: `ulpcheck` where that is
/// this binary on PATH (an installed one), else its absolute path, so the
/// command works when pasted (the README's set-up leaves build/ulpcheck off PATH).
std::string thisProgram();

}  // namespace ulpcheck::cli
