#include "oracles/fp8_quant.h"

#include <algorithm>
#include <cmath>

namespace ulpcheck::fp8_quant {

namespace {

double nearest32(double x) { return roundToFormat(DType::F32, x); }

/// The largest fp32 value at or below x, and the smallest at or above.
double down32(double x) {
  const double r = nearest32(x);
  return r > x ? double(std::nextafter(float(r), -INFINITY)) : r;
}
double up32(double x) {
  const double r = nearest32(x);
  return r < x ? double(std::nextafter(float(r), INFINITY)) : r;
}

/// The fp32 values a kernel's y may take in the real interval; where none
/// (a bound narrower than fp32's spacing), the nearest ones outward.
Interval fp32Values(Interval real) {
  const Interval inner = fp32Within(real);
  return inner.lo <= inner.hi ? inner : Interval{down32(real.lo), up32(real.hi)};
}

/// The spec's y as it is scaled: the fp32 y, or it rounded to T.
double scaledInput(const QuantSpec& spec, double y) {
  return spec.y_rounded_to ? roundToFormat(*spec.y_rounded_to, y) : y;
}

/// The fp32 value the chain converts to fp8.
double product(const QuantSpec& spec, double y, double by) {
  const double v = scaledInput(spec, y);
  return nearest32(spec.apply == Apply::Reciprocal ? v * by : v / by);
}

bool overflows(const QuantSpec& spec, double p) {
  return spec.overflow == Fp8Overflow::NonFinite && !std::isfinite(roundToFp8(spec.format, p, Fp8Overflow::NonFinite));
}

}  // namespace

bool Fp8Range::admits(Fp8Format f, double v) const {
  if (std::isnan(v)) return f == Fp8Format::E4M3FN && (overflow_below || overflow_above);
  if (std::isinf(v)) return v > 0 ? overflow_above : overflow_below;
  return finite && lo <= v && v <= hi;
}

Interval fp32Within(Interval real) { return {up32(real.lo), down32(real.hi)}; }

Interval reciprocalRange(const QuantSpec& spec, Interval scale) {
  // 1/s is decreasing in s; the nearest fp32 value to it nondecreasing in 1/s.
  Interval m{nearest32(1.0 / scale.hi), nearest32(1.0 / scale.lo)};
  if (spec.reciprocal_error > 0) {
    // Widened by the reciprocal's error, and by 2^-50 for the double
    // products' own rounding, then to the fp32 grid outward.
    const double widen = spec.reciprocal_error + 0x1p-50;
    m.lo = std::min(m.lo, down32(1.0 / scale.hi * (1 - widen)));
    m.hi = std::max(m.hi, up32(1.0 / scale.lo * (1 + widen)));
  }
  return m;
}

double quantize(const QuantSpec& spec, double y, double by) {
  return roundToFp8(spec.format, product(spec, y, by), spec.overflow);
}

Fp8Range admissible(const QuantSpec& spec, Interval y, Interval scale) {
  const Interval ys = fp32Values(y);
  const Interval by = spec.apply == Apply::Reciprocal ? reciprocalRange(spec, scale) : scale;
  // The chain is monotone in y, and in the scale's side one way or the
  // other by y's sign: its extremes are at the corners.
  double low = INFINITY, high = -INFINITY;
  for (const double yv : {ys.lo, ys.hi})
    for (const double b : {by.lo, by.hi}) {
      const double p = product(spec, yv, b);
      low = std::min(low, p);
      high = std::max(high, p);
    }
  Fp8Range r;
  r.converted = {low, high};
  r.lo = roundToFp8(spec.format, low, Fp8Overflow::Saturate);
  r.hi = roundToFp8(spec.format, high, Fp8Overflow::Saturate);
  r.overflow_below = overflows(spec, low) && low < 0;
  r.overflow_above = overflows(spec, high) && high > 0;
  // Every value overflows where even the nearest end does.
  r.finite = !((overflows(spec, low) && low > 0) || (overflows(spec, high) && high < 0));
  return r;
}

Interval perTokenScale(const QuantSpec& spec, const PerTokenScale& rule, const std::vector<Interval>& row) {
  return perTokenScaleBounds(spec, rule, row).stored;
}

ScaleBounds perTokenScaleBounds(const QuantSpec& spec, const PerTokenScale& rule, const std::vector<Interval>& row) {
  // amax = max_j |y_j| is nondecreasing in each |y_j|.
  Interval amax{0, 0};
  for (const Interval& e : row) {
    const Interval ys = fp32Values(e);
    const double lo = scaledInput(spec, ys.lo), hi = scaledInput(spec, ys.hi);
    const double smallest = lo <= 0 && hi >= 0 ? 0.0 : std::min(std::fabs(lo), std::fabs(hi));
    amax.lo = std::max(amax.lo, smallest);
    amax.hi = std::max(amax.hi, std::max(std::fabs(lo), std::fabs(hi)));
  }
  const double inverse_fmax = nearest32(1.0 / rule.fmax);
  // The scale before its rounding to fp32; a clamp after the division
  // commutes with it (min_scale is an fp32 value: fl(max(v, m)) = max(fl(v), m)).
  const auto computed = [&](double a) {
    if (rule.clamp_amax_first) a = std::max(a, rule.min_amax);
    const double s = rule.by_reciprocal ? a * inverse_fmax : a / rule.fmax;
    return rule.clamp_amax_first ? s : std::max(s, rule.min_scale);
  };
  const Interval before{computed(amax.lo), computed(amax.hi)};
  return {{nearest32(before.lo), nearest32(before.hi)}, before};
}

}  // namespace ulpcheck::fp8_quant
