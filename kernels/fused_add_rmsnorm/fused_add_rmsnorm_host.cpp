// The host fused add + RMSNorm: the residual added in fp32 and rounded to the
// residual's dtype into residual_out, then rmsnorm's host forward on what the
// spec normalises (residual_out, or under sum=fp32 the fp32 sums kept aside).
#include <vector>

#include "kernels/common/row_host.h"
#include "kernels/common/row_plan.h"
#include "kernels/fused_add_rmsnorm/fused_add_rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm_host.h"
#include "kernels/rmsnorm/rmsnorm_plan.h"

namespace ulpcheck {

namespace {

using namespace row_host;

void forward(const FusedAddRmsNormArgs& a, const LaunchEnv& env) {
  const RowShape& s = a.shape;
  const DType rt = residualDtype(s.dtype, s.spec);
  const bool fp32_sum = kNormedSum(s.spec) == NormedSum::Fp32;
  std::vector<float> sums(fp32_sum ? size_t(s.M * s.ld) : 0);
  for (int64_t row = 0; row < s.M; ++row)
    for (int64_t col = 0; col < s.N; ++col) {
      const int64_t i = row * s.ld + col;
      const float sum = load(a.x, s.dtype, i) + load(a.residual, rt, i);  // one fp32 add
      store(a.residual_out, rt, i, static_cast<float>(roundToFormat(rt, sum)));
      if (fp32_sum) sums[size_t(i)] = sum;
    }
  std::vector<float> rstd(size_t(s.M));
  RmsNormForwardArgs f{s, fp32_sum ? static_cast<const void*>(sums.data()) : a.residual_out, a.w, a.y, rstd.data()};
  if (fp32_sum || rt != s.dtype) f.x_dtype = DType::F32;  // an fp32 value normalised into T
  rmsnorm_host::forward(f, env);
}

const bool registered = [] {
  KernelInfo info{"fused_add_rmsnorm",
                  "host_fused_add",
                  Backend::Host,
                  {DType::F32, DType::F16, DType::BF16},
                  Contracts{},
                  "the residual add in fp32, rounded into residual_out, then rmsnorm's host forward",
                  "",
                  ""};
  info.specs = SpecSupport{}
                   .with(kWeightDtype, {std::nullopt, DType::F32})
                   .with(kWeightOffset, {0.f, 1.f})
                   .with(kResidualDtype, {std::nullopt, DType::F32})
                   .with(kNormedSum, {NormedSum::Rounded, NormedSum::Fp32});
  return FusedAddRmsNormRegistry::add(
      FusedAddRmsNormKernel{row_plan::withRowPaths(std::move(info), {.backward = false}),
                            [](const RowShape&, const LaunchEnv&) { return size_t(0); }, forward,
                            [](const RowShape& s, const LaunchEnv& env) {
                              return row_plan::reductionDepths(s, env, row_plan::DwStrategy::Separate);
                            }});
}();

}  // namespace

}  // namespace ulpcheck
