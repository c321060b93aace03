// LayerNorm's doors (kernels/door.h): its tensors' names in the worker
// protocol, its entry points in the C ABI.
#include "kernels/door.h"
#include "kernels/layernorm/layernorm.h"
#include "kernels/plugin/plugin_variant.h"

namespace ulpcheck {

namespace {

LayerNormKernel forwarded(LayerNormKernel k, RemoteEntry call) {
  k.info.remote = true;
  k.forward = [call](const LayerNormForwardArgs& f, const LaunchEnv& e) {
    call("layernorm_forward", f.shape, e,
         {{"x", f.x}, {"gamma", f.gamma}, {"beta", f.beta}, {"y", f.y}, {"mean", f.mean}, {"rstd", f.rstd}});
  };
  k.backward = [call](const LayerNormBackwardArgs& b, const LaunchEnv& e) {
    call("layernorm_backward", b.shape, e,
         {{"x", b.x},
          {"gamma", b.gamma},
          {"dy", b.dy},
          {"mean", b.mean},
          {"rstd", b.rstd},
          {"dx", b.dx},
          {"dgamma", b.dgamma},
          {"dbeta", b.dbeta},
          {"workspace", b.workspace}});
  };
  return k;
}

const LayerNormKernel& variantNamed(const std::string& name) {
  return registeredVariant<LayerNormKernel>("layernorm", name);
}

// The C ABI's LayerNorm. Version 2's declared specs reach the entry points
// through the tensors: gamma, beta and their gradients in the weights' dtype,
// null where the case has none (affine=nobias, none). Mean and rstd stay fp32
// arrays (under stats=activation holding values of the activation dtype).
void addPlugin(const KernelInfo& info, std::shared_ptr<const PluginVariant> v) {
  LayerNormRegistry::add(
      LayerNormKernel{info, [v](const RowShape& s, const LaunchEnv&) { return v->workspaceBytes(s); },
                      [v](const LayerNormForwardArgs& f, const LaunchEnv& e) {
                        const RowShape& s = f.shape;
                        const DType wt = s.wdtype();
                        const ulpcheck_layernorm_forward_args a{abiTensor(f.x, s.dtype, s.M, s.N, s.ld),
                                                                abiTensor(f.gamma, wt, 1, s.N, s.N),
                                                                abiTensor(f.beta, wt, 1, s.N, s.N),
                                                                abiTensor(f.y, s.dtype, s.M, s.N, s.ld),
                                                                abiTensor(f.mean, DType::F32, s.M, 1, 1),
                                                                abiTensor(f.rstd, DType::F32, s.M, 1, 1),
                                                                s.eps};
                        const ulpcheck_launch l = v->launch(e, nullptr, 0);
                        v->check(v->abi().layernorm_forward(&a, &l), "layernorm_forward");
                      },
                      [v](const LayerNormBackwardArgs& b, const LaunchEnv& e) {
                        const RowShape& s = b.shape;
                        const DType wt = s.wdtype();
                        const ulpcheck_layernorm_backward_args a{abiTensor(b.x, s.dtype, s.M, s.N, s.ld),
                                                                 abiTensor(b.gamma, wt, 1, s.N, s.N),
                                                                 abiTensor(b.dy, s.dtype, s.M, s.N, s.ld),
                                                                 abiTensor(b.mean, DType::F32, s.M, 1, 1),
                                                                 abiTensor(b.rstd, DType::F32, s.M, 1, 1),
                                                                 abiTensor(b.dx, s.dtype, s.M, s.N, s.ld),
                                                                 abiTensor(b.dgamma, wt, 1, s.N, s.N),
                                                                 abiTensor(b.dbeta, wt, 1, s.N, s.N),
                                                                 s.eps};
                        const ulpcheck_launch l = v->launch(e, b.workspace, v->workspaceBytes(s));
                        v->check(v->abi().layernorm_backward(&a, &l), "layernorm_backward");
                      },
                      [v](const RowShape& s, const LaunchEnv&) { return v->depths(s); }});
}

const bool registered = registerDoor(withRegistry<LayerNormKernel>(
    OpDoor{
        .op = "layernorm",
        .statistics = {"mean", "rstd"},
        .entries = {{"layernorm_forward",
                     [](const std::string& name, const RowShape& s, const TensorAt& at, const LaunchEnv& env) {
                       variantNamed(name).forward(
                           {s, at("x"), at("gamma"), at("beta"), at("y"), floatsAt(at, "mean"), floatsAt(at, "rstd")},
                           env);
                     }},
                    {"layernorm_backward",
                     [](const std::string& name, const RowShape& s, const TensorAt& at, const LaunchEnv& env) {
                       variantNamed(name).backward(
                           {s, at("x"), at("gamma"), at("dy"), floatsAt(at, "mean"), floatsAt(at, "rstd"), at("dx"),
                            at("dgamma"), at("dbeta"), at("workspace")},
                           env);
                     }}},
        .plugin_problem = [](const ulpcheck_variant& v) -> std::string {
          if (v.layernorm_forward && v.layernorm_backward) return "";
          return "layernorm needs both its forward and backward entry points (ABI version 1)";
        },
        .add_plugin = addPlugin,
        .plugin_spec_options = {"fp32_weights", "stats", "affine_variants"},
    },
    forwarded));

}  // namespace

}  // namespace ulpcheck
