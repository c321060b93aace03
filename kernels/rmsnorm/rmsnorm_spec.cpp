// RMSNorm's own spec field: its bias (kRmsBias, rmsnorm.h).
#include <nlohmann/json.hpp>

#include "kernels/rmsnorm/rmsnorm.h"

namespace ulpcheck {

const SpecField& rmsBiasField() {
  // Draw slot 5: after wdtype, rounding, offset, affine and stats.
  static const SpecField field = [] {
    SpecField f = yesNoField("bias", "a bias added after the weight, y = xhat w + b", 5);
    f.unsupported = unlessListed("implements RMSNorm without a bias only");
    f.option = "bias_variants";  // true: with a bias as well as without
    f.declared = [](const nlohmann::json& v) {
      return declaredFlag("bias_variants", v) ? std::vector<SpecCode>{0, 1} : std::vector<SpecCode>{0};
    };
    return f;
  }();
  return field;
}

}  // namespace ulpcheck
