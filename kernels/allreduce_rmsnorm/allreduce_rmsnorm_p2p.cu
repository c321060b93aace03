// Allreduce + residual + RMSNorm with real ranks: rank r on GPU r, peers'
// partials and finished rows read through peer access (NVLink), the kernels
// of the single-device variants (allreduce_rmsnorm_cuda.cuh) launched on each
// rank's own GPU. The unfused pipeline they replace is nccl_unfused, whose
// summation order is NCCL's: they owe it bitwise equality in every row the
// spec determines (rank sums exact in fp32 in any order), and elsewhere the
// budget (accuracy) and each other's bits (rank_consistency).
//
//   p2p_fused_oneshot   every rank reads every peer's row, fused as one kernel
//   p2p_fused_twostage  reduce-scatter on each GPU, then, after an event from
//                       every peer, all-gather of the rows the peers own
#include <vector>

#include "core/cuda_ops.h"
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm_cuda.cuh"

namespace ulpcheck::allreduce_rmsnorm_cuda {

namespace {

void runOneshot(const AllreduceRmsNormArgs& a, const LaunchEnv& env) {
  cudaops::enablePeerAccess(a.ranks);
  const RowPlan p = planOf(a);
  for (int r = 0; r < a.ranks; ++r) {
    cudaops::DeviceScope on(a.device[r]);
    launchFused(a, p, r, 0, a.shape.M, env);
  }
}

/// One event per rank, destroyed with it (released once complete).
struct RankEvents {
  std::vector<cudaEvent_t> events;
  ~RankEvents() {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
  }
};

void runTwostage(const AllreduceRmsNormArgs& a, const LaunchEnv& env) {
  cudaops::enablePeerAccess(a.ranks);
  const RowPlan p = planOf(a);
  RankEvents done;
  for (int r = 0; r < a.ranks; ++r) {
    cudaops::DeviceScope on(a.device[r]);
    reduceScatterStage(a, p, r, env);
    cudaEvent_t e;
    ULPCHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    done.events.push_back(e);
    ULPCHECK_CUDA(cudaEventRecord(e, cudaStream_t(env.stream)));
  }
  for (int r = 0; r < a.ranks; ++r) {
    cudaops::DeviceScope on(a.device[r]);
    // The rows the peers own are final once their stage 1 is.
    for (int owner = 0; owner < a.ranks; ++owner)
      if (owner != r) ULPCHECK_CUDA(cudaStreamWaitEvent(cudaStream_t(env.stream), done.events[size_t(owner)], 0));
    allGatherStage(a, p, r, env);
  }
}

KernelInfo p2pInfo(const char* name, const char* description) {
  KernelInfo k{
      "allreduce_rmsnorm", name, Backend::Cuda, kDTypes, Contracts{true, true, DType::F32}, description, "", ""};
  k.contracts.unfused_pipeline = "nccl_unfused";
  k.contracts.bitwise_with_unfused = {"residual_out", "y"};
  k.contracts.bitwise_rows_where_exact = "residual_out";
  k.one_rank_per_gpu = true;
  return withCudaPaths(std::move(k));
}

const bool registered =
    AllreduceRmsNormRegistry::add(AllreduceRmsNormKernel{
        p2pInfo("p2p_fused_oneshot", "one GPU per rank: each reads every peer's row over peer access, fp32 sum in rank "
                                     "order, round to T, residual add, round to T, RMSNorm, in one kernel"),
        noWorkspace, runOneshot, rmsnormDepths}) &&
    AllreduceRmsNormRegistry::add(AllreduceRmsNormKernel{
        p2pInfo("p2p_fused_twostage", "one GPU per rank: fused reduce-scatter of the owned rows, events, all-gather of "
                                      "the peers' rows over peer access"),
        noWorkspace, runTwostage, rmsnormDepths});

}  // namespace
}  // namespace ulpcheck::allreduce_rmsnorm_cuda
