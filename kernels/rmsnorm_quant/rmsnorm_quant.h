// RMSNorm with its output quantized to FP8 for the next FP8 GEMM: the
// inference norm of vLLM (rms_norm_static_fp8_quant,
// rms_norm_dynamic_per_token_quant), FlashInfer (rmsnorm_quant) and
// TransformerEngine. Forward only. Its spec, with T the activation dtype:
//
//   y    = RMSNorm(x) * (offset + w)        rmsnorm's forward, as an fp32 value
//   v    = y, or round_T(y)                 scaled=fp32 (FlashInfer's
//                                           rmsnorm_quant) or scaled=T (its
//                                           allreduce fusion, vLLM's static quant)
//   s    = the given fp32 scale             quant=static
//        = max(fl(amax / fmax), min_scale)  quant=token: amax = max_j |v_j| of
//                                           the row, fmax the format's largest
//                                           finite value, min_scale =
//                                           fl(1 / (512 fmax)) (FlashInfer's and
//                                           vLLM's clamp); stored, one per row;
//                                           quant=group128 / group64: the same
//                                           over each group of 128 (64) columns
//                                           of a row (vLLM's per-group quant;
//                                           where the group does not divide N
//                                           the last is shorter), stored row-
//                                           major, ceil(N / G) per row
//   p    = fl(v * fl(1/s))                  inverse=exact (FlashInfer, vLLM)
//        = fl(v * m), m within 2^-23 of 1/s inverse=approx (rcp.approx, fast math)
//        = fl(v / s)                        inverse=divide (torch's reference)
//   y_q  = fp8(p)                           round to nearest even, then past
//                                           the largest finite value: fmax
//                                           (overflow=satfinite, cvt .satfinite)
//                                           or NaN / +-Inf (overflow=nonfinite,
//                                           torch's casts)
//
// in E4M3FN (fp8=e4m3, max 448, NaN and no Inf) or E5M2 (fp8=e5m2, max
// 57344). The oracle (oracles/rmsnorm_quant.h) gives the fp8 values each
// element may take, exactly, from y's own budget (oracles/fp8_quant.h).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "core/accuracy.h"
#include "core/fp8.h"
#include "core/norm_spec.h"
#include "kernels/common/row_launch.h"
#include "kernels/registry.h"

namespace ulpcheck {

/// Where the scale comes from: given (one fp32 value), or per row (or per
/// group of a row's columns) from its largest |v|.
enum class QuantScale : uint8_t { Static = 0, Token = 1, Group128 = 2, Group64 = 3 };
inline constexpr SpecKey<QuantScale> kQuantScale{"quant"};
/// The fp8 format of y_q.
inline constexpr SpecKey<Fp8Format> kFp8Format{"fp8"};
/// What a value past the format's largest finite one becomes.
inline constexpr SpecKey<Fp8Overflow> kFp8Overflow{"overflow"};
/// What is scaled: the fp32 y (code 0), or y rounded to the activation dtype (code 1).
inline constexpr SpecKey<bool> kScaledInT{"scaled"};
/// How the scale is applied.
enum class ScaleInverse : uint8_t { Exact = 0, Approx = 1, Divide = 2 };
inline constexpr SpecKey<ScaleInverse> kScaleInverse{"inverse"};

/// Their descriptors: rmsnorm_quant_spec.cpp.
const SpecField& quantScaleField();
const SpecField& fp8FormatField();
const SpecField& fp8OverflowField();
const SpecField& scaledInTField();
const SpecField& scaleInverseField();

/// The output dtype of the spec's fp8 format.
inline DType quantDtype(const Spec& spec) { return kFp8Format(spec) == Fp8Format::E5M2 ? DType::E5M2 : DType::E4M3; }

/// The columns one computed scale covers (N per token, 128 or 64 per
/// group); 0 under quant=static.
inline int64_t scaleGroupColumns(const Spec& spec, int64_t N) {
  switch (kQuantScale(spec)) {
    case QuantScale::Static: return 0;
    case QuantScale::Token: return N;
    case QuantScale::Group128: return 128;
    case QuantScale::Group64: return 64;
  }
  return 0;
}
/// The computed scales of a row: ceil(N / group), none under quant=static.
inline int64_t scaleGroups(const Spec& spec, int64_t N) {
  const int64_t g = scaleGroupColumns(spec, N);
  return g ? (N + g - 1) / g : 0;
}

/// A per-token (or per-group) scale's lower clamp, fl(1 / (512 fmax)): FlashInfer's
/// rmsnorm_quant and vLLM's dynamic per-token quant (min_scaling_factor).
inline float minTokenScale(Fp8Format f) { return float(1.0 / (512.0 * fp8MaxFinite(f))); }

/// Declares every value of the quantization fields: a variant that
/// implements them all (ulpcheck's own ports and kernels).
inline SpecSupport& withEveryQuantChoice(SpecSupport& s) {
  return s.with(kQuantScale, {QuantScale::Static, QuantScale::Token, QuantScale::Group128, QuantScale::Group64})
      .with(kFp8Format, {Fp8Format::E4M3FN, Fp8Format::E5M2})
      .with(kFp8Overflow, {Fp8Overflow::Saturate, Fp8Overflow::NonFinite})
      .with(kScaledInT, {false, true})
      .with(kScaleInverse, {ScaleInverse::Exact, ScaleInverse::Approx, ScaleInverse::Divide});
}

struct RmsNormQuantArgs {
  RowShape shape;  // x and y_q are M x N with row stride ld; w is 1 x N
  const void* x = nullptr;
  const void* w = nullptr;              // shape.wdtype()
  const float* static_scale = nullptr;  // quant=static: one fp32 value
  void* y = nullptr;                    // quantDtype(shape.spec), a byte an element
  float* scale = nullptr;               // quant=token or group: M x scaleGroups fp32 values, row-major
};

struct RmsNormQuantKernel {
  KernelInfo info;
  std::function<void(const RmsNormQuantArgs&, const LaunchEnv&)> forward;
  /// Depths of the norm's row reduction.
  std::function<ReductionDepths(const RowShape&, const LaunchEnv&)> depths;
};

using RmsNormQuantRegistry = KernelRegistry<RmsNormQuantKernel>;

}  // namespace ulpcheck
