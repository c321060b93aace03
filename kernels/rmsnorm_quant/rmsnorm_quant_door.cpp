// rmsnorm_quant's doors (kernels/door.h): its tensors' names in the worker
// protocol, its entry point in the C ABI (version 6).
#include "kernels/door.h"
#include "kernels/plugin/plugin_variant.h"
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

// The C ABI's: y_q in the spec's fp8 dtype, the static scale or the
// computed scales (M x groups) as fp32 tensors, the one the spec lacks with data NULL.
void addPlugin(const KernelInfo& info, std::shared_ptr<const PluginVariant> v) {
  RmsNormQuantRegistry::add(
      RmsNormQuantKernel{.info = info,
                         .forward =
                             [v](const RmsNormQuantArgs& f, const LaunchEnv& e) {
                               const RowShape& s = f.shape;
                               const int64_t groups = scaleGroups(s.spec, s.N);
                               const ulpcheck_rmsnorm_quant_args a{abiTensor(f.x, s.dtype, s.M, s.N, s.ld),
                                                                   abiTensor(f.w, s.wdtype(), 1, s.N, s.N),
                                                                   abiTensor(f.static_scale, DType::F32, 1, 1, 1),
                                                                   abiTensor(f.y, quantDtype(s.spec), s.M, s.N, s.ld),
                                                                   abiTensor(f.scale, DType::F32, s.M, groups, groups),
                                                                   s.eps};
                               const ulpcheck_launch l = v->launch(e, nullptr, 0);
                               v->check(v->abi().rmsnorm_quant(&a, &l), "rmsnorm_quant");
                             },
                         .depths = [v](const RowShape& s, const LaunchEnv&) { return v->depths(s); }});
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
        .plugin_problem = [](const ulpcheck_variant& v) -> std::string {
          if (!v.rmsnorm_quant) return "rmsnorm_quant needs its entry point (ABI version 6)";
          return noLayerNormStatistics(v);
        },
        .add_plugin = addPlugin,
        .plugin_spec_options = {"fp32_weights", "weight_offset", "quant", "fp8", "overflow", "scaled", "inverse"},
    },
    forwarded));

}  // namespace

}  // namespace ulpcheck
