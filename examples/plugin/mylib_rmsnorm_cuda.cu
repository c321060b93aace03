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

}  // namespace mylib
