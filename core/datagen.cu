#include "core/cuda_check.h"
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

}  // namespace ulpcheck
