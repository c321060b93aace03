// Error checking for CUDA runtime calls (CUDA translation units only).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/device.h"

namespace ulpcheck {

inline bool isStickyCudaError(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable: return true;
    default: return false;
  }
}

[[noreturn]] inline void throwCudaError(cudaError_t e, const char* what, const char* file, int line) {
  throw CudaError(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") at " + file + ":" +
                      std::to_string(line),
                  static_cast<int>(e), isStickyCudaError(e));
}

}  // namespace ulpcheck

#define ULPCHECK_CUDA(call)                                                                                 \
  do {                                                                                                      \
    const cudaError_t ulpcheck_err_ = (call);                                                               \
    if (ulpcheck_err_ != cudaSuccess) ::ulpcheck::throwCudaError(ulpcheck_err_, #call, __FILE__, __LINE__); \
  } while (0)

/// After a kernel launch: a launch-configuration error surfaces here.
#define ULPCHECK_CUDA_LAUNCH(name)                                                                                 \
  do {                                                                                                             \
    const cudaError_t ulpcheck_err_ = cudaGetLastError();                                                          \
    if (ulpcheck_err_ != cudaSuccess)                                                                              \
      ::ulpcheck::throwCudaError(ulpcheck_err_, (std::string("launch of ") + (name)).c_str(), __FILE__, __LINE__); \
  } while (0)
