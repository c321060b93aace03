// Mutant: cuda_atomic as it first shipped. On the workspace path (rows too
// wide for registers: fp32 N > 8192, 16-bit N > 16384) each thread added dW
// partial columns strided by thread, which other warps had accumulated, with
// no barrier after their last stores, so a partial could reach dW without the
// CTA's last row. ulpcheck's default campaign on the H100 found it in a
// variant it declared correct (op=rmsnorm kernel=cuda_atomic dtype=fp32 M=7
// N=8644 ctas=3: dW 1e5x over budget, 1 run in 3). The correct variant's
// contract allows arrival-order bits, not wrong sums: determinism, which
// judges every repeat of a nondeterministic variant against the oracle, must
// catch it (the race shows in some runs only, most where some warps carry an
// extra vector of the row and fall behind the others).
#include "kernels/rmsnorm/rmsnorm_cuda_backward.cuh"

namespace ulpcheck::rmsnorm_cuda {
namespace {
const bool registered = registerVariant<DwStrategy::Atomic, cuda_defects::kAtomicEpilogueReadsPeersPartials>(
    "cuda_bug_atomic_partials_race",
    "cuda_atomic whose workspace-path epilogue adds partials other warps wrote, with no barrier",
    Contracts{false, true, DType::F32, true},
    {"dW partials read across warps without a barrier (ulpcheck's own cuda_atomic, found by its default campaign)",
     "determinism"});
}  // namespace
}  // namespace ulpcheck::rmsnorm_cuda
