// fused_add_rmsnorm_quant's doors (kernels/door.h): its tensors' names in
// the worker protocol, its entry point in the C ABI (version 7).
#include "kernels/door.h"
#include "kernels/fused_add_rmsnorm_quant/fused_add_rmsnorm_quant.h"
#include "kernels/plugin/plugin_variant.h"

namespace ulpcheck {

namespace {

FusedAddRmsNormQuantKernel forwarded(FusedAddRmsNormQuantKernel k, RemoteEntry call) {
  k.info.remote = true;
  k.forward = [call](const FusedAddRmsNormQuantArgs& a, const LaunchEnv& e) {
    call("fused_add_rmsnorm_quant_forward", a.shape, e,
         {{"x", a.x},
          {"residual", a.residual},
          {"w", a.w},
          {"static_scale", a.static_scale},
          {"residual_out", a.residual_out},
          {"y", a.y},
          {"scale", a.scale}});
  };
  return k;
}

// The C ABI's: the residual and residual_out in the residual's dtype, y_q
// in the spec's fp8 dtype, the static scale or the computed scales as
// rmsnorm_quant's.
void addPlugin(const KernelInfo& info, std::shared_ptr<const PluginVariant> v) {
  FusedAddRmsNormQuantRegistry::add(FusedAddRmsNormQuantKernel{
      .info = info,
      .forward =
          [v](const FusedAddRmsNormQuantArgs& f, const LaunchEnv& e) {
            const RowShape& s = f.shape;
            const DType rt = residualDtype(s.dtype, s.spec);
            const int64_t groups = scaleGroups(s.spec, s.N);
            const ulpcheck_fused_add_rmsnorm_quant_args a{abiTensor(f.x, s.dtype, s.M, s.N, s.ld),
                                                          abiTensor(f.residual, rt, s.M, s.N, s.ld),
                                                          abiTensor(f.w, s.wdtype(), 1, s.N, s.N),
                                                          abiTensor(f.static_scale, DType::F32, 1, 1, 1),
                                                          abiTensor(f.residual_out, rt, s.M, s.N, s.ld),
                                                          abiTensor(f.y, quantDtype(s.spec), s.M, s.N, s.ld),
                                                          abiTensor(f.scale, DType::F32, s.M, groups, groups),
                                                          s.eps};
            const ulpcheck_launch l = v->launch(e, nullptr, 0);
            v->check(v->abi().fused_add_rmsnorm_quant(&a, &l), "fused_add_rmsnorm_quant");
          },
      .depths = [v](const RowShape& s, const LaunchEnv&) { return v->depths(s); }});
}

const bool registered = registerDoor(withRegistry<FusedAddRmsNormQuantKernel>(
    OpDoor{
        .op = "fused_add_rmsnorm_quant",
        .statistics = {},
        .backward_outputs = {},
        .has_backward = false,
        .entries = {{"fused_add_rmsnorm_quant_forward",
                     [](const std::string& name, const RowShape& s, const TensorAt& at, const LaunchEnv& env) {
                       registeredVariant<FusedAddRmsNormQuantKernel>("fused_add_rmsnorm_quant", name)
                           .forward(
                               FusedAddRmsNormQuantArgs{.shape = s,
                                                        .x = at("x"),
                                                        .residual = at("residual"),
                                                        .w = at("w"),
                                                        .static_scale = static_cast<const float*>(at("static_scale")),
                                                        .residual_out = at("residual_out"),
                                                        .y = at("y"),
                                                        .scale = static_cast<float*>(at("scale"))},
                               env);
                     }}},
        .plugin_problem = [](const ulpcheck_variant& v) -> std::string {
          if (!v.fused_add_rmsnorm_quant) return "fused_add_rmsnorm_quant needs its entry point (ABI version 7)";
          return noLayerNormStatistics(v);
        },
        .add_plugin = addPlugin,
        .plugin_spec_options = {"fp32_weights", "weight_offset", "fp32_residual", "sum", "quant", "fp8", "overflow",
                                "scaled", "inverse"},
    },
    forwarded));

}  // namespace

}  // namespace ulpcheck
