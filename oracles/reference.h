// What an oracle produces for one output tensor: per element, the exact value
// of the spec (as a round-to-odd double, so rounding it to the output dtype is
// the correctly rounded result) and the element's error budget.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/hd.h"
#include "oracles/tolerances.h"

namespace ulpcheck {

class ReferenceRows;

/// The values an element may take where the spec gives them exactly (a
/// quantized output: oracles/fp8_quant.h), narrower on one side than a
/// budget about the exact value: the format's values in [lo[i], hi[i]]
/// (none where lo[i] > hi[i]), and its overflow value, NaN in E4M3 or
/// -Inf / +Inf in E5M2, where overflow[i] has bit 0 (below) / bit 1 (above).
struct AdmissibleValues {
  // The non-finite values admitted: the overflow below -max or above max
  // (E4M3's NaN, E5M2's -Inf or +Inf), and NaN itself (kNaN: where the
  // spec's value is not a number, or may be through a NaN scale).
  static constexpr uint8_t kOverflowBelow = 1, kOverflowAbove = 2, kNaN = 4;
  std::vector<double> lo, hi;
  std::vector<uint8_t> overflow;

  bool empty() const { return lo.empty(); }
  void assign(size_t n) {
    lo.assign(n, 0.0);
    hi.assign(n, 0.0);
    overflow.assign(n, 0);
  }
  /// Whether `got`, a value of `dtype`, is one of element i's.
  bool admits(DType dtype, size_t i, double got) const {
    if (std::isnan(got))
      return (overflow[i] & kNaN) != 0 || (dtype == DType::E4M3 && (overflow[i] & (kOverflowBelow | kOverflowAbove)));
    if (std::isinf(got))
      return dtype != DType::E4M3 && (overflow[i] & (got > 0 ? kOverflowAbove : kOverflowBelow)) != 0;
    return lo[i] <= got && got <= hi[i];
  }
};

struct ReferenceTensor {
  std::string name;
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0;
  bool per_row = true;         // row i depends only on row i of the inputs (batch invariance applies)
  std::vector<double> exact;   // dense rows x cols
  std::vector<double> budget;  // absolute bound on |got - exact|
  // The size of the terms the element is made of, where it can exceed
  // |exact| (empty: |exact|): what a gross error compares with. dx cancels
  // to near zero at some elements while its terms r|a|, r|xhat c| stay
  // large; a column sum of terms of random sign is sqrt(sum t^2) in size,
  // which |exact| may undercut by chance. The power of a verdict is measured
  // against max(|exact|, magnitude).
  std::vector<double> magnitude;
  // A black box's probabilistic budget (oracles/probabilistic.h), at most
  // `budget`; empty where the statistical check does not apply. An element
  // over it fails as one over `budget` does, and power is measured with it.
  std::vector<double> statistical_budget;
  // Where the spec admits exactly these values (a quantized output): an
  // element must be one of them; `budget` stays a bound about exact that
  // holds them all (ulps, power and the rounding bias read it). Empty elsewhere.
  AdmissibleValues admissible;
  // A block of a tensor (ReferenceRows::rows) holds rows first_row ..
  // first_row + rows - 1; a whole tensor, 0 .. rows - 1.
  int64_t first_row = 0;
  // A streamed tensor: none of the arrays above is held; its rows come a
  // block at a time from here, when the judge reads them.
  std::shared_ptr<const ReferenceRows> rows_from;

  bool streamed() const { return rows_from != nullptr; }
  /// Where element (row, col) of the tensor is in the arrays (a block's rows from first_row).
  size_t index(int64_t row, int64_t col) const { return size_t((row - first_row) * cols + col); }

  double magnitudeAt(int64_t i) const {
    return magnitude.empty() ? std::fabs(exact[size_t(i)])
                             : std::max(std::fabs(exact[size_t(i)]), magnitude[size_t(i)]);
  }

  double correctlyRounded(int64_t i) const { return roundToFormat(dtype, exact[i]); }

  /// A tensor of rows x cols elements, exact values and budgets zero.
  static ReferenceTensor zeros(std::string name, DType dtype, int64_t rows, int64_t cols, bool per_row) {
    ReferenceTensor r;
    r.name = std::move(name);
    r.dtype = dtype;
    r.rows = rows;
    r.cols = cols;
    r.per_row = per_row;
    r.exact.assign(size_t(rows * cols), 0.0);
    r.budget.assign(size_t(rows * cols), 0.0);
    return r;
  }
  /// This tensor with a magnitude per element (zeros to fill in).
  ReferenceTensor& withMagnitudes() {
    magnitude.assign(exact.size(), 0.0);
    return *this;
  }
};

/// Per-row tensors made a block of rows at a time, for a case whose whole
/// reference would not fit in memory (kMaxHeldReferenceBytes): at 65536 x
/// 8192 LayerNorm's y and dx, held whole, took 25 GB (48 bytes an element).
/// The op's oracle makes everything else (statistics, column sums) in a
/// first pass, keeping only what is not M x N; the judge then asks for each
/// block of rows it judges, and the oracle computes those rows again, with
/// the very same arithmetic: the same doubles as a whole reference's.
class ReferenceRows {
 public:
  virtual ~ReferenceRows() = default;
  /// Rows [begin, end) of each tensor this makes (first_row = begin; any
  /// thread, any order), in a fixed order of names.
  virtual std::vector<ReferenceTensor> rows(int64_t begin, int64_t end) const = 0;
};

/// The most bytes a case's per-row reference tensors may take held whole;
/// beyond, they are streamed (ReferenceRows). At 48 bytes an element (exact
/// value, budget, magnitude of y and dx) that is 5.6M elements.
constexpr uint64_t kMaxHeldReferenceBytes = uint64_t{256} << 20;

/// Tensors moved into a list. A braced list would copy each one (the
/// elements of an initializer_list are const): at 4096 x 4096 that copy was
/// a third of a LayerNorm case's peak memory.
template <class... Tensors>
std::vector<ReferenceTensor> movedTensors(Tensors&&... tensors) {
  std::vector<ReferenceTensor> list;
  list.reserve(sizeof...(tensors));
  (list.push_back(std::move(tensors)), ...);
  return list;
}

/// Bounds that hold given a run's own intermediate results, where a variant
/// declares how it uses them (LayerNorm's y, variance and backward from the
/// mean and rstd it saves: ReductionDepths::uses_saved_statistics). An
/// element of a bounded tensor must lie within `budget` of `center` as well
/// as within its budget of the exact value: a far narrower interval where
/// the statistics' own error (legitimate, and budgeted around the exact
/// value) dominates, as on rows of large mean or near-constant rows, so the
/// check keeps its power there. Rows come a block at a time (the judge's),
/// so nothing the size of a tensor is held.
class ConditionalBounds {
 public:
  virtual ~ConditionalBounds() = default;
  virtual bool bounds(const std::string& tensor) const = 0;
  /// Rows [begin, end) of `tensor`, row-major, into center and budget
  /// (resized). A center that is not finite (the run's statistic is not)
  /// bounds nothing: the statistic's own check fails.
  virtual void rows(const std::string& tensor, int64_t begin, int64_t end, std::vector<double>& center,
                    std::vector<double>& budget) const = 0;
  /// What the centers are made of, for a finding's note.
  virtual std::string source(const std::string& tensor) const = 0;
  /// Whether `tensor`'s bound is applied only where its budgets about the
  /// exact value leave it without power (a column sum over every row, whose
  /// bound costs a pass over the whole inputs: the GPU judge then makes them
  /// on the host only for such a case). Elsewhere it would only narrow an
  /// interval that already sees an error of kPowerErrorFraction.
  virtual bool onlyWithoutPower(const std::string& /*tensor*/) const { return false; }
};

/// An element whose exact value is not finite because the spec itself
/// overflows (under stats=T in fp16 a saved rstd beyond 65504 is inf, and
/// the backward taken at it inf or NaN as 0 inf or inf - inf fall) admits
/// any non-finite result and no finite one: budget +inf marks it for the
/// accuracy check (properties/accuracy.cpp).
inline void anyNonFiniteWhereNotFinite(ReferenceTensor& t) {
  for (size_t i = 0; i < t.exact.size(); ++i)
    if (!std::isfinite(t.exact[i])) {
      t.budget[i] = INFINITY;
      if (!t.statistical_budget.empty()) t.statistical_budget[i] = INFINITY;
    }
}

/// The budget of an element whose computed value, before its final rounding
/// to the output dtype, is within e of the exact value: e plus half an ulp,
/// taken at |exact| + e so that a value across a binade boundary from the
/// exact one is still allowed its final rounding.
ULPCHECK_HD inline double budgetFromError(DType out, double exact, double e) {
  return e + 0.5 * ulpOf(out, std::fabs(exact) + e);
}

/// The budget of one element:
///   e = K * (u_acc * S + eta_acc * G),   budget = e + 0.5 ulp_T(|exact| + e)
/// S is the element's scale in units of u_acc (the forward error analysis of
/// the op), G its gain on underflowed products.
/// `absolute`: an error known as it is (a rounding point's spread), added without the safety factor.
ULPCHECK_HD inline double elementBudget(DType out, DType accumulation, double exact, double scale_units, double gain,
                                        double absolute = 0.0) {
  const double eta = tolerance::kUnderflowHalfUlps * minSubnormal(accumulation);
  const double e = tolerance::kBudgetSafety * (unitRoundoff(accumulation) * scale_units + eta * gain) + absolute;
  return budgetFromError(out, exact, e);
}

}  // namespace ulpcheck
