// allreduce_rmsnorm's doors (kernels/door.h): the multi-rank door. A
// plugin's or Python variant runs each rank in a worker process of its own
// (kernels/plugin/remote.h: rank r on GPU r, or a host process per virtual
// rank), called together; the coordinator makes every rank's buffers, as for
// its own real-rank variants, and each rank's call names its own tensors and
// every rank's communication buffer ("comm@s"). The C ABI's entry point is
// version 5's allreduce_rmsnorm, one rank's call.
#include <fmt/format.h>

#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm.h"
#include "kernels/door.h"
#include "kernels/plugin/plugin_variant.h"

namespace ulpcheck {

namespace {

/// The name rank s's communication buffer has in every rank's call.
const char* commName(int s) {
  static const char* const names[kMaxRanks] = {"comm@0", "comm@1", "comm@2", "comm@3",
                                               "comm@4", "comm@5", "comm@6", "comm@7"};
  return names[s];
}

const AllreduceRmsNormKernel& variantNamed(const std::string& name) {
  return registeredVariant<AllreduceRmsNormKernel>("allreduce_rmsnorm", name);
}

/// `k` with its ranks run by `call`, one worker process per rank.
AllreduceRmsNormKernel forwarded(AllreduceRmsNormKernel k, RankedRemoteEntry call) {
  k.info.remote = true;
  // A door variant's summation order is its own, not its pipeline's (NCCL's
  // ring, a library's rank order): what it owes the pipeline bit for bit it
  // owes in the rows the spec determines, those whose rank sums are exact
  // in fp32 in any order (as p2p_fused_* owe nccl_unfused).
  if (!k.info.contracts.unfused_pipeline.empty()) k.info.contracts.bitwise_rows_where_exact = "residual_out";
  k.run = [call](const AllreduceRmsNormArgs& a, const LaunchEnv& e) {
    std::vector<NamedTensors> per_rank(size_t(a.ranks));
    for (int r = 0; r < a.ranks; ++r) {
      NamedTensors& t = per_rank[size_t(r)];
      t = {{"x", a.x[r]}, {"residual", a.residual[r]},  {"w", a.w[r]}, {"residual_out", a.residual_out[r]},
           {"y", a.y[r]}, {"workspace", a.workspace[r]}};
      for (int s = 0; s < a.ranks; ++s) t.emplace_back(commName(s), a.comm[s]);
    }
    call("allreduce_rmsnorm_forward", a.shape, e, per_rank);
  };
  return k;
}

// The C ABI's call of one rank: its own tensors (the residual's dtype, the
// weights'), every rank's communication buffer, the call's generation.
void addPlugin(const KernelInfo& declared, std::shared_ptr<const PluginVariant> v) {
  KernelInfo info = declared;
  // A CUDA variant's ranks are real: rank r on GPU r, as in a tensor-parallel job.
  info.one_rank_per_gpu = info.backend == Backend::Cuda;
  for (int r = 1; r <= kMaxRanks; ++r)
    if (v->abi().rank_counts & (1u << r)) info.rank_choices.push_back(r);
  AllreduceRmsNormKernel k;
  k.info = std::move(info);
  k.workspace_bytes = [v](const RowShape& s, int) { return v->workspaceBytes(s); };
  k.run = [name = k.info.name](const AllreduceRmsNormArgs&, const LaunchEnv&) {
    throw KernelFailure(name + ": a plugin's multi-rank variant runs in its rank workers only");
  };
  k.depths = [v](const RowShape& s, const LaunchEnv&) { return v->depths(s); };
  if (v->abi().comm_bytes) k.comm_bytes = [v](const RowShape& s, int ranks) { return v->commBytes(s, ranks); };
  k.run_rank = [v](const AllreduceRmsNormRankArgs& a, const LaunchEnv& e) {
    const RowShape& s = a.shape;
    const DType rt = residualDtype(s.dtype, s.spec);
    ulpcheck_allreduce_rmsnorm_args args{abiTensor(a.x, s.dtype, s.M, s.N, s.ld),
                                         abiTensor(a.residual, rt, s.M, s.N, s.ld),
                                         abiTensor(a.w, s.wdtype(), 1, s.N, s.N),
                                         abiTensor(a.residual_out, rt, s.M, s.N, s.ld),
                                         abiTensor(a.y, s.dtype, s.M, s.N, s.ld),
                                         s.eps,
                                         {}};
    args.ranks.rank = e.rank;
    args.ranks.world_size = e.ranks;
    args.ranks.generation = e.generation;
    args.ranks.comm_bytes = a.comm_bytes;
    for (int r = 0; r < e.ranks; ++r) args.ranks.comm[r] = a.comm[r];
    const ulpcheck_launch l = v->launch(e, a.workspace, v->workspaceBytes(s));
    v->check(v->abi().allreduce_rmsnorm(&args, &l), "allreduce_rmsnorm");
  };
  AllreduceRmsNormRegistry::add(std::move(k));
}

const bool registered = registerDoor(OpDoor{
    .op = "allreduce_rmsnorm",
    .statistics = {},
    .backward_outputs = {},
    .has_backward = false,
    .forward_into = nullptr,
    .add_remote = nullptr,
    .multi_rank = true,
    .forward_ranks_into =
        [](const std::string& name, RankedRemoteEntry call) {
          AllreduceRmsNormRegistry::replace(forwarded(variantNamed(name), std::move(call)));
        },
    .add_remote_ranks =
        [](KernelInfo info, RankedRemoteEntry call, DepthsOf depths) {
          AllreduceRmsNormKernel k;
          k.info = std::move(info);
          k.workspace_bytes = [](const RowShape&, int) { return size_t(0); };
          k.depths = std::move(depths);
          AllreduceRmsNormRegistry::add(forwarded(std::move(k), std::move(call)));
        },
    .entries = {{"allreduce_rmsnorm_forward",
                 [](const std::string& name, const RowShape& s, const TensorAt& at, const LaunchEnv& env) {
                   const AllreduceRmsNormKernel& k = variantNamed(name);
                   if (!k.run_rank) throw std::invalid_argument(name + " does not run one rank at a time");
                   if (env.ranks < 1 || env.ranks > kMaxRanks || env.rank < 0 || env.rank >= env.ranks)
                     throw std::invalid_argument(fmt::format("rank {} of {} is not a rank", env.rank, env.ranks));
                   AllreduceRmsNormRankArgs a{.shape = s,
                                              .x = at("x"),
                                              .residual = at("residual"),
                                              .w = at("w"),
                                              .residual_out = at("residual_out"),
                                              .y = at("y"),
                                              .workspace = at("workspace")};
                   for (int r = 0; r < env.ranks; ++r) a.comm[r] = at(commName(r));
                   a.comm_bytes = k.comm_bytes ? k.comm_bytes(s, env.ranks) : 0;
                   k.run_rank(a, env);
                 }}},
    .find = [](const std::string& name) -> const KernelInfo* {
      const AllreduceRmsNormKernel* k = AllreduceRmsNormRegistry::find(name);
      return k ? &k->info : nullptr;
    },
    .plugin_problem = [](const ulpcheck_variant& v) -> std::string {
      if (!v.allreduce_rmsnorm) return "allreduce_rmsnorm needs its entry point (ABI version 5)";
      return noLayerNormStatistics(v);
    },
    .add_plugin = addPlugin,
    .plugin_spec_options = {"fp32_weights", "weight_offset", "fp32_residual", "allreduce_acc"},
});

}  // namespace

}  // namespace ulpcheck
