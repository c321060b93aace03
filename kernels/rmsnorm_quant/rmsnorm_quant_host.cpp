// The host RMSNorm + FP8 quantization: rmsnorm's host forward (its plan and
// reduction order) into an fp32 y, then the spec's chain per row
// (rmsnorm_quant.h): y or round_T(y); the row's scale; the product by
// fl(1/s) (inverse=approx takes the correctly rounded one, within any
// approximate reciprocal's error) or the fp32 quotient; the fp8 conversion
// to nearest even under the spec's overflow rule.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/row_host.h"
#include "kernels/common/row_plan.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm_host.h"
#include "kernels/rmsnorm_quant/rmsnorm_quant.h"
#include "kernels/rmsnorm_quant/rmsnorm_quant_host.h"

namespace ulpcheck {

namespace {

using namespace row_host;

/// The fp8 value next to q away from zero (q finite, below the largest).
double oneCodeUp(DType qt, double q) {
  const uint32_t bits = encodeBits(qt, q);
  return q == 0.0 ? decodeBits(qt, 1) : decodeBits(qt, bits + 1);
}

/// p converted toward zero: the nearest value, or where that lies beyond p
/// the next code toward zero (codes of one sign are ordered as their magnitudes).
double truncated(DType qt, Fp8Format f, float p) {
  const double q = roundToFp8(f, p, Fp8Overflow::Saturate);
  if (!(std::fabs(q) > std::fabs(double(p)))) return q;
  return decodeBits(qt, encodeBits(qt, q) - 1);
}

void forward(const RmsNormQuantArgs& a, const LaunchEnv& env, const rmsnorm_quant_host::Defects& d) {
  const RowShape& s = a.shape;
  std::vector<float> y(size_t(s.M * s.ld)), rstd(size_t(s.M));
  RmsNormForwardArgs norm{rmsnorm_quant_host::fp32Shape(s), a.x, a.w, y.data(), rstd.data()};
  norm.x_dtype = s.dtype;
  rmsnorm_host::forward(norm, env);
  rmsnorm_quant_host::quantize(s, y.data(), a.static_scale, a.y, a.scale, d);
}

}  // namespace

namespace rmsnorm_quant_host {

RowShape fp32Shape(const RowShape& s) {
  RowShape f = s;
  f.dtype = DType::F32;
  kWeightDtype.set(f.spec, s.wdtype());
  return f;
}

void quantize(const RowShape& s, const float* y, const float* static_scale, void* y_q, float* scale_out,
              const Defects& d) {
  const Fp8Format format = kFp8Format(s.spec);
  const DType qt = quantDtype(s.spec);
  const Fp8Overflow overflow = d.no_saturation ? Fp8Overflow::NonFinite : kFp8Overflow(s.spec);
  const bool in_t = kScaledInT(s.spec), divide = kScaleInverse(s.spec) == ScaleInverse::Divide;
  const auto inT = [&](float v) { return float(roundToFormat(s.dtype, v)); };
  // Columns [begin, end) share a scale: the row's (static, token) or a group's.
  const int64_t group = scaleGroupColumns(s.spec, s.N), groups = scaleGroups(s.spec, s.N);
  const auto scaleOf = [&](const float* yr, int64_t row, int64_t begin, int64_t end) {
    if (!group) return *static_scale;
    float amax = 0.f;
    for (int64_t col = begin; col < end; ++col)
      amax = std::max(amax, std::fabs(in_t || d.token_scale_of_t_rounded_y ? inT(yr[col]) : yr[col]));
    const float scale = std::max(amax / float(fp8MaxFinite(format)), minTokenScale(format));
    scale_out[row * groups + begin / group] = scale;
    return scale;
  };
  for (int64_t row = 0; row < s.M; ++row) {
    const float* yr = y + row * s.ld;
    const auto scaled = [&](int64_t col) { return in_t ? inT(yr[col]) : yr[col]; };
    float scale = 0.f, inverse = 0.f;
    bool bumped = !d.one_element_one_ulp_off || row != s.M - 1;
    for (int64_t col = 0; col < s.N; ++col) {
      if (col == 0 || (group && col % group == 0)) {
        scale = scaleOf(yr, row, col, group ? std::min(s.N, col + group) : s.N);
        inverse = 1.0f / scale;
      }
      const float p = divide ? scaled(col) / scale : scaled(col) * inverse;
      double q = d.truncating_conversion ? truncated(qt, format, p) : roundToFp8(format, p, overflow);
      if (!bumped && std::isfinite(q) && std::fabs(q) < fp8MaxFinite(format) &&
          std::fabs(double(p) - q) <= 0.25 * ulpOf(qt, q)) {
        q = q < 0 ? -oneCodeUp(qt, -q) : oneCodeUp(qt, q);
        bumped = true;
      }
      if (d.last_element_not_stored && row == s.M - 1 && col == s.N - 1) continue;
      setElementBits(y_q, qt, row * s.ld + col, encodeBits(qt, q));
    }
  }
}

bool registerPort(const char* name, const char* description, const char* bug, const char* caught_by, Defects defects) {
  KernelInfo info{"rmsnorm_quant", name,        Backend::Host, {DType::F32, DType::F16, DType::BF16},
                  Contracts{},     description, bug,           caught_by};
  info.specs = SpecSupport{}.with(kWeightDtype, {std::nullopt, DType::F32}).with(kWeightOffset, {0.f, 1.f});
  withEveryQuantChoice(info.specs);
  return RmsNormQuantRegistry::add(RmsNormQuantKernel{
      .info = std::move(info),
      .forward = [defects](const RmsNormQuantArgs& a, const LaunchEnv& e) { forward(a, e, defects); },
      .depths =
          [](const RowShape& s, const LaunchEnv& env) {
            return row_plan::reductionDepths(rmsnorm_quant_host::fp32Shape(s), env, row_plan::DwStrategy::Separate);
          }});
}

}  // namespace rmsnorm_quant_host

namespace {
const bool registered = rmsnorm_quant_host::registerPort(
    "host_rmsnorm_quant",
    "rmsnorm's host forward into fp32, then the spec's scale, its reciprocal or quotient and the fp8 conversion to "
    "nearest even",
    "", "", {});
}  // namespace

}  // namespace ulpcheck
