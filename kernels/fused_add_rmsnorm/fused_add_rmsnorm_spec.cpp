// fused_add_rmsnorm's own spec field: what its norm normalises (kNormedSum).
#include "kernels/fused_add_rmsnorm/fused_add_rmsnorm.h"

namespace ulpcheck {

const SpecField& normedSumField() {
  // Draw slot 7: after the residual's dtype.
  static const SpecField field = [] {
    SpecField f = choiceField("sum", "what the norm normalises: the rounded sum or the fp32 one", 7,
                              {"rounded", "fp32"});
    f.unsupported = [](const std::vector<SpecCode>& can, SpecCode c, DType) {
      if (takes(can, c)) return std::string();
      return std::string(c ? "normalises the rounded sum (residual_out) only" : "normalises the fp32 sum only");
    };
    f.option = "sum";  // "fp32": that one only
    f.declared = declaredName("sum", f.parse, "rounded, fp32");
    return f;
  }();
  return field;
}

}  // namespace ulpcheck
