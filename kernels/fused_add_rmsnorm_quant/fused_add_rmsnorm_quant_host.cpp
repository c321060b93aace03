// The host fused add + RMSNorm + FP8 quantization: fused_add_rmsnorm's
// residual add (residual_out, and the fp32 sums under sum=fp32), rmsnorm's
// host forward of what the spec normalises into an fp32 y, then
// rmsnorm_quant's chain on it.
#include <vector>

#include "kernels/common/row_plan.h"
#include "kernels/fused_add_rmsnorm/fused_add_rmsnorm_host.h"
#include "kernels/fused_add_rmsnorm_quant/fused_add_rmsnorm_quant.h"
#include "kernels/fused_add_rmsnorm_quant/fused_add_rmsnorm_quant_host.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm_host.h"
#include "kernels/rmsnorm_quant/rmsnorm_quant_host.h"

namespace ulpcheck {

namespace {

void forward(const FusedAddRmsNormQuantArgs& a, const LaunchEnv& env, const fused_add_quant_host::Defects& d) {
  const RowShape& s = a.shape;
  const DType rt = residualDtype(s.dtype, s.spec);
  const std::vector<float> sums = fused_add_host::addResidual(s, a.x, a.residual, a.residual_out);
  // The norm of the fp32 sums or of residual_out, as an fp32 y; the
  // mutant's of residual_out whatever the spec says.
  const bool of_sums = !sums.empty() && !d.norm_of_rounded_sum;
  std::vector<float> y(size_t(s.M * s.ld)), rstd(size_t(s.M));
  RmsNormForwardArgs norm{rmsnorm_quant_host::fp32Shape(s),
                          of_sums ? static_cast<const void*>(sums.data()) : a.residual_out, a.w, y.data(), rstd.data()};
  norm.x_dtype = of_sums ? DType::F32 : rt;
  rmsnorm_host::forward(norm, env);
  rmsnorm_quant_host::quantize(s, y.data(), a.static_scale, a.y, a.scale);
}

}  // namespace

namespace fused_add_quant_host {

bool registerPort(const char* name, const char* description, const char* bug, const char* caught_by, Defects defects) {
  KernelInfo info{"fused_add_rmsnorm_quant",
                  name,
                  Backend::Host,
                  {DType::F32, DType::F16, DType::BF16},
                  Contracts{},
                  description,
                  bug,
                  caught_by};
  info.specs = SpecSupport{}
                   .with(kWeightDtype, {std::nullopt, DType::F32})
                   .with(kWeightOffset, {0.f, 1.f})
                   .with(kResidualDtype, {std::nullopt, DType::F32})
                   .with(kNormedSum, {NormedSum::Rounded, NormedSum::Fp32});
  withEveryQuantChoice(info.specs);
  return FusedAddRmsNormQuantRegistry::add(FusedAddRmsNormQuantKernel{
      .info = std::move(info),
      .forward = [defects](const FusedAddRmsNormQuantArgs& a, const LaunchEnv& e) { forward(a, e, defects); },
      .depths =
          [](const RowShape& s, const LaunchEnv& env) {
            return row_plan::reductionDepths(rmsnorm_quant_host::fp32Shape(s), env, row_plan::DwStrategy::Separate);
          }});
}

}  // namespace fused_add_quant_host

namespace {
const bool registered = fused_add_quant_host::registerPort(
    "host_fused_add_rmsnorm_quant",
    "the residual add in fp32, rounded into residual_out, rmsnorm's host forward of the spec's sum into fp32, then "
    "rmsnorm_quant's scale, reciprocal or quotient and fp8 conversion to nearest even",
    "", "", {});
}  // namespace

}  // namespace ulpcheck
