// The host fused add + RMSNorm: the residual added in fp32 and rounded to the
// residual's dtype into residual_out, then rmsnorm's host forward on what the
// spec normalises (residual_out, or under sum=fp32 the fp32 sums kept aside).
// Its backward runs that forward again for what it saves (residual_out and
// rstd), then rmsnorm's host backward at residual_out with the gradient
// reaching it added to dx (rmsnorm_host::ResidualGradients).
#include <cstdint>
#include <vector>

#include "kernels/common/row_host.h"
#include "kernels/common/row_plan.h"
#include "kernels/fused_add_rmsnorm/fused_add_rmsnorm.h"
#include "kernels/fused_add_rmsnorm/fused_add_rmsnorm_host.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm_host.h"
#include "kernels/rmsnorm/rmsnorm_plan.h"

namespace ulpcheck {

namespace {

using namespace row_host;

/// The forward into residual_out and y; returns the rstd of every row.
std::vector<float> addAndNormalise(const FusedAddRmsNormArgs& a, const LaunchEnv& env) {
  const RowShape& s = a.shape;
  const DType rt = residualDtype(s.dtype, s.spec);
  const bool fp32_sum = kNormedSum(s.spec) == NormedSum::Fp32;
  const std::vector<float> sums = fused_add_host::addResidual(s, a.x, a.residual, a.residual_out);
  std::vector<float> rstd(size_t(s.M));
  RmsNormForwardArgs f{s, fp32_sum ? static_cast<const void*>(sums.data()) : a.residual_out, a.w, a.y, rstd.data()};
  if (fp32_sum || rt != s.dtype) f.x_dtype = DType::F32;  // an fp32 value normalised into T
  rmsnorm_host::forward(f, env);
  return rstd;
}

void forward(const FusedAddRmsNormArgs& a, const LaunchEnv& env) { addAndNormalise(a, env); }

void backward(const FusedAddRmsNormBackwardArgs& b, const LaunchEnv& env, const fused_add_host::Defects& defects) {
  const RowShape& s = b.shape;
  const DType rt = residualDtype(s.dtype, s.spec);
  // What the forward saves: residual_out (4 bytes hold any dtype's element), rstd.
  std::vector<uint32_t> residual_out(size_t(s.M * s.ld)), y(size_t(s.M * s.ld));
  const std::vector<float> rstd = addAndNormalise(
      FusedAddRmsNormArgs{s, b.x, b.residual, b.w, residual_out.data(), y.data()}, env);
  rmsnorm_host::ResidualGradients residual{.x_dtype = rt,
                                           .dresidual_out = b.dresidual_out,
                                           .dresidual = b.dresidual,
                                           .residual_dtype = rt,
                                           .added_before_the_norm = defects.residual_grad_through_norm};
  rmsnorm_host::backward(RmsNormBackwardArgs{s, residual_out.data(), b.w, b.dy, rstd.data(), b.dx, b.dw, b.workspace},
                         env, row_plan::DwStrategy::Separate, {}, residual);
}

}  // namespace

namespace fused_add_host {

std::vector<float> addResidual(const RowShape& s, const void* x, const void* residual, void* residual_out) {
  using namespace row_host;
  const DType rt = residualDtype(s.dtype, s.spec);
  const bool fp32_sum = kNormedSum(s.spec) == NormedSum::Fp32;
  std::vector<float> sums(fp32_sum ? size_t(s.M * s.ld) : 0);
  for (int64_t row = 0; row < s.M; ++row)
    for (int64_t col = 0; col < s.N; ++col) {
      const int64_t i = row * s.ld + col;
      const float sum = load(x, s.dtype, i) + load(residual, rt, i);  // one fp32 add
      store(residual_out, rt, i, static_cast<float>(roundToFormat(rt, sum)));
      if (fp32_sum) sums[size_t(i)] = sum;
    }
  return sums;
}

bool registerPort(const char* name, const char* description, const char* bug, const char* caught_by, Defects defects) {
  KernelInfo info{"fused_add_rmsnorm", name,        Backend::Host, {DType::F32, DType::F16, DType::BF16},
                  Contracts{},         description, bug,           caught_by};
  info.specs = SpecSupport{}
                   .with(kWeightDtype, {std::nullopt, DType::F32})
                   .with(kRounding, {Rounding::Plain, Rounding::Llama})
                   .with(kWeightOffset, {0.f, 1.f})
                   .with(kResidualDtype, {std::nullopt, DType::F32})
                   .with(kNormedSum, {NormedSum::Rounded, NormedSum::Fp32});
  return FusedAddRmsNormRegistry::add(FusedAddRmsNormKernel{
      .info = row_plan::withRowPaths(std::move(info), {.backward = true}),
      .workspace_bytes = rmsnorm_plan::workspaceBytes,
      .forward = forward,
      .backward = [defects](const FusedAddRmsNormBackwardArgs& b, const LaunchEnv& e) { backward(b, e, defects); },
      .depths =
          [](const RowShape& s, const LaunchEnv& env) {
            return row_plan::reductionDepths(s, env, row_plan::DwStrategy::Separate);
          }});
}

}  // namespace fused_add_host

namespace {
const bool registered = fused_add_host::registerPort(
    "host_fused_add",
    "the residual add in fp32, rounded into residual_out, then rmsnorm's host forward; its backward rmsnorm's host "
    "backward at residual_out plus dresidual_out",
    "", "", {});
}  // namespace

}  // namespace ulpcheck
