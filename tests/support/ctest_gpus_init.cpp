// Linked into the GPU suites: before main (and before any test starts CUDA),
// a test run under CTest resource allocation sees only the GPUs it was given.
#include "core/ctest_gpus.h"

namespace {
const bool allocated = (ulpcheck::useCtestAllocatedGpus(), true);
}  // namespace
