// Oracle of RMSNorm + FP8 quantization.
//
// rmsnorm's oracle at an fp32 output gives every element's exact y and a
// budget b: the fp32 y a kernel honouring its contract stores (and, under
// scaled=T, rounds to T) is within b of it. Every later step of the spec's
// chain is monotone (oracles/fp8_quant.h), so from the interval [y - b,
// y + b] and the scale's interval the fp8 values an element may take follow
// exactly: a static scale is one value; a per-token scale's fp32 values
// follow from its row's intervals. Nothing is judged by distance alone: the
// element must be one of those values (ReferenceTensor::admissible).
//
// Its budget, for ulps, power and the rounding bias: the conversion reads
// an fp32 value p in [p_lo, p_hi] (Fp8Range::converted) and stores round(p);
// with x the exact value and E = max(x - p_lo, p_hi - x), a kernel stores a
// value within E + half an fp8 ulp of x, and round-to-nearest's monotonicity
// puts it in [RN(x - E), RN(x + E)], which the rounding bias's allowance
// needs (oracles/rounding_bias.h). Where the spec saturates, x and p are
// clamped to the format's range first: clamping is monotone and 1-Lipschitz,
// and rounding a clamped value gives what saturating conversion gives.
#include "oracles/rmsnorm_quant.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include "oracles/rmsnorm.h"

namespace ulpcheck {

namespace {

using fp8_quant::Interval;

/// A real bound widened by 2^-50 of itself: the double arithmetic of
/// fp8_quant's unrounded scales (a quotient by fmax) is within 2^-53.
double widened(double e, double x) { return e + 0x1p-50 * std::fabs(x); }

}  // namespace

QuantizedReference quantizedReference(const ReferenceTensor& norm_y, const QuantizedOutput& out, ThreadPool& pool) {
  const int64_t M = norm_y.rows, N = norm_y.cols;
  const fp8_quant::QuantSpec& q = out.quant;
  const DType qt = q.format == Fp8Format::E4M3FN ? DType::E4M3 : DType::E5M2;
  const double fmax = fp8MaxFinite(q.format);
  const bool saturates = q.overflow == Fp8Overflow::Saturate, per_token = out.per_token.has_value();
  if (norm_y.exact.size() != size_t(M * N) || norm_y.first_row != 0)
    throw std::logic_error("quantizedReference: the norm's y must be held whole");

  QuantizedReference ref;
  ref.y = ReferenceTensor::zeros("y", qt, M, N, true);
  ref.y.admissible.assign(size_t(M * N));
  const int64_t group = per_token ? out.group_columns : N, groups = (N + group - 1) / group;
  if (per_token) {
    ref.scale = ReferenceTensor::zeros("scale", DType::F32, M, groups, true);
    ref.scale.admissible.assign(size_t(M * groups));
  }
  const auto clamped = [&](double v) { return saturates ? std::clamp(v, -fmax, fmax) : v; };
  pool.forChunks(M, [&](unsigned, int64_t begin, int64_t end) {
    std::vector<Interval> part;
    for (int64_t i = begin; i < end; ++i)
      for (int64_t g = 0; g < groups; ++g) {
        // Columns [first, last) share one scale: the row's, or a group's.
        const int64_t first = g * group, last = std::min(N, first + group);
        // The group's finite y. A y that is not a number (the norm of a
        // residual_out that overflowed) is NaN in y_q; a computed scale
        // passes over it (fmaxf: vLLM, FlashInfer, CUDA) or is NaN
        // (torch.amax), and a NaN scale makes every y_q of its group NaN.
        part.clear();
        bool group_has_nan = false;
        double amax = 0;
        for (int64_t j = first; j < last; ++j) {
          const size_t at = norm_y.index(i, j);
          const double y = norm_y.exact[at], b = norm_y.budget[at];
          if (!std::isfinite(y) || std::isnan(b)) {
            group_has_nan = true;
            continue;
          }
          part.push_back({y - b, y + b});
          amax = std::max(amax, std::fabs(y));
        }
        const uint8_t nan_scale = per_token && group_has_nan ? AdmissibleValues::kNaN : 0;
        Interval scale{out.static_scale, out.static_scale};
        double exact_scale = out.static_scale;
        if (per_token) {
          const fp8_quant::ScaleBounds s = fp8_quant::perTokenScaleBounds(q, *out.per_token, part);
          // The exact scale of the exact y (unrounded, clamped as the rule clamps).
          const fp8_quant::PerTokenScale& rule = *out.per_token;
          exact_scale = std::max(std::max(amax, rule.min_amax) / rule.fmax, rule.min_scale);
          scale = s.stored;
          const double e = widened(std::max({exact_scale - s.computed.lo, s.computed.hi - exact_scale, 0.0}),
                                   exact_scale);
          const size_t at = size_t(i * groups + g);
          ref.scale.exact[at] = exact_scale;
          ref.scale.budget[at] = budgetFromError(DType::F32, exact_scale, e);
          ref.scale.admissible.lo[at] = s.stored.lo;
          ref.scale.admissible.hi[at] = s.stored.hi;
          ref.scale.admissible.overflow[at] = nan_scale;
        }
        size_t next = 0;  // the element's interval in `part`
        for (int64_t j = first; j < last; ++j) {
          const size_t at = size_t(i * N + j), from = norm_y.index(i, j);
          if (!std::isfinite(norm_y.exact[from]) || std::isnan(norm_y.budget[from])) {
            ref.y.exact[at] = NAN;
            ref.y.admissible.lo[at] = INFINITY;
            ref.y.admissible.hi[at] = -INFINITY;
            ref.y.admissible.overflow[at] = AdmissibleValues::kNaN;
            continue;
          }
          const fp8_quant::Fp8Range r = fp8_quant::admissible(q, part[next++], scale);
          const double x = clamped(norm_y.exact[from] / exact_scale);
          const double e = widened(std::max({x - clamped(r.converted.lo), clamped(r.converted.hi) - x, 0.0}), x);
          ref.y.exact[at] = x;
          ref.y.budget[at] = budgetFromError(qt, x, e);
          ref.y.admissible.lo[at] = r.finite ? r.lo : INFINITY;
          ref.y.admissible.hi[at] = r.finite ? r.hi : -INFINITY;
          ref.y.admissible.overflow[at] = uint8_t((r.overflow_below ? AdmissibleValues::kOverflowBelow : 0) |
                                                  (r.overflow_above ? AdmissibleValues::kOverflowAbove : 0) |
                                                  nan_scale);
        }
      }
  });
  return ref;
}

QuantizedReference rmsnormQuantReference(const RmsNormQuantInputs& in, const AccuracyContract& contract,
                                         ThreadPool& pool, OracleMode mode) {
  // The fp32 y: rmsnorm's oracle at an fp32 output (its backward at a zero
  // gradient, unread).
  const DType T = in.x.dtype;
  const HostMatrix no_grad{T, in.x.rows, in.x.cols, in.x.cols,
                           PackedBits(storageBytes(T), size_t(in.x.rows * in.x.cols))};
  const RmsNormReference norm = rmsnormReference(
      RmsNormInputs{.x = in.x, .w = in.w, .dy = no_grad, .eps = in.eps, .spec = in.spec, .y_dtype = DType::F32},
      contract, pool, mode);
  return quantizedReference(norm.y, in.output, pool);
}

}  // namespace ulpcheck
