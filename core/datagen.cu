#include "core/cuda_check.h"
#include "core/cuda_ops.h"
#include "core/datagen.h"

namespace ulpcheck {

namespace {
template <typename Storage>
__global__ void generateKernel(Storage* dst, DistParams dist, DType t, uint64_t seed, TensorStream stream,
                               int64_t first_row, int64_t rows, int64_t cols, int64_t ld) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    dst[r * ld + c] = static_cast<Storage>(encodeBits(t, sampleValue(dist, t, seed, stream, first_row + r, c)));
  }
}
}  // namespace

void generateDevice(void* dst, const DistParams& dist, DType t, uint64_t seed, TensorStream stream, int64_t first_row,
                    int64_t rows, int64_t cols, int64_t ld) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 65536));
  if (storageBytes(t) == 4)
    generateKernel<uint32_t>
        <<<blocks, 256>>>(static_cast<uint32_t*>(dst), dist, t, seed, stream, first_row, rows, cols, ld);
  else
    generateKernel<uint16_t>
        <<<blocks, 256>>>(static_cast<uint16_t*>(dst), dist, t, seed, stream, first_row, rows, cols, ld);
  ULPCHECK_CUDA_LAUNCH("generateKernel");
}

void generateDownloaded(void* host_dst, const DistParams& dist, DType t, uint64_t seed, TensorStream stream,
                        int64_t first_row, int64_t rows, int64_t cols, int64_t ld, uint32_t pad_bits) {
  const size_t bytes = size_t(rows * ld) * size_t(storageBytes(t));
  if (bytes == 0) return;
  void* scratch = cudaops::allocateOnStream(bytes);
  try {
    if (ld > cols) cudaops::fillPattern(scratch, bytes, pad_bits, storageBytes(t));
    generateDevice(scratch, dist, t, seed, stream, first_row, rows, cols, ld);
    cudaops::copyToHost(host_dst, scratch, bytes);  // on the thread's stream: after the kernels
  } catch (...) {
    cudaops::releaseOnStream(scratch);
    throw;
  }
  cudaops::releaseOnStream(scratch);
}

}  // namespace ulpcheck
