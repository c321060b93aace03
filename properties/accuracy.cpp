// Property: every output element within its error budget of the MPFR oracle
// (|got - exact| <= budget), NaN only where the exact result is NaN, Inf only
// where the exact result is at or beyond overflow; and budgets sharp enough
// to have seen a gross error, or the case is inconclusive.
#include "properties/accuracy.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "harness/core/parallel.h"
#include "harness/core/phase_timer.h"

namespace ulpcheck {

namespace {

constexpr size_t kReportedFindings = 5;

double overflowThreshold(DType t) { return maxFinite(t) + 0.5 * ulpOf(t, maxFinite(t)); }

}  // namespace

namespace {

// Rows are judged in blocks of this many elements (at least one row), on the
// pool; each block keeps its own figures and worst findings, merged in
// block order, so every figure is the same whatever the thread count.
constexpr int64_t kJudgeBlockElements = int64_t{1} << 16;

struct BlockJudgment {
  TensorStats st;
  double sum_sq_ulp = 0;
  int64_t finite_count = 0, statistical_flags = 0;
  bool nontrivial = false;
  std::vector<Finding> failures, worst;
};

bool worse(const Finding& a, const Finding& b) { return a.ratio > b.ratio; }

/// Keeps the worst few of a list (at most 4x as many until the end).
void trimFindings(std::vector<Finding>& v, size_t keep) {
  if (v.size() <= keep) return;
  std::partial_sort(v.begin(), v.begin() + ptrdiff_t(keep), v.end(), worse);
  v.resize(keep);
}

void judgeRows(const ReferenceTensor& ref, const OutputTensor& out, int64_t row_begin, int64_t row_end,
               BlockJudgment& b) {
  for (int64_t r = row_begin; r < row_end; ++r)
    for (int64_t c = 0; c < ref.cols; ++c) {
      const int64_t i = r * ref.cols + c;
      // A black box on data its model fits is held to its probabilistic
      // budget (oracles/probabilistic.h), which is never above the rigorous one.
      const bool statistical = !ref.statistical_budget.empty();
      const double exact = ref.exact[i], rigorous = ref.budget[i], got = out.value(r, c);
      const double budget = statistical ? std::min(rigorous, ref.statistical_budget[i]) : rigorous;
      const double unit = ulpOf(ref.dtype, exact);
      Finding f{ref.name, r, c, got, exact, ref.correctlyRounded(i), 0, budget / unit, 0, "", ""};
      bool ok;
      if (!std::isfinite(exact) && std::isinf(rigorous)) {
        // The spec's own result overflowed (oracles/reference.h, anyNonFiniteWhereNotFinite).
        ok = !std::isfinite(got);
        f.note = ok ? "" : "finite where the spec's result is not (a saved statistic beyond the dtype's range)";
      } else if (std::isnan(exact)) {
        ok = std::isnan(got);
        f.note = ok ? "" : "exact result is NaN";
      } else if (std::isnan(got)) {
        ok = false;
        // The buffer's own dtype: saved statistics of T values are fp32 arrays (stats=T).
        const uint32_t bits = out.at(r, c), all_ones = out.dtype == DType::F32 ? 0xffffffffu : 0xffffu;
        f.note = bits == poisonBits(out.dtype) ? "never written (poison)"
                 : bits == all_ones ? "never written by the library (its allocator's memory was poisoned all ones)"
                                    : "NaN";
      } else if (std::isinf(got)) {
        ok = std::signbit(got) == std::signbit(exact) && std::fabs(exact) + budget >= overflowThreshold(ref.dtype);
        f.note = ok ? "" : "Inf where the exact result is finite";
      } else {
        ok = true;
      }
      const double err = std::isfinite(got) && std::isfinite(exact) ? std::fabs(got - exact) : INFINITY;
      f.ulp = ok && !std::isfinite(err) ? 0 : err / unit;
      // A budget of 0 (an output the spec determines exactly) admits only err == 0.
      f.ratio = (ok && !std::isfinite(err)) || err == 0.0 ? 0 : err / budget;
      if (ok && f.ratio > 1.0 && err <= rigorous) {
        f.note = fmt::format("over the probabilistic budget of a black box (within the rigorous one, {:.3g}x it): "
                             "a systematic error, not random rounding",
                             err / rigorous);
        ++b.statistical_flags;
      }
      ok = ok && f.ratio <= 1.0;
      TensorStats& st = b.st;
      // ulp@scale (properties/error_distribution.h): the error in ulps of the
      // element's scale; where even its terms are zero, of the smallest normal.
      const double scale = ref.magnitudeAt(i);
      const double scale_unit = ulpOf(ref.dtype, scale > 0 ? scale : minNormal(ref.dtype));
      st.errors.add(f.ratio, !std::isfinite(err) ? (ok ? 0.0 : INFINITY) : err / scale_unit, scale,
                    double(r) / double(ref.rows), double(c) / double(ref.cols));
      ++st.elements;
      if (std::isfinite(f.ulp)) {
        st.max_ulp = std::max(st.max_ulp, f.ulp);
        b.sum_sq_ulp += f.ulp * f.ulp;
        ++b.finite_count;
      }
      st.max_ratio = std::max(st.max_ratio, f.ratio);
      b.nontrivial |= exact != 0.0;
      if (std::isfinite(exact) && exact != 0.0) {
        // Sharp: the budget is below 1/64 of the element's magnitude, or
        // within one ulp of the output format there (a subnormal output
        // cannot carry 1/64 of itself; its budget is as sharp as the
        // format allows).
        ++st.nonzero;
        st.sharp += budget <= std::max(tolerance::kPowerErrorFraction * ref.magnitudeAt(i), unit);
      }
      // Only the worst few of each list are kept (an element is a finding
      // only if it could be among them).
      std::vector<Finding>& list = ok ? b.worst : b.failures;
      if (!ok) ++st.wrong;
      if (list.size() < kReportedFindings || f.ratio > list.back().ratio || !ok) {
        list.push_back(std::move(f));
        if (list.size() > 4 * kReportedFindings) trimFindings(list, kReportedFindings);
        if (ok) std::sort(list.begin(), list.end(), worse);
      }
    }
}

}  // namespace

Outcome judgeAccuracy(const RunResult& run, const std::vector<ReferenceTensor>& reference,
                      const DescribeInputs& describe) {
  const PhaseScope phase(Phase::Judge);
  Outcome o;
  std::vector<Finding> failures, worst;
  bool nontrivial = false;
  int64_t statistical_flags = 0;

  for (const ReferenceTensor& ref : reference) {
    const OutputTensor* out = run.find(ref.name);
    if (!out) {
      o.verdict = Verdict::Fail;
      o.summary = fmt::format("the kernel produced no output '{}'", ref.name);
      return o;
    }
    const int64_t rows_per_block = std::max<int64_t>(1, kJudgeBlockElements / std::max<int64_t>(ref.cols, 1));
    const int64_t blocks = (ref.rows + rows_per_block - 1) / rows_per_block;
    std::vector<BlockJudgment> judged(static_cast<size_t>(blocks));
    ThreadPool::shared().forChunks(blocks, [&](unsigned, int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k)
        judgeRows(ref, *out, k * rows_per_block, std::min(ref.rows, (k + 1) * rows_per_block), judged[size_t(k)]);
    });
    TensorStats st;
    st.tensor = ref.name;
    double sum_sq_ulp = 0;
    int64_t finite_count = 0;
    for (BlockJudgment& b : judged) {
      st.elements += b.st.elements, st.wrong += b.st.wrong, st.nonzero += b.st.nonzero, st.sharp += b.st.sharp;
      st.max_ulp = std::max(st.max_ulp, b.st.max_ulp);
      st.max_ratio = std::max(st.max_ratio, b.st.max_ratio);
      st.errors.merge(b.st.errors);
      sum_sq_ulp += b.sum_sq_ulp;
      finite_count += b.finite_count;
      statistical_flags += b.statistical_flags;
      nontrivial |= b.nontrivial;
      for (const auto& [from, into] : {std::make_pair(&b.failures, &failures), std::make_pair(&b.worst, &worst)}) {
        trimFindings(*from, kReportedFindings);
        into->insert(into->end(), from->begin(), from->end());
        trimFindings(*into, 4 * kReportedFindings);
      }
    }
    st.rms_ulp = finite_count ? std::sqrt(sum_sq_ulp / finite_count) : 0;
    o.stats.push_back(st);
  }

  auto& shown = failures.empty() ? worst : failures;
  std::sort(shown.begin(), shown.end(), [](const Finding& a, const Finding& b) { return a.ratio > b.ratio; });
  if (shown.size() > kReportedFindings) shown.resize(kReportedFindings);
  for (Finding& f : shown) f.inputs = describe(f.tensor, f.row, f.col);
  o.findings = shown;

  int64_t wrong = 0;
  double max_ratio = 0;
  for (const auto& s : o.stats) {
    wrong += s.wrong;
    max_ratio = std::max(max_ratio, s.max_ratio);
  }
  // The tensors whose budgets could not have seen an error of
  // kPowerErrorFraction of their values in most elements.
  std::string weak;
  for (const auto& s : o.stats)
    if (s.nonzero && s.power() < tolerance::kMinTensorPower)
      weak += fmt::format("{}{} {:.0f}%", weak.empty() ? "" : ", ", s.tensor, 100.0 * s.power());
  if (wrong) {
    o.verdict = Verdict::Fail;
    const Finding& f = o.findings.front();
    o.summary = fmt::format("{} elements over budget{}; worst {}[{},{}] = {} vs exact {} ({:.3g} ulp, {:.3g}x budget){}",
                            wrong,
                            statistical_flags
                                ? fmt::format(" ({} over the probabilistic budget only: false-alarm probability "
                                              "<= {:g} per case)",
                                              statistical_flags, tolerance::kStatisticalFalseAlarm)
                                : "",
                            f.tensor, f.row, f.col, hexFloat(f.got), hexFloat(f.exact), f.ulp, f.ratio,
                            f.note.empty() ? "" : " " + f.note);
  } else if (!nontrivial) {
    // Never a vacuous pass: a reference of all zeros (all-zero inputs, say a
    // one-row case of zero or signed-zero partials) proves nothing about the
    // arithmetic, so the case does not count as a pass.
    o.verdict = Verdict::Inconclusive;
    o.summary = "vacuous case: every exact output is zero";
  } else if (!weak.empty()) {
    o.verdict = Verdict::Inconclusive;
    o.summary = fmt::format("all within budget (max {:.3g} of budget), but budgets admit errors of 1/{:g} of the value "
                            "in most elements: power (elements that would show such an error) {}",
                            max_ratio, 1.0 / tolerance::kPowerErrorFraction, weak);
  } else {
    o.summary = fmt::format("all within budget (max {:.3g} of budget)", max_ratio);
  }
  return o;
}

bool statisticalModelHolds(const CaseSpec& c) {
  // dy is a zero-mean normal in every op; x must be one too (Normal draws a
  // zero mean), with or without zeros mixed in.
  const bool normal = c.x.kind == Dist::Normal || c.x.kind == Dist::ZeroRows || c.x.kind == Dist::SignedZeros;
  return normal && c.x.mean == 0.0;
}

namespace {

Outcome checkAccuracy(CaseContext& ctx) {
  return judgeAccuracy(ctx.baseRun(), ctx.reference(), [&](const std::string& tensor, int64_t row, int64_t col) {
    return ctx.op().describeInputs(ctx.spec(), tensor, row, col);
  });
}

const bool registered = registerProperty(
    {"accuracy", "every element within its condition-aware error budget of the MPFR oracle", checkAccuracy});

}  // namespace
}  // namespace ulpcheck
