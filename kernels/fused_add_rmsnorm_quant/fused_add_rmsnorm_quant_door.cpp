// fused_add_rmsnorm_quant's doors (kernels/door.h): its tensors' names in
// the worker protocol. The C ABI has no entry point for it yet (its
// plugin variants are refused, saying so).
#include "kernels/door.h"
#include "kernels/fused_add_rmsnorm_quant/fused_add_rmsnorm_quant.h"

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
        .plugin_problem = [](const ulpcheck_variant&) -> std::string {
          return "fused_add_rmsnorm_quant has no C ABI entry point yet: test it through the Python door";
        },
        .add_plugin = nullptr,
        .plugin_spec_options = {},
    },
    forwarded));

}  // namespace

}  // namespace ulpcheck
