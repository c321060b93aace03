// LayerNorm's own spec field: which affine parameters it has (kAffine, layernorm.h).
#include <nlohmann/json.hpp>

#include "kernels/layernorm/layernorm.h"

namespace ulpcheck {

const SpecField& affineField() {
  // Draw slot 3: after wdtype, rounding and offset.
  static const SpecField field = [] {
    SpecField f = choiceField("affine", "which affine parameters there are", 3, {"full", "nobias", "none"});
    const std::vector<SpecCode> all{kAffine.code(Affine::Full), kAffine.code(Affine::NoBias),
                                    kAffine.code(Affine::None)};
    f.unsupported = unlessListed("implements LayerNorm with gamma and beta only");
    // Without beta (torch.nn.LayerNorm(bias=False)) and without either
    // parameter (elementwise_affine=False), 1 in 4 each.
    f.draws = [](const std::vector<SpecCode>& can, DType) {
      if (can.size() == 1) return std::vector<SpecDraw>{{1, can[0]}};
      std::vector<SpecDraw> d;
      for (SpecCode c : can) d.push_back({c == 0 ? size_t(2) : size_t(1), c});
      return d;
    };
    f.option = "affine_variants";  // true: all three
    f.declared = [all](const nlohmann::json& v) {
      return declaredFlag("affine_variants", v) ? all : std::vector<SpecCode>{0};
    };
    return f;
  }();
  return field;
}

}  // namespace ulpcheck
