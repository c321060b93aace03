// nccl_unfused: the unfused pipeline with a real collective, one GPU per
// rank. Each rank widens its partial to fp32, NCCL sums them (ncclFloat32,
// in NCCL's own order: ring or tree), then a kernel rounds the sum to T, adds
// the residual and rounds again, and rmsnorm's forward kernel normalises.
// Summing in fp32 is what makes s = round_T(sum_r x_r) for any R: an
// allreduce in T itself would round after every hop once R > 2. Built only
// when CMake finds NCCL.
#include <nccl.h>

#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "core/cuda_ops.h"
#include "core/device.h"
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm_cuda.cuh"

namespace ulpcheck::allreduce_rmsnorm_cuda {

namespace {

// A failed collective leaves communicators in an unknown state: fatal for
// the campaign (exit 4), like a sticky CUDA error, not a property failure.
void checkNccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw CudaError(fmt::format("{}: {}", what, ncclGetErrorString(r)), 0, true);
}

/// One communicator per rank over GPUs 0..R-1, made once per R and kept for
/// the process (ncclCommInitAll: one process drives every rank).
const std::vector<ncclComm_t>& communicators(int ranks) {
  static std::mutex mutex;
  static std::map<int, std::vector<ncclComm_t>> comms;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = comms.find(ranks); it != comms.end()) return it->second;
  std::vector<int> devices(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) devices[size_t(r)] = r;
  std::vector<ncclComm_t> made(devices.size());
  checkNccl(ncclCommInitAll(made.data(), ranks, devices.data()), "ncclCommInitAll");
  return comms.emplace(ranks, std::move(made)).first->second;
}

template <typename T>
struct WidenOp {  // sum[i] = float(x[i])
  const T* x;
  float* sum;
  template <int V>
  __device__ void apply(int64_t i) const {
    const VecT<T, V> v = loadVec<T, V>(x + i);
#pragma unroll
    for (int k = 0; k < V; ++k) sum[i + k] = toFloat(v.v[k]);
  }
};

template <typename T>
struct RoundAddOp {  // residual_out = round_T(round_T(sum) + residual)
  const float* sum;
  const T* residual;
  T* residual_out;
  template <int V>
  __device__ void apply(int64_t i) const {
    VecT<T, V> s;
#pragma unroll
    for (int k = 0; k < V; ++k) s.v[k] = fromFloat<T>(sum[i + k]);
    storeVec<T, V>(residual_out + i, residualAddVec<T, V>(s, loadVec<T, V>(residual + i)));
  }
};

/// Workspace of one rank: the fp32 sum (M x ld), then the rstd the RMSNorm
/// forward saves, at a 256-byte boundary.
size_t rstdOffset(const RowShape& s) { return (size_t(s.M) * size_t(s.ld) * sizeof(float) + 255) / 256 * 256; }
size_t workspaceBytes(const RowShape& s, int) { return rstdOffset(s) + size_t(s.M) * sizeof(float); }

void runNcclUnfused(const AllreduceRmsNormArgs& a, const LaunchEnv& env) {
  const RowShape& s = a.shape;
  if (queryDevice().count < a.ranks)
    throw CudaError(fmt::format("nccl_unfused needs {} GPUs, {} visible", a.ranks, queryDevice().count), 0, false);
  const std::vector<ncclComm_t>& comms = communicators(a.ranks);
  const RowPlan p = planOf(a);
  // NCCL is compiled apart, so a null stream there is the legacy default
  // stream, not this thread's (ours is compiled --default-stream per-thread):
  // name the per-thread stream so NCCL's work queues behind our kernels on it.
  const cudaStream_t stream = env.stream ? cudaStream_t(env.stream) : cudaStreamPerThread;
  withStorageType(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto sumOf = [&](int r) { return static_cast<float*>(a.workspace[r]); };
    for (int r = 0; r < a.ranks; ++r) {
      cudaops::DeviceScope on(a.device[r]);
      launchRowwise<T>(p, WidenOp<T>{static_cast<const T*>(a.x[r]), sumOf(r)}, s.M, s.ld, env, "widen kernel");
    }
    // Padding columns of the fp32 buffers ride along; nothing reads them.
    checkNccl(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < a.ranks; ++r)
      checkNccl(ncclAllReduce(sumOf(r), sumOf(r), size_t(s.M * s.ld), ncclFloat32, ncclSum, comms[size_t(r)], stream),
                "ncclAllReduce");
    checkNccl(ncclGroupEnd(), "ncclGroupEnd");
    for (int r = 0; r < a.ranks; ++r) {
      cudaops::DeviceScope on(a.device[r]);
      launchRowwise<T>(
          p, RoundAddOp<T>{sumOf(r), static_cast<const T*>(a.residual[r]), static_cast<T*>(a.residual_out[r])}, s.M,
          s.ld, env, "round + residual-add kernel");
      auto* rstd = reinterpret_cast<float*>(static_cast<char*>(a.workspace[r]) + rstdOffset(s));
      rmsnorm_cuda::forward(RmsNormForwardArgs{s, a.residual_out[r], a.w[r], a.y[r], rstd}, env);
    }
  });
}

KernelInfo ncclInfo() {
  // Not batch invariant: where an element sits in the buffer, and the buffer's
  // size, decide NCCL's summation order (ring chunks, algorithm, protocol), so
  // with three or more ranks a row's inexact sums change with its batch.
  KernelInfo k{
      "allreduce_rmsnorm",
      "nccl_unfused",
      Backend::Cuda,
      kDTypes,
      Contracts{true, false, DType::F32},
      "one GPU per rank: widen to fp32, ncclAllReduce (fp32, NCCL's order), round to T + residual add, rmsnorm "
      "forward kernel",
      "",
      ""};
  k.one_rank_per_gpu = true;
  return withCudaPaths(std::move(k));
}

const bool registered =
    AllreduceRmsNormRegistry::add(AllreduceRmsNormKernel{ncclInfo(), workspaceBytes, runNcclUnfused, rmsnormDepths});

}  // namespace
}  // namespace ulpcheck::allreduce_rmsnorm_cuda
