// fused_add_rmsnorm's doors (kernels/door.h): its tensors' names in the
// worker protocol, its entry points in the C ABI (forward: version 2;
// backward: version 3, optional).
#include "kernels/door.h"
#include "kernels/fused_add_rmsnorm/fused_add_rmsnorm.h"
#include "kernels/plugin/plugin_variant.h"

namespace ulpcheck {

namespace {

FusedAddRmsNormKernel forwarded(FusedAddRmsNormKernel k, RemoteEntry call) {
  k.info.remote = true;
  k.forward = [call](const FusedAddRmsNormArgs& a, const LaunchEnv& e) {
    call("fused_add_rmsnorm_forward", a.shape, e,
         {{"x", a.x}, {"residual", a.residual}, {"w", a.w}, {"residual_out", a.residual_out}, {"y", a.y}});
  };
  k.backward = [call](const FusedAddRmsNormBackwardArgs& a, const LaunchEnv& e) {
    call("fused_add_rmsnorm_backward", a.shape, e,
         {{"x", a.x},
          {"residual", a.residual},
          {"w", a.w},
          {"dy", a.dy},
          {"dresidual_out", a.dresidual_out},
          {"dx", a.dx},
          {"dresidual", a.dresidual},
          {"dw", a.dw},
          {"workspace", a.workspace}});
  };
  return k;
}

const FusedAddRmsNormKernel& variantNamed(const std::string& name) {
  return registeredVariant<FusedAddRmsNormKernel>("fused_add_rmsnorm", name);
}

// The C ABI's fused add + RMSNorm: the residual and residual_out (and their
// gradients) in the residual's dtype, w and dw in the weights'. Offset and
// sum need nothing: a variant implements the one it declares.
void addPlugin(const KernelInfo& declared, std::shared_ptr<const PluginVariant> v) {
  KernelInfo info = declared;
  FusedAddRmsNormKernel k{
      .info = {},
      .workspace_bytes = [v](const RowShape& s, const LaunchEnv&) { return v->workspaceBytes(s); },
      .forward =
          [v](const FusedAddRmsNormArgs& f, const LaunchEnv& e) {
            const RowShape& s = f.shape;
            const DType rt = residualDtype(s.dtype, s.spec);
            const ulpcheck_fused_add_rmsnorm_forward_args a{
                abiTensor(f.x, s.dtype, s.M, s.N, s.ld), abiTensor(f.residual, rt, s.M, s.N, s.ld),
                abiTensor(f.w, s.wdtype(), 1, s.N, s.N), abiTensor(f.residual_out, rt, s.M, s.N, s.ld),
                abiTensor(f.y, s.dtype, s.M, s.N, s.ld), s.eps};
            const ulpcheck_launch l = v->launch(e, nullptr, 0);
            v->check(v->abi().fused_add_rmsnorm_forward(&a, &l), "fused_add_rmsnorm_forward");
          },
      .backward = nullptr,
      .depths = [v](const RowShape& s, const LaunchEnv&) { return v->depths(s); }};
  if (v->abi().fused_add_rmsnorm_backward) {
    k.backward = [v](const FusedAddRmsNormBackwardArgs& b, const LaunchEnv& e) {
      const RowShape& s = b.shape;
      const DType rt = residualDtype(s.dtype, s.spec);
      const ulpcheck_fused_add_rmsnorm_backward_args a{abiTensor(b.x, s.dtype, s.M, s.N, s.ld),
                                                       abiTensor(b.residual, rt, s.M, s.N, s.ld),
                                                       abiTensor(b.w, s.wdtype(), 1, s.N, s.N),
                                                       abiTensor(b.dy, s.dtype, s.M, s.N, s.ld),
                                                       abiTensor(b.dresidual_out, rt, s.M, s.N, s.ld),
                                                       abiTensor(b.dx, s.dtype, s.M, s.N, s.ld),
                                                       abiTensor(b.dresidual, rt, s.M, s.N, s.ld),
                                                       abiTensor(b.dw, s.wdtype(), 1, s.N, s.N),
                                                       s.eps};
      const ulpcheck_launch l = v->launch(e, b.workspace, v->workspaceBytes(s));
      v->check(v->abi().fused_add_rmsnorm_backward(&a, &l), "fused_add_rmsnorm_backward");
    };
  } else {
    const std::vector<std::string>& leaves = fusedAddRmsNormBackwardOutputs();
    info.unprovided_outputs.insert(info.unprovided_outputs.end(), leaves.begin(), leaves.end());
  }
  k.info = std::move(info);
  FusedAddRmsNormRegistry::add(std::move(k));
}

const bool registered = registerDoor(withRegistry<FusedAddRmsNormKernel>(
    OpDoor{
        .op = "fused_add_rmsnorm",
        .statistics = {},
        .backward_outputs = fusedAddRmsNormBackwardOutputs(),
        .entries = {{"fused_add_rmsnorm_forward",
                     [](const std::string& name, const RowShape& s, const TensorAt& at, const LaunchEnv& env) {
                       variantNamed(name).forward(FusedAddRmsNormArgs{.shape = s,
                                                                      .x = at("x"),
                                                                      .residual = at("residual"),
                                                                      .w = at("w"),
                                                                      .residual_out = at("residual_out"),
                                                                      .y = at("y")},
                                                  env);
                     }},
                    {"fused_add_rmsnorm_backward",
                     [](const std::string& name, const RowShape& s, const TensorAt& at, const LaunchEnv& env) {
                       const FusedAddRmsNormKernel& k = variantNamed(name);
                       if (!k.backward) throw std::invalid_argument(name + " has no backward");
                       k.backward(FusedAddRmsNormBackwardArgs{.shape = s,
                                                              .x = at("x"),
                                                              .residual = at("residual"),
                                                              .w = at("w"),
                                                              .dy = at("dy"),
                                                              .dresidual_out = at("dresidual_out"),
                                                              .dx = at("dx"),
                                                              .dresidual = at("dresidual"),
                                                              .dw = at("dw"),
                                                              .workspace = at("workspace")},
                                  env);
                     }}},
        .plugin_problem = [](const ulpcheck_variant& v) -> std::string {
          if (!v.fused_add_rmsnorm_forward) return "fused_add_rmsnorm needs its forward entry point (ABI version 2)";
          return noLayerNormStatistics(v);
        },
        .add_plugin = addPlugin,
        .plugin_spec_options = {"fp32_weights", "rounding", "weight_offset", "fp32_residual", "sum"},
    },
    forwarded));

}  // namespace

}  // namespace ulpcheck
