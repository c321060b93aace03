// Property: every output element within its error budget of the MPFR oracle
// (|got - exact| <= budget), NaN only where the exact result is NaN, Inf only
// where the exact result is at or beyond overflow; and budgets sharp enough
// to have seen a gross error, or the case is inconclusive.
#include "properties/accuracy.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>

#include "core/parallel.h"
#include "core/phase_timer.h"
#include "oracles/oracle_mode.h"

namespace ulpcheck {

namespace {

double overflowThreshold(DType t) { return maxFinite(t) + 0.5 * ulpOf(t, maxFinite(t)); }

// Rows are judged in blocks of this many elements (at least one row), on the
// pool; each block keeps its own figures and worst findings, merged in
// block order, so every figure is the same whatever the thread count.
constexpr int64_t kJudgeBlockElements = int64_t{1} << 16;

/// The order of findings, worst first: err/budget, then tensor, row and
/// column, so that ties pick the same few findings whoever judges (the GPU
/// judge re-judges on the host the rows that hold them).
bool worse(const Finding& a, const Finding& b) {
  if (a.ratio != b.ratio) return a.ratio > b.ratio;
  return std::tie(a.tensor, a.row, a.col) < std::tie(b.tensor, b.row, b.col);
}

/// Keeps the worst few of a list (at most 4x as many until the end).
void trimFindings(std::vector<Finding>& v, size_t keep) {
  if (v.size() <= keep) return;
  std::partial_sort(v.begin(), v.begin() + ptrdiff_t(keep), v.end(), worse);
  v.resize(keep);
}

/// The worst few of `from` joined to `into` (which keeps at most 4x as many).
void addFindings(std::vector<Finding>& from, std::vector<Finding>& into) {
  trimFindings(from, kReportedFindings);
  into.insert(into.end(), from.begin(), from.end());
  trimFindings(into, 4 * kReportedFindings);
}

}  // namespace

void TensorJudgment::merge(TensorJudgment&& b) {
  st.elements += b.st.elements, st.wrong += b.st.wrong, st.nonzero += b.st.nonzero, st.sharp += b.st.sharp;
  st.max_ulp = std::max(st.max_ulp, b.st.max_ulp);
  st.max_ratio = std::max(st.max_ratio, b.st.max_ratio);
  st.errors.merge(b.st.errors);
  sum_sq_ulp += b.sum_sq_ulp;
  finite_count += b.finite_count;
  statistical_flags += b.statistical_flags;
  nontrivial |= b.nontrivial;
  bias.add(b.bias);
  addFindings(b.failures, failures);
  addFindings(b.worst, worst);
}

TensorJudgment judgeTensorRows(const ReferenceTensor& ref, const OutputTensor& out, int64_t row_begin, int64_t row_end,
                               const std::vector<int64_t>* logical_rows, int64_t total_rows,
                               const ConditionalBounds* conditional, std::vector<double>* row_sums_sq) {
  TensorJudgment b;
  if (row_sums_sq) row_sums_sq->assign(size_t(row_end - row_begin), 0.0);
  b.st.tensor = ref.name;
  if (!logical_rows && total_rows == 0) total_rows = ref.first_row + ref.rows;
  std::vector<double> center, cbudget;  // the run's own bounds, rows row_begin.. (ConditionalBounds)
  if (conditional && conditional->bounds(ref.name)) conditional->rows(ref.name, row_begin, row_end, center, cbudget);
  for (int64_t k = row_begin; k < row_end; ++k) {
    double& sum_sq = row_sums_sq ? (*row_sums_sq)[size_t(k - row_begin)] : b.sum_sq_ulp;
    for (int64_t c = 0; c < ref.cols; ++c) {
      const size_t i = ref.index(k, c);
      const int64_t r = logical_rows ? (*logical_rows)[size_t(k)] : k;
      // A black box is held to its probabilistic budget where a model fits
      // (oracles/probabilistic.h: the row sums' on such data, LayerNorm's
      // column sums of dy on any), which is never above the rigorous one.
      const bool statistical = !ref.statistical_budget.empty();
      const double exact = ref.exact[i], rigorous = ref.budget[i], got = out.value(k, c);
      const double budget = statistical ? std::min(rigorous, ref.statistical_budget[i]) : rigorous;
      const double unit = ulpOf(ref.dtype, exact);
      addBiasElement(ref.dtype, exact, rigorous, got, unit, b.bias);
      // A Finding (strings and all) is made only for an element kept in a
      // list: the loop runs over every element of every case.
      std::string note;
      const auto nanNote = [&] {
        // The buffer's own dtype: saved statistics of T values are fp32 arrays (stats=T).
        const uint32_t bits = out.at(k, c), all_ones = uint32_t(0xffffffffu >> (32 - 8 * storageBytes(out.dtype)));
        return bits == poisonBits(out.dtype) ? "never written (poison)"
               : bits == all_ones ? "never written by the library (its allocator's memory was poisoned all ones)"
                                  : "NaN";
      };
      bool ok;
      const bool exactly_admitted = !ref.admissible.empty();
      if (exactly_admitted) {
        // The spec gives every value it admits (a quantized output): one of them, or not.
        ok = ref.admissible.admits(ref.dtype, i, got);
        if (!ok)
          note = std::isnan(got)       ? std::string(nanNote())
                 : !std::isfinite(got) ? "Inf where the spec's value cannot overflow that way"
                 : ref.admissible.lo[i] > ref.admissible.hi[i]
                     ? "finite where every value the spec admits overflows (its NaN or Inf is due)"
                     : fmt::format("outside the values the spec admits, {}..{}", ref.admissible.lo[i],
                                   ref.admissible.hi[i]);
      } else if (!std::isfinite(exact) && std::isinf(rigorous)) {
        // The spec's own result overflowed (oracles/reference.h, anyNonFiniteWhereNotFinite).
        ok = !std::isfinite(got);
        if (!ok) note = "finite where the spec's result is not (a saved statistic beyond the dtype's range)";
      } else if (std::isnan(exact)) {
        ok = std::isnan(got);
        if (!ok) note = "exact result is NaN";
      } else if (std::isnan(got)) {
        ok = false;
        note = nanNote();
      } else if (std::isinf(got)) {
        // Allowed where the budget reaches overflow on got's side of exact
        // (either side where it exceeds |exact|: a constant row at a tiny eps,
        // whose fp32 x-hat may be +-1 where the exact one is 0).
        ok = (std::signbit(got) ? budget - exact : exact + budget) >= overflowThreshold(ref.dtype);
        if (!ok) note = "Inf where the exact result is finite";
      } else {
        ok = true;
      }
      const double err = std::isfinite(got) && std::isfinite(exact) ? std::fabs(got - exact) : INFINITY;
      const double ulp = ok && !std::isfinite(err) ? 0 : err / unit;
      // A budget of 0 (an output the spec determines exactly) admits only err == 0.
      double ratio = (ok && !std::isfinite(err)) || err == 0.0 ? 0 : err / budget;
      if (ok && ratio > 1.0 && err <= rigorous) {
        note = fmt::format("over the probabilistic budget of a black box (within the rigorous one, {:.3g}x it): "
                           "a systematic error, not random rounding",
                           err / rigorous);
        ++b.statistical_flags;
      }
      if (exactly_admitted) ratio = ok ? std::min(ratio, 1.0) : std::max(ratio, std::nextafter(1.0, 2.0));
      ok = ok && ratio <= 1.0;
      // Within the budget about the exact value, and about the run's own
      // center where one is given: the narrower bound measures power.
      double sharp_budget = budget;
      if (!center.empty()) {
        const size_t at = size_t((k - row_begin) * ref.cols + c);
        const double mid = center[at], half = cbudget[at];
        if (std::isfinite(mid) && std::isfinite(half) && std::isfinite(got)) {
          const double off = std::fabs(got - mid), own = off == 0.0 ? 0.0 : off / half;
          sharp_budget = std::min(budget, half);
          if (own > 1.0 && ok)
            note = fmt::format("within its budget of the exact value, but {:.3g}x its budget off {} from {}", own,
                               hexFloat(mid), conditional->source(ref.name));
          ok = ok && own <= 1.0;
          ratio = std::max(ratio, own);
        }
      }
      TensorStats& st = b.st;
      // ulp@scale (properties/error_distribution.h): the error in ulps of the
      // element's scale; where even its terms are zero, of the smallest normal.
      const double scale = ref.magnitudeAt(i);
      const double scale_unit = ulpOf(ref.dtype, scale > 0 ? scale : minNormal(ref.dtype));
      st.errors.add(ratio, !std::isfinite(err) ? (ok ? 0.0 : INFINITY) : err / scale_unit, scale,
                    double(r) / double(total_rows), double(c) / double(ref.cols));
      ++st.elements;
      if (std::isfinite(ulp)) {
        st.max_ulp = std::max(st.max_ulp, ulp);
        sum_sq += ulp * ulp;
        ++b.finite_count;
      }
      st.max_ratio = std::max(st.max_ratio, ratio);
      b.nontrivial |= exact != 0.0;
      if (std::isfinite(exact) && exact != 0.0) {
        // Sharp: the budget is below 1/64 of the element's magnitude, or
        // within one ulp of the output format there (a subnormal output
        // cannot carry 1/64 of itself; its budget is as sharp as the
        // format allows).
        ++st.nonzero;
        st.sharp += sharp_budget <= std::max(tolerance::kPowerErrorFraction * scale, unit);
      }
      // Only the worst few of each list are kept (an element is a finding
      // only if it could be among them: worse() than the list's last, the
      // list's tensor being this one).
      std::vector<Finding>& list = ok ? b.worst : b.failures;
      if (!ok) ++st.wrong;
      const auto beats_last = [&] {
        const Finding& last = list.back();
        if (ratio != last.ratio) return ratio > last.ratio;
        return std::tie(ref.name, r, c) < std::tie(last.tensor, last.row, last.col);
      };
      if (list.size() < kReportedFindings || !ok || beats_last()) {
        list.push_back(Finding{ref.name, r, c, got, exact, ref.correctlyRounded(int64_t(i)), ulp, budget / unit, ratio,
                               std::move(note), ""});
        if (list.size() > 4 * kReportedFindings) trimFindings(list, kReportedFindings);
        if (ok) std::sort(list.begin(), list.end(), worse);
      }
    }
  }
  if (row_sums_sq)
    for (const double sq : *row_sums_sq) b.sum_sq_ulp += sq;
  return b;
}

Outcome judgeAccuracy(const RunResult& run, const std::vector<ReferenceTensor>& reference,
                      const DescribeInputs& describe, const ConditionalBounds* conditional) {
  const PhaseScope phase(Phase::Judge);
  for (const ReferenceTensor& ref : reference)
    if (!run.find(ref.name)) {
      Outcome o;
      o.verdict = Verdict::Fail;
      o.summary = fmt::format("the kernel produced no output '{}'", ref.name);
      return o;
    }
  auto rowsPerBlock = [](const ReferenceTensor& ref) {
    return std::max<int64_t>(1, kJudgeBlockElements / std::max<int64_t>(ref.cols, 1));
  };
  std::vector<TensorJudgment> tensors(reference.size());
  // Streamed tensors (oracles/reference.h, ReferenceRows): each block of
  // rows made once for every tensor of its source that is judged, judged,
  // and let go; the same blocks as a held tensor's, so the same figures.
  std::vector<const ReferenceRows*> sources;
  for (const ReferenceTensor& ref : reference)
    if (ref.streamed() && std::find(sources.begin(), sources.end(), ref.rows_from.get()) == sources.end())
      sources.push_back(ref.rows_from.get());
  for (const ReferenceRows* source : sources) {
    std::vector<size_t> judged_here;  // the tensors of `reference` it makes
    for (size_t t = 0; t < reference.size(); ++t)
      if (reference[t].rows_from.get() == source) judged_here.push_back(t);
    const ReferenceTensor& first = reference[judged_here.front()];
    const int64_t rows_per_block = rowsPerBlock(first), blocks = (first.rows + rows_per_block - 1) / rows_per_block;
    std::vector<std::vector<TensorJudgment>> judged(judged_here.size(), std::vector<TensorJudgment>(size_t(blocks)));
    ThreadPool::shared().forChunks(blocks, [&](unsigned, int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        const int64_t row_begin = k * rows_per_block, row_end = std::min(first.rows, row_begin + rows_per_block);
        const std::vector<ReferenceTensor> block = source->rows(row_begin, row_end);
        for (size_t n = 0; n < judged_here.size(); ++n) {
          const ReferenceTensor& whole = reference[judged_here[n]];
          const auto made = std::find_if(block.begin(), block.end(),
                                         [&](const ReferenceTensor& b) { return b.name == whole.name; });
          if (made == block.end() || made->rows != row_end - row_begin || made->cols != whole.cols)
            throw std::logic_error(
                fmt::format("streamed reference: no rows {}..{} of '{}'", row_begin, row_end, whole.name));
          judged[n][size_t(k)] = judgeTensorRows(*made, *run.find(whole.name), row_begin, row_end, nullptr, whole.rows,
                                                 conditional);
        }
      }
    });
    for (size_t n = 0; n < judged_here.size(); ++n)
      for (TensorJudgment& b : judged[n]) tensors[judged_here[n]].merge(std::move(b));
  }
  for (size_t t = 0; t < reference.size(); ++t) {
    const ReferenceTensor& ref = reference[t];
    tensors[t].st.tensor = ref.name;
    if (ref.streamed()) continue;
    const OutputTensor* out = run.find(ref.name);
    const int64_t rows_per_block = rowsPerBlock(ref), blocks = (ref.rows + rows_per_block - 1) / rows_per_block;
    const auto judgeBlocks = [&](const ConditionalBounds* bounds) {
      std::vector<TensorJudgment> judged(static_cast<size_t>(blocks));
      ThreadPool::shared().forChunks(blocks, [&](unsigned, int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k)
          judged[size_t(k)] = judgeTensorRows(ref, *out, k * rows_per_block,
                                              std::min(ref.rows, (k + 1) * rows_per_block), nullptr, 0, bounds);
      });
      TensorJudgment whole;
      whole.st.tensor = ref.name;
      for (TensorJudgment& b : judged) whole.merge(std::move(b));
      return whole;
    };
    const bool deferred = conditional && conditional->bounds(ref.name) && conditional->onlyWithoutPower(ref.name);
    tensors[t] = judgeBlocks(deferred ? nullptr : conditional);
    if (deferred && tensors[t].st.withoutPower()) tensors[t] = judgeBlocks(conditional);
  }
  return accuracyVerdict(std::move(tensors), describe);
}

std::vector<ReferenceTensor> RowsWithStatisticalBudgets::rows(int64_t begin, int64_t end) const {
  std::vector<ReferenceTensor> block = declared_->rows(begin, end), sharp = sharp_->rows(begin, end);
  for (size_t t = 0; t < block.size(); ++t)
    block[t].statistical_budget = std::move(sharp[t].statistical_budget.empty() ? sharp[t].budget
                                                                                : sharp[t].statistical_budget);
  return block;
}

std::string describeBias(const RoundingBias& b) {
  if (b.elements == 0) return "none counted (no error bound within a quarter ulp)";
  // The allowances are what rounding to nearest permits: -below .. +above.
  return fmt::format("off the correctly rounded values by {:+.3g} ulp on average, {:+.3g} away from zero (rounding "
                     "to nearest allows {:+.3g}..{:+.3g} and {:+.3g}..{:+.3g}); error {:+.3g} ulp, {:+.3g} away from "
                     "zero; {} elements",
                     b.miss_ulp, b.miss_outward_ulp, -b.below, b.above, -b.outward_below, b.outward_above, b.error_ulp,
                     b.error_outward_ulp, b.elements);
}

RoundingBias roundingBias(const BiasSums& sums) {
  RoundingBias b;
  b.elements = sums.elements;
  if (sums.elements == 0) return b;
  const double n = double(sums.elements);
  b.error_ulp = sums.error_ulp / n, b.error_outward_ulp = sums.error_outward_ulp / n;
  b.miss_ulp = sums.miss_ulp / n, b.miss_outward_ulp = sums.miss_outward_ulp / n;
  b.below = sums.below / n, b.above = sums.above / n;
  b.outward_below = sums.outward_below / n, b.outward_above = sums.outward_above / n;
  return b;
}

Outcome accuracyVerdict(std::vector<TensorJudgment> tensors, const DescribeInputs& describe) {
  Outcome o;
  std::vector<Finding> failures, worst;
  bool nontrivial = false;
  int64_t statistical_flags = 0;
  for (TensorJudgment& t : tensors) {
    statistical_flags += t.statistical_flags;
    nontrivial |= t.nontrivial;
    addFindings(t.failures, failures);
    addFindings(t.worst, worst);
    TensorStats st = std::move(t.st);
    st.rms_ulp = t.finite_count ? std::sqrt(t.sum_sq_ulp / double(t.finite_count)) : 0;
    st.bias = roundingBias(t.bias);
    o.stats.push_back(std::move(st));
  }
  // The tensors whose rounding misses the correctly rounded values one way
  // beyond what rounding to nearest allows them.
  std::string biased;
  for (const auto& s : o.stats)
    if (s.bias.biased()) biased += fmt::format("{}{}: {}", biased.empty() ? "" : "; ", s.tensor, describeBias(s.bias));
  if (!biased.empty()) biased = "rounding biased in " + biased;

  auto& shown = failures.empty() ? worst : failures;
  std::sort(shown.begin(), shown.end(), worse);
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
    if (s.withoutPower()) weak += fmt::format("{}{} {:.0f}%", weak.empty() ? "" : ", ", s.tensor, 100.0 * s.power());
  if (wrong) {
    o.verdict = Verdict::Fail;
    const Finding& f = o.findings.front();
    o.summary = fmt::format(
        "{} elements over budget{}; worst {}[{},{}] = {} vs exact {} ({:.3g} ulp, {:.3g}x budget){}{}", wrong,
        statistical_flags ? fmt::format(" ({} over the probabilistic budget only: false-alarm probability "
                                        "<= {:g} per case)",
                                        statistical_flags, tolerance::kStatisticalFalseAlarm)
                          : "",
        f.tensor, f.row, f.col, hexFloat(f.got), hexFloat(f.exact), f.ulp, f.ratio, f.note.empty() ? "" : " " + f.note,
        biased.empty() ? "" : "; " + biased);
  } else if (!biased.empty()) {
    // Every element within its budget, the errors all leaning one way: a
    // truncating or one-way conversion hiding inside the budgets.
    o.verdict = Verdict::Fail;
    o.summary = fmt::format("{}; every element within budget (max {:.3g} of budget)", biased, max_ratio);
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

bool preferGpuJudge(const CaseSpec& c, const ExecContext& exec) {
  if (exec.oracle != OracleMode::Fast) return false;
  switch (exec.judge) {
    case JudgeWhere::Host: return false;
    case JudgeWhere::Gpu: return true;
    case JudgeWhere::Auto:
    default: return c.M * c.N >= kGpuJudgeMinElements;
  }
}

Outcome judgeRunAccuracy(CaseContext& ctx, const RunResult& run) {
  if (preferGpuJudge(ctx.spec(), ctx.exec()))
    if (std::optional<Outcome> o = ctx.op().accuracyOnGpu(ctx.spec(), ctx.exec(), &run)) return *o;
  const std::unique_ptr<ConditionalBounds> own = ctx.op().conditionalBounds(ctx.spec(), ctx.exec(), run);
  return judgeAccuracy(
      run, ctx.reference(),
      [&](const std::string& tensor, int64_t row, int64_t col) {
        return ctx.op().describeInputs(ctx.spec(), tensor, row, col);
      },
      own.get());
}

std::string outcomeDifference(const Outcome& a, const Outcome& b) {
  if (a.verdict != b.verdict) return fmt::format("verdict {} vs {}", verdictName(a.verdict), verdictName(b.verdict));
  if (a.stats.size() != b.stats.size()) return "tensor counts";
  for (size_t t = 0; t < a.stats.size(); ++t) {
    const TensorStats &x = a.stats[t], &y = b.stats[t];
    const std::string where = fmt::format("tensor {}: ", x.tensor);
    if (x.tensor != y.tensor) return where + "names";
    if (x.elements != y.elements || x.wrong != y.wrong || x.nonzero != y.nonzero || x.sharp != y.sharp)
      return where + fmt::format("counts (elements, wrong, nonzero, sharp) {} {} {} {} vs {} {} {} {}", x.elements,
                                 x.wrong, x.nonzero, x.sharp, y.elements, y.wrong, y.nonzero, y.sharp);
    if (!(x.max_ratio == y.max_ratio) || !(x.max_ulp == y.max_ulp))
      return where + fmt::format("max err/budget {:a} vs {:a}, max ulp {:a} vs {:a}", x.max_ratio, y.max_ratio,
                                 x.max_ulp, y.max_ulp);
    // rms_ulp's sum of squares runs in another order on the GPU.
    if (std::fabs(x.rms_ulp - y.rms_ulp) > 1e-9 * std::max(x.rms_ulp, y.rms_ulp))
      return where + fmt::format("rms ulp {} vs {}", x.rms_ulp, y.rms_ulp);
    // So do the rounding bias's sums: the misses and their bounds are small
    // multiples of powers of two, exact in any order, where the outputs are
    // near their exact values (a garbage output's miss is not); the errors
    // are not.
    const RoundingBias &p = x.bias, &q = y.bias;
    const auto near = [](double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(a)); };
    if (p.elements != q.elements || p.biased() != q.biased() || !near(p.miss_ulp, q.miss_ulp) ||
        !near(p.miss_outward_ulp, q.miss_outward_ulp) || !near(p.below, q.below) || !near(p.above, q.above) ||
        !near(p.outward_below, q.outward_below) || !near(p.outward_above, q.outward_above) ||
        !near(p.error_ulp, q.error_ulp) || !near(p.error_outward_ulp, q.error_outward_ulp))
      return where +
             fmt::format("rounding bias (elements, error, misses, allowed) {} {} {} {} {} [{} {}] vs {} {} {} {} {} "
                         "[{} {}]",
                         p.elements, p.error_ulp, p.error_outward_ulp, p.miss_ulp, p.miss_outward_ulp, p.outward_below,
                         p.outward_above, q.elements, q.error_ulp, q.error_outward_ulp, q.miss_ulp, q.miss_outward_ulp,
                         q.outward_below, q.outward_above);
    const ErrorDistribution &d = x.errors, &e = y.errors;
    if (d.count != e.count || !(d.max_ulp_at_scale == e.max_ulp_at_scale) || d.ratio != e.ratio ||
        d.ulp_at_scale != e.ulp_at_scale || d.worst_where != e.worst_where || d.scale_count != e.scale_count ||
        d.scale_worst != e.scale_worst)
      return where + "error distributions";
  }
  const std::vector<Finding>&fa = a.findings, &fb = b.findings;
  if (fa.size() != fb.size()) return fmt::format("{} vs {} findings", fa.size(), fb.size());
  for (size_t k = 0; k < fa.size(); ++k) {
    const Finding &f = fa[k], &g = fb[k];
    const auto same = [](double p, double q) { return p == q || (std::isnan(p) && std::isnan(q)); };
    if (std::tie(f.tensor, f.row, f.col) != std::tie(g.tensor, g.row, g.col) || !same(f.ratio, g.ratio) ||
        !same(f.got, g.got) || !same(f.exact, g.exact) || f.note != g.note || f.inputs != g.inputs)
      return fmt::format("finding {}: {}[{},{}] ratio {:a} vs {}[{},{}] ratio {:a}", k, f.tensor, f.row, f.col, f.ratio,
                         g.tensor, g.row, g.col, g.ratio);
  }
  if (a.summary != b.summary) return fmt::format("summary '{}' vs '{}'", a.summary, b.summary);
  return "";
}

bool statisticalModelHolds(const CaseSpec& c) {
  // dy is a zero-mean normal in every op; x must be one too (Normal draws a
  // zero mean), with or without zeros mixed in.
  const bool normal = c.x.kind == Dist::Normal || c.x.kind == Dist::ZeroRows || c.x.kind == Dist::SignedZeros;
  return normal && c.x.mean == 0.0;
}

namespace {

Outcome checkAccuracy(CaseContext& ctx) {
  // The GPU judges where it models the case and the oracle is the certified
  // fast path; --oracle mpfr is about the host's MPFR, and the audit judges
  // the base run on both and compares.
  if (preferGpuJudge(ctx.spec(), ctx.exec()))
    if (std::optional<Outcome> o = ctx.op().accuracyOnGpu(ctx.spec(), ctx.exec(), nullptr)) return *o;
  const std::unique_ptr<ConditionalBounds> own = ctx.op().conditionalBounds(ctx.spec(), ctx.exec(), ctx.baseRun());
  Outcome host = judgeAccuracy(
      ctx.baseRun(), ctx.reference(),
      [&](const std::string& tensor, int64_t row, int64_t col) {
        return ctx.op().describeInputs(ctx.spec(), tensor, row, col);
      },
      own.get());
  if (ctx.exec().oracle == OracleMode::Audit && ctx.kernel().backend == Backend::Cuda)
    if (const std::optional<Outcome> gpu = ctx.op().accuracyOnGpu(ctx.spec(), ctx.exec(), &ctx.baseRun())) {
      const std::string difference = outcomeDifference(host, *gpu);
      if (!difference.empty())
        throw OracleDisagreement(fmt::format("judge audit, case '{}': host and GPU judges differ: {}",
                                             toCaseString(ctx.spec()), difference));
      ++oracleCounts().gpu_judge_audited;
    }
  return host;
}

const bool registered = registerProperty(
    {"accuracy", "every element within its condition-aware error budget of the MPFR oracle", checkAccuracy});

}  // namespace
}  // namespace ulpcheck
