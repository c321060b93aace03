// Which oracle computes the references: the certified fast path (default),
// MPFR only, or both with their results compared (the audit). The fast path
// gives bitwise the MPFR path's references (oracles/rmsnorm.cpp, "The
// certified fast path"), so the mode changes time, never a verdict; the
// audit is how that is checked.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "oracles/reference.h"

namespace ulpcheck {

enum class OracleMode { Fast, Mpfr, Audit };

const char* oracleModeName(OracleMode m);
std::optional<OracleMode> parseOracleMode(std::string_view name);

/// Where accuracy is judged: on the host (the oracle's references, then the
/// judge over downloaded outputs), or on the GPU (oracles/rmsnorm_device.h:
/// inputs generated, oracle and judge run where the outputs are; the same
/// verdicts, `--oracle audit` compares them), for the cases the GPU path
/// models. Auto: the GPU for cases of kGpuJudgeMinElements elements and up,
/// where the host's pass over the tensors is what takes the time.
enum class JudgeWhere { Auto, Host, Gpu };
inline constexpr int64_t kGpuJudgeMinElements = int64_t{1} << 20;

const char* judgeWhereName(JudgeWhere w);
std::optional<JudgeWhere> parseJudgeWhere(std::string_view name);

/// A run's choice of oracle and judge. It travels in the run's context
/// (ExecContext, properties/op.h); the CLI makes it from `--oracle` and
/// `--judge`, or $ULPCHECK_ORACLE and $ULPCHECK_JUDGE, at the edge.
struct OracleSettings {
  OracleMode mode = OracleMode::Fast;
  JudgeWhere judge = JudgeWhere::Auto;
};

/// How many reference elements each path produced.
struct FastOracleCounts {
  std::atomic<int64_t> fast{0};               // decided by the double words
  std::atomic<int64_t> fell_back{0};          // recomputed by MPFR: the double words did not decide them
  std::atomic<int64_t> mpfr_only{0};          // a spec the fast path does not model (e.g. rounding=llama)
  std::atomic<int64_t> gpu_judge_audited{0};  // cases the audit judged on the host and the GPU alike
  std::atomic<int64_t> streamed{0};           // of the elements above, made again a block of rows at a time when judged
  std::atomic<int64_t> mpfr_rows{0};          // rows sent to MPFR whole (their elements are in fell_back; RMSNorm's)
};
FastOracleCounts& oracleCounts();

/// The fast and the MPFR oracle disagreed (only the audit raises it).
struct OracleDisagreement : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws OracleDisagreement unless each pair of tensors has the same shape
/// and, per element, the same exact value, budget and magnitude (== on
/// doubles: the sign of an exact zero is not compared; no verdict reads it).
void auditReferences(const char* op, const std::vector<const ReferenceTensor*>& mpfr,
                     const std::vector<const ReferenceTensor*>& fast);

}  // namespace ulpcheck
