// RMSNorm's doors (kernels/door.h): its tensors' names in the worker
// protocol, its entry points in the C ABI.
#include "kernels/door.h"
#include "kernels/plugin/plugin_variant.h"
#include "kernels/rmsnorm/rmsnorm.h"

namespace ulpcheck {

namespace {

RmsNormKernel forwarded(RmsNormKernel k, RemoteEntry call) {
  k.info.remote = true;
  k.forward = [call](const RmsNormForwardArgs& f, const LaunchEnv& e) {
    if (f.x_dtype) throw std::invalid_argument("a variant in a worker takes x in y's dtype only");
    call("rmsnorm_forward", f.shape, e, {{"x", f.x}, {"w", f.w}, {"y", f.y}, {"rstd", f.rstd}, {"b", f.b}});
  };
  k.backward = [call](const RmsNormBackwardArgs& b, const LaunchEnv& e) {
    call("rmsnorm_backward", b.shape, e,
         {{"x", b.x},
          {"w", b.w},
          {"dy", b.dy},
          {"rstd", b.rstd},
          {"dx", b.dx},
          {"dw", b.dw},
          {"db", b.db},
          {"workspace", b.workspace}});
  };
  return k;
}

const RmsNormKernel& variantNamed(const std::string& name) { return registeredVariant<RmsNormKernel>("rmsnorm", name); }

// The C ABI's RMSNorm. Version 2's declared specs reach the entry points
// through the tensors: w, dw, b and db in the weights' dtype, b and db null
// without a bias. Rounding, offset and statistics need nothing: a variant
// implements the one it declares (rstd stays an fp32 array; under
// stats=activation its values are values of the activation dtype).
ulpcheck_rmsnorm_forward_args abiForward(const RmsNormForwardArgs& f) {
  const RowShape& s = f.shape;
  const DType wt = s.wdtype();
  return {abiTensor(f.x, s.dtype, s.M, s.N, s.ld),
          abiTensor(f.w, wt, 1, s.N, s.N),
          abiTensor(f.y, s.dtype, s.M, s.N, s.ld),
          abiTensor(f.rstd, DType::F32, s.M, 1, 1),
          s.eps,
          abiTensor(f.b, wt, 1, s.N, s.N)};
}

ulpcheck_rmsnorm_backward_args abiBackward(const RmsNormBackwardArgs& b) {
  const RowShape& s = b.shape;
  const DType wt = s.wdtype();
  return {abiTensor(b.x, s.dtype, s.M, s.N, s.ld),
          abiTensor(b.w, wt, 1, s.N, s.N),
          abiTensor(b.dy, s.dtype, s.M, s.N, s.ld),
          abiTensor(b.rstd, DType::F32, s.M, 1, 1),
          abiTensor(b.dx, s.dtype, s.M, s.N, s.ld),
          abiTensor(b.dw, wt, 1, s.N, s.N),
          s.eps,
          abiTensor(b.db, wt, 1, s.N, s.N)};
}

void addPlugin(const KernelInfo& info, std::shared_ptr<const PluginVariant> v) {
  RmsNormRegistry::add(RmsNormKernel{info, [v](const RowShape& s, const LaunchEnv&) { return v->workspaceBytes(s); },
                                     [v](const RmsNormForwardArgs& f, const LaunchEnv& e) {
                                       if (f.x_dtype)
                                         throw std::invalid_argument("a C plugin's variant takes x in y's dtype only");
                                       const ulpcheck_rmsnorm_forward_args a = abiForward(f);
                                       const ulpcheck_launch l = v->launch(e, nullptr, 0);
                                       v->check(v->abi().rmsnorm_forward(&a, &l), "rmsnorm_forward");
                                     },
                                     [v](const RmsNormBackwardArgs& b, const LaunchEnv& e) {
                                       const ulpcheck_rmsnorm_backward_args a = abiBackward(b);
                                       const ulpcheck_launch l = v->launch(e, b.workspace, v->workspaceBytes(b.shape));
                                       v->check(v->abi().rmsnorm_backward(&a, &l), "rmsnorm_backward");
                                     },
                                     [v](const RowShape& s, const LaunchEnv&) { return v->depths(s); }});
}

const bool registered = registerDoor(withRegistry<RmsNormKernel>(
    OpDoor{
        .op = "rmsnorm",
        .statistics = {"rstd"},
        .backward_outputs = {"dx", "dw", "db"},  // a Python variant's backward is optional (FlashInfer's rmsnorm)
        .entries = {{"rmsnorm_forward",
                     [](const std::string& name, const RowShape& s, const TensorAt& at, const LaunchEnv& env) {
                       variantNamed(name).forward({s, at("x"), at("w"), at("y"), floatsAt(at, "rstd"), at("b")}, env);
                     }},
                    {"rmsnorm_backward",
                     [](const std::string& name, const RowShape& s, const TensorAt& at, const LaunchEnv& env) {
                       variantNamed(name).backward({s, at("x"), at("w"), at("dy"), floatsAt(at, "rstd"), at("dx"),
                                                    at("dw"), at("workspace"), at("db")},
                                                   env);
                     }}},
        .plugin_problem = [](const ulpcheck_variant& v) -> std::string {
          if (!v.rmsnorm_forward || !v.rmsnorm_backward)
            return "rmsnorm needs both its forward and backward entry points (ABI version 1)";
          return noLayerNormStatistics(v);
        },
        .add_plugin = addPlugin,
        .plugin_spec_options = {"fp32_weights", "rounding", "weight_offset", "stats", "bias_variants"},
    },
    forwarded));

}  // namespace

}  // namespace ulpcheck
