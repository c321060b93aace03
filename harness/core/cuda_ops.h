// Memory operations on the GPU behind Buffer. Defined in cuda_ops.cu when the
// build has CUDA, and in cuda_ops_none.cpp (throwing a clear error) otherwise.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ulpcheck::cudaops {

void* allocate(size_t bytes);  // throws OutOfMemory
void release(void* p) noexcept;
void setBytes(void* p, uint8_t value, size_t bytes);
void fillPattern(void* p, size_t bytes, uint32_t pattern, int element_bytes);
void copyToDevice(void* dst, const void* src, size_t bytes);
void copyToHost(void* dst, const void* src, size_t bytes);

}  // namespace ulpcheck::cudaops
