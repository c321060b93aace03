// A build without CUDA has no GPU judge: nothing calls it (no CUDA variant
// exists to judge), and a call is a programming error said plainly.
#include <stdexcept>

#include "oracles/layernorm_device.h"

namespace ulpcheck::gpu_oracle {

namespace {
[[noreturn]] void unavailable() { throw std::logic_error("the LayerNorm GPU judge needs a build with CUDA"); }
}  // namespace

LayerNormRowsJudged judgeLayerNormRows(const LayerNormDeviceCase&) { unavailable(); }
ColumnChunkSums dgammaChunkSums(const LayerNormDeviceCase&, int64_t, const std::vector<LayerNormRowWords>&,
                                const std::vector<int64_t>&, const std::vector<double>&, const std::vector<double>&) {
  unavailable();
}
ColumnChunkSums dbetaChunkSums(const LayerNormDeviceCase&, int64_t) { unavailable(); }
std::vector<double> dgammaOrderedPartialAbs(const LayerNormDeviceCase&, const ColumnOrder&, int64_t,
                                            const std::vector<double>&, const std::vector<double>&) {
  unavailable();
}
std::vector<double> dbetaOrderedPartialAbs(const LayerNormDeviceCase&, const ColumnOrder&, int64_t) { unavailable(); }

}  // namespace ulpcheck::gpu_oracle
