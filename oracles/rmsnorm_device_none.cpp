// A build without CUDA has no GPU judge: nothing calls it (no CUDA variant
// exists to judge), and a call is a programming error said plainly.
#include <stdexcept>

#include "oracles/rmsnorm_device.h"

namespace ulpcheck::gpu_oracle {

namespace {
[[noreturn]] void unavailable() { throw std::logic_error("the GPU judge needs a build with CUDA"); }
}  // namespace

RowsJudged judgeRows(const RmsNormDeviceCase&) { unavailable(); }
DwChunkSums dwChunkSums(const RmsNormDeviceCase&, int64_t, const std::vector<double>&, const std::vector<double>&,
                        const std::vector<double>&, const std::vector<double>&) {
  unavailable();
}
std::vector<double> orderedPartialAbs(const RmsNormDeviceCase&, const ColumnOrder&, int64_t,
                                      const std::vector<double>&) {
  unavailable();
}

}  // namespace ulpcheck::gpu_oracle
