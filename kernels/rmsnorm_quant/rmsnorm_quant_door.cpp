// rmsnorm_quant's doors (kernels/door.h): its tensors' names in the worker
// protocol (the Python door). The C ABI has no entry point of it yet.
#include "kernels/door.h"
#include "kernels/rmsnorm_quant/rmsnorm_quant.h"

namespace ulpcheck {

namespace {

RmsNormQuantKernel forwarded(RmsNormQuantKernel k, RemoteEntry call) {
  k.info.remote = true;
  k.forward = [call](const RmsNormQuantArgs& a, const LaunchEnv& e) {
    call("rmsnorm_quant_forward", a.shape, e,
         {{"x", a.x}, {"w", a.w}, {"static_scale", a.static_scale}, {"y", a.y}, {"scale", a.scale}});
  };
  return k;
}

const bool registered = registerDoor(withRegistry<RmsNormQuantKernel>(
    OpDoor{
        .op = "rmsnorm_quant",
        .statistics = {},
        .backward_outputs = {},
        .has_backward = false,
        .entries = {{"rmsnorm_quant_forward",
                     [](const std::string& name, const RowShape& s, const TensorAt& at, const LaunchEnv& env) {
                       registeredVariant<RmsNormQuantKernel>("rmsnorm_quant", name)
                           .forward(RmsNormQuantArgs{.shape = s,
                                                     .x = at("x"),
                                                     .w = at("w"),
                                                     .static_scale = static_cast<const float*>(at("static_scale")),
                                                     .y = at("y"),
                                                     .scale = static_cast<float*>(at("scale"))},
                                    env);
                     }}},
        .plugin_problem = [](const ulpcheck_variant&) -> std::string {
          return "rmsnorm_quant has no C entry point yet: its variants come through the Python door";
        },
        .add_plugin = nullptr,
        .plugin_spec_options = {},
    },
    forwarded));

}  // namespace

}  // namespace ulpcheck
