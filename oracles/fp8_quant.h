// What a quantizing norm may store (issue 34, the oracle's core): the fp8
// values of one element and the fp32 values of its scale, from the
// intervals the kernel's own fp32 values lie in.
//
// Every step of a quantizing kernel's chain is monotone: y rounded to the
// activation dtype T (or not: FlashInfer's rmsnorm_quant quantizes the fp32
// y, its allreduce fusion the T-rounded one), the product by the scale's
// inverse m = 1/s as an fp32 value (correctly rounded, or within the
// relative error of an approximate reciprocal: rcp.approx under
// -use_fast_math) or the fp32 quotient y / s, and the conversion to fp8 under
// the spec's overflow rule (saturate: CUDA's satfinite; non-finite: torch's
// cast). In y the chain is nondecreasing; in m nondecreasing where y > 0 and
// nonincreasing where y < 0. So over a box of y and m the values it stores lie
// between the chain at the box's corners, which it reaches: an exact range,
// with no more room than the kernel's own intervals give. A per-token scale
// s = max(amax, floor) / fmax is monotone in amax, itself the largest |y|,
// monotone in each |y_j|: its interval follows from the elements'.
//
// fp32 steps are evaluated in double and rounded once to fp32: a product of
// two fp32 values is exact in double, and a quotient or square root rounded
// to double and then to fp32 is correctly rounded (53 >= 2 x 24 + 2).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/dtype.h"
#include "core/fp8.h"

namespace ulpcheck::fp8_quant {

/// A closed interval of reals.
struct Interval {
  double lo = 0, hi = 0;
};

/// How the scale is applied: y times an fp32 reciprocal m (FlashInfer's
/// norms and allreduce fusion, vLLM's kernels), or the fp32 quotient y / s.
enum class Apply : uint8_t { Reciprocal, Divide };

/// The rounding points of a quantizing norm's output, the fields its spec
/// differs on across libraries.
struct QuantSpec {
  Fp8Format format = Fp8Format::E4M3FN;
  Fp8Overflow overflow = Fp8Overflow::Saturate;
  // y rounded to this dtype (the activation dtype) before it is scaled; none: the fp32 y.
  std::optional<DType> y_rounded_to;
  Apply apply = Apply::Reciprocal;
  // Relative error of the reciprocal 1/s as an fp32 value: 0 for a correctly
  // rounded one (the fp32 value nearest 1/s); rcp.approx.ftz.f32 is within
  // 2^-23 (PTX ISA), fast-math division likewise.
  double reciprocal_error = 0;
};

/// What a kernel may store for one element: the fp8 values in [lo, hi], and
/// the format's overflow value (NaN in E4M3FN, +-Inf in E5M2) where its
/// value may pass the largest finite one below or above. `finite`: some
/// finite value may be stored (not where every value overflows).
struct Fp8Range {
  double lo = 0, hi = 0;
  bool finite = true;
  bool overflow_below = false, overflow_above = false;
  // The fp32 values the conversion may read (the chain before its last
  // step): what the stored value is the rounding of.
  Interval converted;
  /// Whether the fp8 value v (decoded) is one of them.
  bool admits(Fp8Format f, double v) const;
};

/// The fp32 values in [lo, hi] (an empty interval where none: lo > hi).
Interval fp32Within(Interval real);

/// The fp32 values of m a kernel may multiply by, for scales in `scale`
/// (fp32 values): the nearest fp32 values to 1/s, widened by
/// spec.reciprocal_error and taken to the fp32 grid outward.
Interval reciprocalRange(const QuantSpec& spec, Interval scale);

/// The value the chain stores for fp32 y and the fp32 value `by` (m, or s
/// under Apply::Divide), under the spec's overflow rule.
double quantize(const QuantSpec& spec, double y, double by);

/// What the kernel may store for an element whose fp32 y lies in `y` (real
/// bounds: the fp32 values within them count) and whose scale lies in
/// `scale` (fp32 values; positive).
Fp8Range admissible(const QuantSpec& spec, Interval y, Interval scale);

/// A per-token scale: s = max(fl(a / fmax), min_scale) or, with
/// `clamp_amax_first`, fl(max(a, min_amax) / fmax), a the row's largest
/// |y| (T-rounded where the spec rounds y); the division by fmax in fp32,
/// or the product by fl(1 / fmax) where `by_reciprocal`.
struct PerTokenScale {
  double fmax = 448;
  double min_scale = 0;  // FlashInfer's dynamic quant: 1 / (512 x 448)
  double min_amax = 0;   // FlashInfer's block quant: 1e-4
  bool clamp_amax_first = false;
  bool by_reciprocal = false;
};

/// The fp32 values a kernel may store as the scale of a row whose elements'
/// fp32 y lie in `row` (real bounds each).
Interval perTokenScale(const QuantSpec& spec, const PerTokenScale& rule, const std::vector<Interval>& row);

/// The same scale's values before its one rounding to fp32 (the division
/// by fmax, or the product by fl(1 / fmax)): the stored scale is the
/// nearest fp32 value to one of them.
struct ScaleBounds {
  Interval stored, computed;
};
ScaleBounds perTokenScaleBounds(const QuantSpec& spec, const PerTokenScale& rule, const std::vector<Interval>& row);

}  // namespace ulpcheck::fp8_quant
