#include "oracles/oracle_mode.h"

#include <cmath>

#include <fmt/format.h>

namespace ulpcheck {

namespace {

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

}  // namespace

const char* oracleModeName(OracleMode m) {
  switch (m) {
    case OracleMode::Fast: return "fast";
    case OracleMode::Mpfr: return "mpfr";
    case OracleMode::Audit: return "audit";
  }
  return "?";
}

std::optional<OracleMode> parseOracleMode(std::string_view name) {
  for (OracleMode m : {OracleMode::Fast, OracleMode::Mpfr, OracleMode::Audit})
    if (name == oracleModeName(m)) return m;
  return std::nullopt;
}

const char* judgeWhereName(JudgeWhere w) {
  switch (w) {
    case JudgeWhere::Auto: return "auto";
    case JudgeWhere::Host: return "host";
    case JudgeWhere::Gpu: return "gpu";
  }
  return "?";
}

std::optional<JudgeWhere> parseJudgeWhere(std::string_view name) {
  for (JudgeWhere w : {JudgeWhere::Auto, JudgeWhere::Host, JudgeWhere::Gpu})
    if (name == judgeWhereName(w)) return w;
  return std::nullopt;
}

FastOracleCounts& oracleCounts() {
  static FastOracleCounts counts;
  return counts;
}

void auditReferences(const char* op, const std::vector<const ReferenceTensor*>& mpfr,
                     const std::vector<const ReferenceTensor*>& fast) {
  if (mpfr.size() != fast.size()) throw OracleDisagreement(fmt::format("oracle audit, {}: tensor counts differ", op));
  for (size_t t = 0; t < mpfr.size(); ++t) {
    const ReferenceTensor &a = *mpfr[t], &b = *fast[t];
    if (a.name != b.name || a.dtype != b.dtype || a.rows != b.rows || a.cols != b.cols ||
        a.magnitude.size() != b.magnitude.size())
      throw OracleDisagreement(fmt::format("oracle audit, {}: tensor {} differs in shape or kind", op, a.name));
    for (size_t e = 0; e < a.exact.size(); ++e) {
      const bool magnitude_differs = !a.magnitude.empty() && !same(a.magnitude[e], b.magnitude[e]);
      if (same(a.exact[e], b.exact[e]) && same(a.budget[e], b.budget[e]) && !magnitude_differs) continue;
      const int64_t r = int64_t(e) / a.cols, c = int64_t(e) % a.cols;
      throw OracleDisagreement(fmt::format(
          "oracle audit, {}: {}[{},{}]: MPFR exact {:a} budget {:a}{}, fast exact {:a} budget {:a}{}", op, a.name, r, c,
          a.exact[e], a.budget[e], a.magnitude.empty() ? "" : fmt::format(" magnitude {:a}", a.magnitude[e]),
          b.exact[e], b.budget[e], b.magnitude.empty() ? "" : fmt::format(" magnitude {:a}", b.magnitude[e])));
    }
  }
}

}  // namespace ulpcheck
