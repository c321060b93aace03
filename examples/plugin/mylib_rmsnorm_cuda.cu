// mylib's CUDA RMSNorm: one 256-thread block per row (grid-stride over rows),
// fp32 accumulation with cub block reductions; the backward keeps each
// block's dW partials in the workspace (each thread owns columns t, t + 256,
// ...) and a second kernel sums them in block order: deterministic, and a
// row's results do not depend on the batch.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cub/block/block_reduce.cuh>

#include "mylib_rmsnorm.h"

namespace mylib {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1024;

__device__ float toF(float v) { return v; }
__device__ float toF(__half v) { return __half2float(v); }
__device__ float toF(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ T fromF(float v);
template <>
__device__ float fromF<float>(float v) {
  return v;
}
template <>
__device__ __half fromF<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __nv_bfloat16 fromF<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

using BlockReduce = cub::BlockReduce<float, kThreads>;

/// Sum over the block, returned to every thread.
__device__ float blockSum(float v, typename BlockReduce::TempStorage& tmp, float* broadcast) {
  const float total = BlockReduce(tmp).Sum(v);
  if (threadIdx.x == 0) *broadcast = total;
  __syncthreads();
  const float out = *broadcast;
  __syncthreads();
  return out;
}

template <typename T>
__global__ void forwardKernel(const T* x, const T* w, T* y, float* rstd, int64_t rows, int64_t cols, int64_t stride,
                              float eps) {
  __shared__ typename BlockReduce::TempStorage tmp;
  __shared__ float broadcast;
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const T* xr = x + i * stride;
    float sum_sq = 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) sum_sq = fmaf(toF(xr[j]), toF(xr[j]), sum_sq);
    const float r = rsqrtf(blockSum(sum_sq, tmp, &broadcast) / float(cols) + eps);
    if (threadIdx.x == 0) rstd[i] = r;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) y[i * stride + j] = fromF<T>(toF(xr[j]) * r * toF(w[j]));
  }
}

template <typename T>
__global__ void backwardKernel(const T* x, const T* w, const T* dy, const float* rstd, T* dx, float* partial,
                               int64_t rows, int64_t cols, int64_t stride) {
  __shared__ typename BlockReduce::TempStorage tmp;
  __shared__ float broadcast;
  float* my_partial = partial + int64_t(blockIdx.x) * cols;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) my_partial[j] = 0.f;
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x) {
    const float r = rstd[i];
    const int64_t base = i * stride;
    float c = 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads)
      c = fmaf(toF(w[j]) * toF(dy[base + j]), toF(x[base + j]) * r, c);
    c = blockSum(c, tmp, &broadcast) / float(cols);
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
      const float xhat = toF(x[base + j]) * r, g = toF(dy[base + j]);
      dx[base + j] = fromF<T>(r * (toF(w[j]) * g - xhat * c));
      my_partial[j] = fmaf(g, xhat, my_partial[j]);  // this thread's own column
    }
  }
}

template <typename T, bool kBf16Total>
__global__ void sumPartialsKernel(const float* partial, int64_t blocks, int64_t cols, T* dw) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  float total = 0.f;
  for (int64_t b = 0; b < blocks; ++b) {
    total += partial[b * cols + j];
    if (kBf16Total) total = __bfloat162float(__float2bfloat16(total));  // the defect: a bf16 running total
  }
  dw[j] = fromF<T>(total);
}

int64_t blocksFor(const RmsNormShape& s) { return std::min<int64_t>(s.rows, kMaxBlocks); }

template <typename Fn>
int dispatch(Dtype t, Fn&& fn) {
  switch (t) {
    case Dtype::F32: fn(float{}); break;
    case Dtype::F16: fn(__half{}); break;
    case Dtype::BF16: fn(__nv_bfloat16{}); break;
  }
  return int(cudaGetLastError());
}

}  // namespace

size_t rmsnormBackwardWorkspaceCuda(const RmsNormShape& s) { return size_t(blocksFor(s) * s.cols) * sizeof(float); }

int rmsnormForwardCuda(const RmsNormShape& s, const void* x, const void* w, void* y, float* rstd, void* stream) {
  return dispatch(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    forwardKernel<T><<<unsigned(blocksFor(s)), kThreads, 0, cudaStream_t(stream)>>>(
        static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), rstd, s.rows, s.cols, s.stride, s.eps);
  });
}

int rmsnormBackwardCuda(const RmsNormShape& s, const void* x, const void* w, const void* dy, const float* rstd,
                        void* dx, void* dw, void* workspace, void* stream, bool sum_partials_in_bf16) {
  return dispatch(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto* partial = static_cast<float*>(workspace);
    backwardKernel<T><<<unsigned(blocksFor(s)), kThreads, 0, cudaStream_t(stream)>>>(
        static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(dy), rstd, static_cast<T*>(dx),
        partial, s.rows, s.cols, s.stride);
    const unsigned grid = unsigned((s.cols + 255) / 256);
    if (sum_partials_in_bf16)
      sumPartialsKernel<T, true>
          <<<grid, 256, 0, cudaStream_t(stream)>>>(partial, blocksFor(s), s.cols, static_cast<T*>(dw));
    else
      sumPartialsKernel<T, false>
          <<<grid, 256, 0, cudaStream_t(stream)>>>(partial, blocksFor(s), s.cols, static_cast<T*>(dw));
  });
}

const char* cudaErrorText(int code) { return cudaGetErrorString(cudaError_t(code)); }

// ---------------------------------------------------------------------------
// Allreduce + residual add + RMSNorm across GPUs, two-stage.

namespace {

// A rank's communication buffer: flags[2][64] (per rank: the epoch at which
// its partial was staged, and at which its owned rows were finished), the
// count of its reduce-scatter blocks done with their rows, then for each
// epoch parity the staged partial (compact rows, T) and the finished area
// (the owned rows' residual_out, then their y, compact, T).
constexpr size_t kFlagsBytes = 2 * 64 * sizeof(uint64_t) + 256;
enum Flag { kStaged = 0, kFinished = 1 };

struct Peers {
  void* comm[8];
  int rank, ranks;
  uint64_t epoch;
};

Peers peersOf(const RankComm& c) {
  Peers p{};
  for (int r = 0; r < c.ranks; ++r) p.comm[r] = c.buffers[r];
  p.rank = c.rank;
  p.ranks = c.ranks;
  p.epoch = c.epoch;
  return p;
}

__host__ __device__ size_t areaBytes(int64_t rows, int64_t cols, size_t element) {
  return (size_t(rows * cols) * element + 255) / 256 * 256;
}

template <typename T>
__device__ T* stagedOf(void* comm, int64_t rows, int64_t cols, uint64_t epoch) {
  return reinterpret_cast<T*>(static_cast<char*>(comm) + kFlagsBytes +
                              (epoch & 1) * 3 * areaBytes(rows, cols, sizeof(T)));
}
/// The finished area: residual_out's rows, then y's (offset rows * cols).
template <typename T>
__device__ T* finishedOf(void* comm, int64_t rows, int64_t cols, uint64_t epoch) {
  return stagedOf<T>(comm, rows, cols, epoch) + areaBytes(rows, cols, sizeof(T)) / sizeof(T);
}
__device__ uint64_t* flagOf(void* comm, Flag which, int rank) {
  return static_cast<uint64_t*>(comm) + which * 64 + rank;
}
/// Reduce-scatter blocks done with their rows, this call (zeroed by the stage kernel).
__device__ unsigned* doneCountOf(void* comm) { return reinterpret_cast<unsigned*>(flagOf(comm, kFinished, 64)); }

__device__ void releaseFlag(uint64_t* flag, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(flag), "l"(v) : "memory");
}
__device__ uint64_t acquireFlag(uint64_t* flag) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(flag) : "memory");
  return v;
}

/// Raises this rank's flag `which` in every rank's buffer: the fence makes
/// every store this thread has observed (this rank's earlier kernels; its
/// blocks' rows, counted in) visible system-wide before the flag.
__device__ void raiseFlags(const Peers& p, Flag which) {
  __threadfence_system();
  for (int q = 0; q < p.ranks; ++q) releaseFlag(flagOf(p.comm[q], which, p.rank), p.epoch);
}
__global__ void raiseFlagsKernel(Peers p, Flag which) { raiseFlags(p, which); }

/// Every rank's flag `which` in this rank's buffer has reached the epoch:
/// thread 0 acquires them, the barrier hands that on to the block.
__device__ void awaitFlags(const Peers& p, Flag which) {
  if (threadIdx.x == 0)
    for (int q = 0; q < p.ranks; ++q)
      while (acquireFlag(flagOf(p.comm[p.rank], which, q)) < p.epoch) __nanosleep(64);
  __syncthreads();
}

__host__ __device__ int64_t ownedBegin(int64_t rows, int ranks, int r) { return rows * r / ranks; }

template <typename T>
__global__ void stageKernel(Peers p, const T* x, int64_t rows, int64_t cols, int64_t stride) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *doneCountOf(p.comm[p.rank]) = 0;
  T* staged = stagedOf<T>(p.comm[p.rank], rows, cols, p.epoch);
  for (int64_t i = blockIdx.x; i < rows; i += gridDim.x)
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) staged[i * cols + j] = x[i * stride + j];
}

/// Both stages in one launch, as a fused two-stage allreduce runs them: the
/// first `rs_blocks` blocks reduce-scatter (the rows this rank owns: the
/// partials summed in rank order in fp32 from x_0, rounded to T, plus the
/// residual, rounded; the RMSNorm of the row; into this rank's outputs and
/// its finished area), the others all-gather (the rows the peers own, from
/// their finished areas) as soon as every rank's "finished" flag is up. The
/// last reduce-scatter block to finish raises this rank's flag. Every block
/// is resident at once (a few per SM), so the waiting ones never hold back
/// the working ones.
template <typename T, AllreduceDefect kDefect>
__global__ void twoStageKernel(Peers p, const T* residual, const T* w, T* residual_out, T* y, int64_t rows,
                               int64_t cols, int64_t stride, float eps, unsigned rs_blocks) {
  __shared__ typename BlockReduce::TempStorage tmp;
  __shared__ float broadcast;
  if (blockIdx.x >= rs_blocks) {  // all-gather
    awaitFlags(p, kFinished);
    for (int64_t i = blockIdx.x - rs_blocks; i < rows; i += gridDim.x - rs_blocks) {
      int owner = 0;
      while (i >= ownedBegin(rows, p.ranks, owner + 1)) ++owner;
      if (owner == p.rank) continue;
      const T* from = finishedOf<T>(p.comm[owner], rows, cols, p.epoch);
      for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
        residual_out[i * stride + j] = from[i * cols + j];
        y[i * stride + j] = from[rows * cols + i * cols + j];
      }
    }
    return;
  }
  awaitFlags(p, kStaged);
  const int64_t begin = ownedBegin(rows, p.ranks, p.rank), end = ownedBegin(rows, p.ranks, p.rank + 1);
  T* done = finishedOf<T>(p.comm[p.rank], rows, cols, p.epoch);
  for (int64_t i = begin + blockIdx.x; i < end; i += rs_blocks) {
    float sum_sq = 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
      float acc = toF(stagedOf<T>(p.comm[0], rows, cols, p.epoch)[i * cols + j]);
      for (int q = 1; q < p.ranks; ++q) acc += toF(stagedOf<T>(p.comm[q], rows, cols, p.epoch)[i * cols + j]);
      const T out = fromF<T>(toF(fromF<T>(acc)) + toF(residual[i * stride + j]));
      residual_out[i * stride + j] = out;
      done[i * cols + j] = out;
      sum_sq = fmaf(toF(out), toF(out), sum_sq);
    }
    const float r = rsqrtf(blockSum(sum_sq, tmp, &broadcast) / float(cols) + eps);
    for (int64_t j = threadIdx.x; j < cols; j += kThreads) {
      const T v = fromF<T>(toF(residual_out[i * stride + j]) * r * toF(w[j]));
      y[i * stride + j] = v;
      done[rows * cols + i * cols + j] = v;
    }
    if constexpr (kDefect == AllreduceDefect::EarlyFinishedFlag) {
      // The defect: block 0, done with its first row, raises "finished" for
      // the whole rank. Its release covers the stores it has made; the flag
      // promises every block's every row, which peers' all-gather blocks,
      // already waiting, now copy.
      __syncthreads();
      if (blockIdx.x == 0 && i == begin && threadIdx.x == 0) raiseFlags(p, kFinished);
    }
  }
  if constexpr (kDefect != AllreduceDefect::EarlyFinishedFlag) {
    // The last block done raises the flag: each block's stores are fenced
    // before it is counted, so the last one's release covers them all.
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      if (atomicAdd(doneCountOf(p.comm[p.rank]), 1u) == rs_blocks - 1) raiseFlags(p, kFinished);
    }
  } else if (begin + blockIdx.x >= end && blockIdx.x == 0 && threadIdx.x == 0) {
    raiseFlags(p, kFinished);  // no rows of its own: the defect's flag still comes
  }
}

}  // namespace

size_t allreduceCommBytesCuda(const RmsNormShape& s, int) {
  const size_t element = s.dtype == Dtype::F32 ? 4 : 2;
  return kFlagsBytes + 2 * 3 * areaBytes(s.rows, s.cols, element);
}

int allreduceRmsnormCuda(const RmsNormShape& s, const void* x, const void* residual, const void* w, void* residual_out,
                         void* y, const RankComm& comm, void* stream, AllreduceDefect defect) {
  const Peers p = peersOf(comm);
  const cudaStream_t st = cudaStream_t(stream);
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const unsigned copy_grid = unsigned(std::min<int64_t>(std::max<int64_t>(s.rows, 1), kMaxBlocks));
  // One reduce-scatter block per SM and three all-gather blocks (copying is
  // cheap; the peers' rows come fast once flagged): four 256-thread blocks
  // per SM, resident together.
  const unsigned rs_blocks = unsigned(std::max(sms, 1)), ag_blocks = 3 * rs_blocks;
  return dispatch(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    stageKernel<T><<<copy_grid, kThreads, 0, st>>>(p, static_cast<const T*>(x), s.rows, s.cols, s.stride);
    raiseFlagsKernel<<<1, 1, 0, st>>>(p, kStaged);
    auto kernel = defect == AllreduceDefect::EarlyFinishedFlag ? twoStageKernel<T, AllreduceDefect::EarlyFinishedFlag>
                                                               : twoStageKernel<T, AllreduceDefect::None>;
    kernel<<<rs_blocks + ag_blocks, kThreads, 0, st>>>(p, static_cast<const T*>(residual), static_cast<const T*>(w),
                                                       static_cast<T*>(residual_out), static_cast<T*>(y), s.rows,
                                                       s.cols, s.stride, s.eps, rs_blocks);
  });
}

}  // namespace mylib
