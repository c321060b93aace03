// CTest resource allocation for GPU suites. A test that declares
// RESOURCE_GROUPS "gpus:1" (or "2,gpus:1"), run by `ctest
// --resource-spec-file` (the gpu presets pass build-gpu/gpu-resources.json,
// written at configure time by ci/gpu-resources), is told which GPUs are its
// own in CTEST_RESOURCE_GROUP_<g>_GPUS ("id:1,slots:1"); several suites then
// run at once on a multi-GPU runner, one per GPU.
#pragma once

namespace ulpcheck {

/// Makes the GPUs CTest gave this process the only visible ones
/// (CUDA_VISIBLE_DEVICES), in group order. Call before anything starts CUDA;
/// does nothing outside such a test.
void useCtestAllocatedGpus();

}  // namespace ulpcheck
