#include "core/norm_spec.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/case_spec.h"

namespace ulpcheck {

namespace {

// Draw slots: the order these fields were drawn in before fields were
// descriptors (wdtype, rounding, offset, affine, stats, bias, res), kept so
// the same seeds draw the same cases.
constexpr int kWeightDtypeSlot = 0, kRoundingSlot = 1, kWeightOffsetSlot = 2, kSavedStatsSlot = 4;
// After the fields of RMSNorm (bias, 5) and LayerNorm (affine, 3).
constexpr int kResidualDtypeSlot = 6;

}  // namespace

const SpecField& weightDtypeField() {
  static const SpecField field = [] {
    SpecField f = dtypeField("wdtype", "the weights' dtype", kWeightDtypeSlot);
    const SpecCode fp32 = kWeightDtype.code(DType::F32);
    f.label = [](SpecCode c, DType a) {
      return fmt::format("w={}", dtypeName(SpecCodec<std::optional<DType>>::decode(c).value_or(a)));
    };
    f.unsupported = [fp32](const std::vector<SpecCode>& can, SpecCode c, DType) {
      if (c == 0 || (c == fp32 && takes(can, fp32))) return std::string();
      return std::string(takes(can, fp32) ? "takes weights in fp32 or in the activation dtype"
                                          : "takes weights in the activation dtype only");
    };
    // fp32 weights beside 16-bit activations (mixed-precision training,
    // where production runs) in half the cases of a variant that takes them.
    f.draws = [fp32](const std::vector<SpecCode>& can, DType a) {
      if (a != DType::F32 && takes(can, fp32)) return std::vector<SpecDraw>{{1, 0}, {1, fp32}};
      return std::vector<SpecDraw>{{1, 0}};
    };
    f.option = "fp32_weights";  // true: fp32 as well as the activation dtype
    f.declared = [fp32](const nlohmann::json& v) {
      return declaredFlag("fp32_weights", v) ? std::vector<SpecCode>{0, fp32} : std::vector<SpecCode>{0};
    };
    return f;
  }();
  return field;
}

const SpecField& roundingField() {
  static const SpecField field = [] {
    SpecField f = choiceField("rounding", "where x-hat is rounded", kRoundingSlot, {"plain", "llama"});
    f.label = [](SpecCode c, DType) { return std::string(roundingName(static_cast<Rounding>(c))); };
    f.unsupported = [](const std::vector<SpecCode>& can, SpecCode c, DType) {
      if (takes(can, c)) return std::string();
      return can.size() == 1 ? fmt::format("implements rounding={} only", roundingName(static_cast<Rounding>(can[0])))
                             : fmt::format("does not implement rounding={}", roundingName(static_cast<Rounding>(c)));
    };
    f.option = "rounding";  // "llama": that one only
    f.declared = declaredName("rounding", f.parse, "plain, llama");
    return f;
  }();
  return field;
}

const SpecField& weightOffsetField() {
  // Offsets in use are 0 and 1 (Gemma); a large one would make offset + w
  // the weight's whole value and its rounding in fp32 the whole test.
  static const SpecField field = [] {
    SpecField f = realField("offset", "the weight offset", kWeightOffsetSlot, 16.f);
    f.unsupported = [](const std::vector<SpecCode>& can, SpecCode c, DType) {
      return takes(can, c) ? std::string() : fmt::format("does not implement weight offset {:g}", c);
    };
    f.option = "weight_offset";  // 1.0: that one only
    f.declared = [](const nlohmann::json& v) {
      const double offset = declaredNumber("weight_offset", v);
      if (!(std::fabs(offset) <= 16.0) || double(float(offset)) != offset)
        throw std::invalid_argument(fmt::format("weight_offset {} is not an fp32 value in [-16, 16]", offset));
      return std::vector<SpecCode>{offset};
    };
    return f;
  }();
  return field;
}

const SpecField& savedStatsField() {
  static const SpecField field = fp32OrActivationField("stats", "the dtype of saved statistics", kSavedStatsSlot,
                                                       "stats", "saves its statistics");
  return field;
}

const SpecField& residualDtypeField() {
  static const SpecField field = [] {
    SpecField f = dtypeField("res", "the residual's dtype", kResidualDtypeSlot);
    const SpecCode fp32 = kResidualDtype.code(DType::F32);
    // quack's residual_dtype=fp32; a 16-bit residual beside other activations is nowhere in use.
    f.check = [fp32](SpecCode c, DType a) {
      if (c != 0 && c != fp32)
        throw CaseParseError(fmt::format("'res' must be fp32 or the activation dtype ({}), got {}", dtypeName(a),
                                         dtypeName(*SpecCodec<std::optional<DType>>::decode(c))));
    };
    f.unsupported = unlessListed("keeps the residual in the activation dtype only");
    // An fp32 residual beside 16-bit activations in 1 of 4 cases of a variant that takes it.
    f.draws = [](const std::vector<SpecCode>& can, DType a) {
      return a == DType::F32 ? std::vector<SpecDraw>{{1, 0}} : firstMostly(can);
    };
    f.option = "fp32_residual";  // true: an fp32 residual as well as one in the activation dtype
    f.declared = [fp32](const nlohmann::json& v) {
      return declaredFlag("fp32_residual", v) ? std::vector<SpecCode>{0, fp32} : std::vector<SpecCode>{0};
    };
    return f;
  }();
  return field;
}

}  // namespace ulpcheck
