// The CUDA fused add + RMSNorm: allreduce_rmsnorm's one-shot fused kernel at
// one rank (the rank sum of one partial is x itself), which adds the
// residual in fp32, rounds to T and normalises with rmsnorm's own CUDA row:
// the spec with sum=rounded, residual in T.
#include <stdexcept>

#include "core/cuda_ops.h"
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm.h"
#include "kernels/common/row_plan.h"
#include "kernels/fused_add_rmsnorm/fused_add_rmsnorm.h"

namespace ulpcheck {

namespace {

constexpr const char* kOneshot = "cuda_fused_oneshot";

const AllreduceRmsNormKernel& oneshot() {
  const AllreduceRmsNormKernel* k = AllreduceRmsNormRegistry::find(kOneshot);
  if (!k) throw std::logic_error("fused_add_rmsnorm: allreduce_rmsnorm's cuda_fused_oneshot is not registered");
  return *k;
}

void forward(const FusedAddRmsNormArgs& a, const LaunchEnv& env) {
  AllreduceRmsNormArgs args;
  args.shape = a.shape;
  args.ranks = 1;
  args.x[0] = a.x;
  args.residual[0] = a.residual;
  args.w[0] = a.w;
  args.residual_out[0] = a.residual_out;
  args.y[0] = a.y;
  args.device[0] = cudaops::currentDevice();
  oneshot().run(args, env);
}

const bool registered = [] {
  KernelInfo info{"fused_add_rmsnorm",
                  "cuda_fused_add",
                  Backend::Cuda,
                  {DType::F32, DType::F16, DType::BF16},
                  Contracts{},
                  "allreduce_rmsnorm's one-shot fused kernel at one rank: fp32 residual add, round to T, RMSNorm",
                  "",
                  ""};
  info.specs = SpecSupport{}.with(kWeightDtype, {std::nullopt, DType::F32}).with(kWeightOffset, {0.f, 1.f});
  info.unprovided_outputs = fusedAddRmsNormBackwardOutputs();  // forward only, as the inference kernels it ports
  return FusedAddRmsNormRegistry::add(FusedAddRmsNormKernel{
      .info = row_plan::withRowPaths(std::move(info), {true, 1, false, 0}),
      .workspace_bytes = [](const RowShape&, const LaunchEnv&) { return size_t(0); },
      .forward = forward,
      .backward = nullptr,
      .depths = [](const RowShape& s, const LaunchEnv& env) { return oneshot().depths(s, env); }});
}();

}  // namespace

}  // namespace ulpcheck
