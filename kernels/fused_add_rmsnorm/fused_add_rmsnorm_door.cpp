// fused_add_rmsnorm's doors (kernels/door.h): its tensors' names in the
// worker protocol, its entry point in the C ABI (version 2).
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
  return k;
}

const FusedAddRmsNormKernel& variantNamed(const std::string& name) {
  return registeredVariant<FusedAddRmsNormKernel>("fused_add_rmsnorm", name);
}

// The C ABI's fused add + RMSNorm: the residual and residual_out in the
// residual's dtype, w in the weights'. Offset and sum need nothing: a
// variant implements the one it declares.
void addPlugin(const KernelInfo& info, std::shared_ptr<const PluginVariant> v) {
  FusedAddRmsNormRegistry::add(FusedAddRmsNormKernel{
      info, [v](const RowShape& s, const LaunchEnv&) { return v->workspaceBytes(s); },
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
      [v](const RowShape& s, const LaunchEnv&) { return v->depths(s); }});
}

const bool registered = registerDoor(withRegistry<FusedAddRmsNormKernel>(
    OpDoor{
        .op = "fused_add_rmsnorm",
        .statistics = {},
        .entries = {{"fused_add_rmsnorm_forward",
                     [](const std::string& name, const RowShape& s, const TensorAt& at, const LaunchEnv& env) {
                       variantNamed(name).forward(FusedAddRmsNormArgs{.shape = s,
                                                                      .x = at("x"),
                                                                      .residual = at("residual"),
                                                                      .w = at("w"),
                                                                      .residual_out = at("residual_out"),
                                                                      .y = at("y")},
                                                  env);
                     }}},
        .plugin_problem = [](const ulpcheck_variant& v) -> std::string {
          if (v.fused_add_rmsnorm_forward) return "";
          return "fused_add_rmsnorm needs its forward entry point (ABI version 2)";
        },
        .add_plugin = addPlugin,
        .plugin_spec_options = {"fp32_weights", "weight_offset", "fp32_residual", "sum"},
    },
    forwarded));

}  // namespace

}  // namespace ulpcheck
