// The accuracy judgment, apart from running anything: outputs against the
// oracle's references, element by element, with the power of each tensor's
// budgets. The accuracy property applies it to a case's base run; tests
// apply it to injected outputs (a gross error in a regime, say) directly.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/registry.h"
#include "oracles/probabilistic.h"
#include "oracles/rounding_bias.h"
#include "properties/property.h"

namespace ulpcheck {

/// Names the inputs element (row, col) of a tensor depends on, for findings.
using DescribeInputs = std::function<std::string(const std::string& tensor, int64_t row, int64_t col)>;

/// The worst findings an outcome reports.
inline constexpr size_t kReportedFindings = 5;

/// One tensor's judgment before the verdict: its figures and its worst
/// findings (failures, and the worst of the elements within budget). Blocks
/// of rows judged apart add up with merge, in row order.
struct TensorJudgment {
  TensorStats st;
  double sum_sq_ulp = 0;  // of the finite ulp errors: rms_ulp
  int64_t finite_count = 0, statistical_flags = 0;
  bool nontrivial = false;  // some exact value is not zero
  BiasSums bias;
  std::vector<Finding> failures, worst;
  void merge(TensorJudgment&& other);
};

/// Rows [row_begin, row_end) of `ref` against `out`. Where ref and out hold
/// only some rows of the tensor, logical_rows[k] names row k in the whole
/// tensor of total_rows rows (findings and positions use it).
/// `conditional`, where given and it bounds the tensor (its rows are ref's
/// rows, as row_begin and row_end count them): each element must also lie
/// within its bound about the run's own center, and power is measured with
/// the narrower of the two. `row_sums_sq`, where given, gets each row's sum
/// of squared ulp errors (as judging the row alone gives it).
TensorJudgment judgeTensorRows(const ReferenceTensor& ref, const OutputTensor& out, int64_t row_begin, int64_t row_end,
                               const std::vector<int64_t>* logical_rows = nullptr, int64_t total_rows = 0,
                               const ConditionalBounds* conditional = nullptr,
                               std::vector<double>* row_sums_sq = nullptr);

/// A tensor's RoundingBias from its sums.
RoundingBias roundingBias(const BiasSums& sums);
/// Its figures in words, for summaries and tables.
std::string describeBias(const RoundingBias& b);

/// The outcome of judged tensors (in the report's order): the verdict below.
Outcome accuracyVerdict(std::vector<TensorJudgment> tensors, const DescribeInputs& describe);

/// Pass when every element is within its budget, no tensor's rounding is
/// biased (RoundingBias) and every tensor is judged with power
/// (tolerance::kMinTensorPower); Fail on any element over budget or a biased
/// rounding (whatever the power); Inconclusive when the budgets of some
/// tensor are too wide to see errors of tolerance::kPowerErrorFraction of
/// its values, or every exact value is zero.
Outcome judgeAccuracy(const RunResult& run, const std::vector<ReferenceTensor>& reference,
                      const DescribeInputs& describe, const ConditionalBounds* conditional = nullptr);

/// Whether case c's accuracy is judged on the GPU where its op can
/// (OpAdapter::accuracyOnGpu): --judge gpu, or auto from kGpuJudgeMinElements
/// elements, and the certified fast oracle (--oracle mpfr and audit judge on the host).
bool preferGpuJudge(const CaseSpec& c, const ExecContext& exec);

/// The accuracy outcome of a run of the case other than its base run (a
/// repeat of a nondeterministic variant): on the GPU where preferred and
/// modelled, else against the case's reference on the host.
Outcome judgeRunAccuracy(CaseContext& ctx, const RunResult& run);

/// Where two outcomes of one run differ (empty: the same verdict, figures,
/// distributions and findings; rms_ulp within 1e-9): the audit of the GPU
/// judge against the host's.
std::string outcomeDifference(const Outcome& a, const Outcome& b);

/// Whether a case's values fit the model of the probabilistic budget
/// (oracles/probabilistic.h): zero-mean normal x and dy, possibly with rows
/// or elements of zeros; not constant rows, large means, outlier columns,
/// subnormals or values near overflow.
bool statisticalModelHolds(const CaseSpec& c);

/// A streamed reference's rows (oracles/reference.h, ReferenceRows) with
/// the statistical budgets of the same oracle at the effective depths.
class RowsWithStatisticalBudgets final : public ReferenceRows {
 public:
  RowsWithStatisticalBudgets(std::shared_ptr<const ReferenceRows> declared, std::shared_ptr<const ReferenceRows> sharp)
      : declared_(std::move(declared)), sharp_(std::move(sharp)) {}
  std::vector<ReferenceTensor> rows(int64_t begin, int64_t end) const override;

 private:
  const std::shared_ptr<const ReferenceRows> declared_, sharp_;
};

/// The oracle's references at a kernel's declared depths and, for a black
/// box on values that fit the model, each tensor's statistical budget: the
/// same oracle at the effective depths of Higham & Mary's bound.
/// compute(contract) runs the op's oracle. `random_gradient_columns`: the
/// op's oracle bounds its column sums of dy by the gradient model
/// (oracles/probabilistic.h), which holds whatever x is: a black box's
/// contract carries it, and the oracle gives those tensors their
/// statistical budgets in the same pass (one pass where x does not fit the
/// row sums' model; the second, at the effective depths, replaces them).
template <class Compute>
std::vector<ReferenceTensor> referenceWithStatisticalBudgets(const CaseSpec& c, const KernelInfo& k,
                                                             const AccuracyContract& contract, Compute compute,
                                                             bool random_gradient_columns = false) {
  AccuracyContract declared = contract;
  if (k.black_box && random_gradient_columns)
    declared.random_gradient = probabilistic::randomGradient(c.dy_sigma, c.dtype);
  std::vector<ReferenceTensor> ref = compute(declared);
  if (!k.black_box || !statisticalModelHolds(c)) return ref;
  double elements = 0;
  for (const ReferenceTensor& t : ref) elements += double(t.rows * t.cols);
  AccuracyContract probable = declared;
  probable.depths = probabilistic::effectiveDepths(contract.depths, elements, unitRoundoff(contract.accumulation));
  std::vector<ReferenceTensor> sharp = compute(probable);
  std::vector<std::pair<const ReferenceRows*, std::shared_ptr<const ReferenceRows>>> joined;  // one per source
  for (size_t t = 0; t < ref.size(); ++t) {
    if (ref[t].streamed()) {
      auto it = std::find_if(joined.begin(), joined.end(),
                             [&](const auto& j) { return j.first == ref[t].rows_from.get(); });
      if (it == joined.end())
        it = joined.insert(joined.end(), {ref[t].rows_from.get(), std::make_shared<RowsWithStatisticalBudgets>(
                                                                      ref[t].rows_from, sharp[t].rows_from)});
      ref[t].rows_from = it->second;
      continue;
    }
    ref[t].statistical_budget = std::move(sharp[t].statistical_budget.empty() ? sharp[t].budget
                                                                              : sharp[t].statistical_budget);
  }
  return ref;
}

}  // namespace ulpcheck
