// allreduce_rmsnorm's own spec field: the residual's dtype (kResidualDtype).
#include <fmt/format.h>

#include "core/case_spec.h"
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm.h"

namespace ulpcheck {

const SpecField& residualDtypeField() {
  // Draw slot 6: after the fields of RMSNorm and LayerNorm.
  static const SpecField field = [] {
    SpecField f = dtypeField("res", "the residual's dtype", 6);
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
    return f;
  }();
  return field;
}

}  // namespace ulpcheck
