// rmsnorm_quant's own spec fields (rmsnorm_quant.h): where the scale comes
// from, the fp8 format and its overflow rule, what is scaled, and how the
// scale is applied. A variant declares the one value of each it implements
// (Python: ulpcheck.rmsnorm_quant(..., quant="token", fp8="e4m3", ...)).
#include "kernels/rmsnorm_quant/rmsnorm_quant.h"

namespace ulpcheck {

namespace {

/// A choice field declared by one of its names, as `option`.
SpecField declaredChoice(const char* key, const char* meaning, int draw_slot, std::vector<std::string> names) {
  std::string all;
  for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
  SpecField f = choiceField(key, meaning, draw_slot, std::move(names));
  f.option = key;
  f.declared = declaredName(key, f.parse, all);
  return f;
}

}  // namespace

// Draw slots 9 to 13: after allreduce_rmsnorm's acc (8).
const SpecField& quantScaleField() {
  static const SpecField field = declaredChoice(
      "quant", "where the fp8 scale comes from: given, per row (token) or per group of a row's columns", 9,
      {"static", "token", "group128", "group64"});
  return field;
}

const SpecField& fp8FormatField() {
  static const SpecField field = declaredChoice("fp8", "the fp8 format of the quantized output", 10, {"e4m3", "e5m2"});
  return field;
}

const SpecField& fp8OverflowField() {
  // satfinite: CUDA's cvt .satfinite (FlashInfer, vLLM); nonfinite: torch's casts.
  static const SpecField field = declaredChoice("overflow",
                                                "what an fp8 value past the largest finite one becomes: it, or NaN/Inf",
                                                11, {"satfinite", "nonfinite"});
  return field;
}

const SpecField& scaledInTField() {
  // In a case string scaled=fp32 (the default) or, in a bf16 case,
  // scaled=bf16; declared scaled="activation".
  static const SpecField field = fp32OrActivationField(
      "scaled", "what is scaled: the fp32 y or y rounded to the activation dtype", 12, "scaled", "scales y");
  return field;
}

const SpecField& scaleInverseField() {
  static const SpecField field = declaredChoice(
      "inverse", "how the scale is applied: times fl(1/s), times an approximate 1/s, or y / s", 13,
      {"exact", "approx", "divide"});
  return field;
}

}  // namespace ulpcheck
