// The inputs of an rmsnorm_quant case, as every run and the oracle generate
// them: x from the case's distribution and w around 1, as RMSNorm's, and
// under quant=static one fp32 scale. Padding columns hold the dtype's NaN
// poison. Also what every op with an FP8 output (rmsnorm_quant,
// fused_add_rmsnorm_quant) shares: the static scale, the oracle's view of
// the spec's chain, the quantized outputs' buffers and their second poison.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/case_spec.h"
#include "core/datagen.h"
#include "core/rng.h"
#include "kernels/rmsnorm_quant/rmsnorm_quant.h"
#include "oracles/rmsnorm_quant.h"
#include "properties/op.h"
#include "properties/rmsnorm_inputs.h"
#include "properties/run_buffers.h"

namespace ulpcheck {

/// quant=static's scale: (1 + k/16) 2^e / fmax for k in 0..15 and e in
/// -1..4, from the case's seed. A normal row's largest |y| is 2 to 5 (w
/// around 1), so its largest |y| / s lands from a quarter of fmax (the
/// smallest values in the format's subnormals) to 20 times it (overflow:
/// saturation, or NaN and Inf, is reached in about half the cases).
inline float staticQuantScale(const CaseSpec& c) {
  const uint64_t h = counterHash(c.seed, uint64_t(TensorStream::QuantScale), 0);
  const int k = int(h & 15), e = int((h >> 4) % 6) - 1;
  return float(std::ldexp(1.0 + k / 16.0, e)) / float(fp8MaxFinite(kFp8Format(c.spec)));
}

struct RmsNormQuantInputData {
  HostMatrix x, w, scale;     // scale: 1 x 1 fp32 (quant=static; unused under token)
  std::vector<int64_t> rows;  // the logical ids they were made at
};

/// quant=static's scale as a 1 x 1 fp32 input.
inline HostMatrix staticQuantScaleInput(const CaseSpec& c) {
  HostMatrix scale{DType::F32, 1, 1, 1, PackedBits(4, 1)};
  scale.bits.set(0, doubleToBits(DType::F32, staticQuantScale(c)));
  return scale;
}

/// Rows at the logical ids of `rows` (identityRows(c.M) for the case itself).
inline RmsNormQuantInputData generateRmsNormQuantInputs(const CaseSpec& c, const std::vector<int64_t>& rows) {
  const DType wt = weightDtype(c.dtype, c.spec);
  return RmsNormQuantInputData{
      generateHost(c.x, c.dtype, c.seed, TensorStream::X, rows, c.N, c.ld, poisonBits(c.dtype)),
      generateHost(rmsNormWeightDist(c.spec), wt, c.seed, TensorStream::Weight, {0}, c.N, c.N, poisonBits(wt)),
      staticQuantScaleInput(c), rows};
}

/// The spec's chain and scale rule, for the oracle (oracles/rmsnorm_quant.h).
inline QuantizedOutput quantizedOutputOf(const CaseSpec& c) {
  QuantizedOutput out;
  fp8_quant::QuantSpec& q = out.quant;
  q.format = kFp8Format(c.spec);
  q.overflow = kFp8Overflow(c.spec);
  if (kScaledInT(c.spec) && c.dtype != DType::F32) q.y_rounded_to = c.dtype;
  const ScaleInverse inverse = kScaleInverse(c.spec);
  q.apply = inverse == ScaleInverse::Divide ? fp8_quant::Apply::Divide : fp8_quant::Apply::Reciprocal;
  // rcp.approx.ftz.f32 and fast-math division: within 2^-23 (PTX ISA).
  q.reciprocal_error = inverse == ScaleInverse::Approx ? 0x1p-23 : 0.0;
  if (kQuantScale(c.spec) == QuantScale::Static) {
    out.static_scale = staticQuantScale(c);
  } else {
    out.per_token = fp8_quant::PerTokenScale{.fmax = fp8MaxFinite(q.format), .min_scale = minTokenScale(q.format)};
    out.group_columns = scaleGroupColumns(c.spec, c.N);
  }
  return out;
}

/// The quantized outputs of one run of an M-row layout: y_q poisoned with
/// `poison`, and the static scale (an input) or the computed scales (an
/// output, M x groups).
struct QuantizedBuffers {
  void* y = nullptr;
  const float* static_scale = nullptr;
  float* scale = nullptr;
};

inline QuantizedBuffers quantizedBuffers(RunBuffers& buf, const CaseSpec& c, int64_t M, const HostMatrix& static_scale,
                                         uint32_t poison) {
  QuantizedBuffers q;
  q.y = buf.output("y", quantDtype(c.spec), M, c.N, c.ld, true, poison);
  const int64_t groups = scaleGroups(c.spec, c.N);
  if (kQuantScale(c.spec) == QuantScale::Static)
    q.static_scale = static_cast<const float*>(buf.input("static_scale", static_scale));
  else q.scale = static_cast<float*>(buf.output("scale", DType::F32, M, groups, groups, true));
  return q;
}

/// A run of an op with an FP8 output: runOnce(ctx, poison) once with the
/// dtype's poison. An unwritten fp8 element holds E4M3's NaN; where the spec
/// overflows to non-finite values that is a legal output, so a run that
/// leaves any runs again poisoned with -0 (recountUnwritten).
template <typename RunOnce>
RunResult runWithFp8Poisons(const CaseSpec& c, const ExecContext& ctx, RunOnce&& runOnce) {
  constexpr uint32_t kSecondFp8Poison = 0x80;
  const uint32_t poison = poisonBits(quantDtype(c.spec));
  RunResult r = runOnce(ctx, poison);
  if (r.memory.unwritten > 0 && kFp8Overflow(c.spec) == Fp8Overflow::NonFinite) {
    ExecContext again = ctx;
    again.repeats = nullptr;
    recountUnwritten(r, poison, runOnce(again, kSecondFp8Poison), kSecondFp8Poison, "y");
  }
  return r;
}

/// describeInputs of the quantized outputs: the scale a y_q element's group
/// has (appended to its inputs), or what a computed scale is of.
inline std::string quantScaleOfElement(const CaseSpec& c, int64_t row, int64_t col) {
  const int64_t group = scaleGroupColumns(c.spec, c.N);
  return group ? fmt::format(" (the scale of row {}, columns {}..)", row, col / group * group)
               : fmt::format(" scale={}", hexFloat(staticQuantScale(c)));
}
inline std::string describeComputedScale(const CaseSpec& c, int64_t row, int64_t col) {
  const int64_t group = scaleGroupColumns(c.spec, c.N);
  return fmt::format("the largest |y| of row {}, columns {}..{}", row, col * group,
                     std::min(c.N, (col + 1) * group) - 1);
}

}  // namespace ulpcheck
