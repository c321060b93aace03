// The host (CPU) port of the CUDA RMSNorm kernels: the same plan, the same
// per-thread accumulation order, the same butterfly and warp-order block
// reduction and the same dW partials, executed sequentially. It lets every
// property run in CI without a GPU. Host mutants reuse it with one defect
// switched on.
#pragma once

#include <optional>

#include "kernels/rmsnorm/rmsnorm.h"
#include "kernels/rmsnorm/rmsnorm_plan.h"

namespace ulpcheck::rmsnorm_host {

/// Defects a host mutant can switch on; all off is the correct port.
struct Defects {
  bool rowsum_in_bf16 = false;         // backward row sum c accumulated in bf16 (rounded after every add)
  bool drop_tail = false;              // backward skips the scalar tail (N % vec elements) of every row
  bool threads_from_m = false;         // CTA size picked from M as well as N, changing a row's reduction order
  bool ignore_row_stride = false;      // rows addressed as if contiguous (stride N, not ld)
  bool x_squared_in_fp16 = false;      // forward rounds each x^2 to fp16 before accumulating (overflows past 256)
  bool rstd_in_bf16 = false;           // forward saves rstd rounded to bf16; the backward uses that
  bool dw_in_bf16_at_large_m = false;  // dW block reduction summed in bf16 on the path taken only for M >= 32768
  // The atomic epilogue of the CUDA workspace path (rows too wide for
  // registers) adding partial columns other warps accumulated, with no
  // barrier: on every third call (a race shows on some runs only) such a
  // column is added as it stood before the CTA's last row.
  bool atomic_partials_race = false;
  // The last-CTA sum of a grid of more than 1024 CTAs leaves the last CTA's
  // partial out (an off-by-one only the large-grid path reaches).
  bool lastblock_drops_partial_on_large_grid = false;
  // rounding=llama ignored: x-hat multiplied by the weight unrounded (vLLM
  // PR #42379 fixed the kernel doing so where its spec rounds first).
  bool llama_xhat_unrounded = false;
  // offset + w formed in the activation dtype, not fp32 (the Gemma weight
  // bug a vLLM reviewer showed on PR #29810: 1 + 15.8125 in bf16).
  bool offset_in_activation_dtype = false;
  // y converted from fp32 to a 16-bit T by truncation (toward zero), not to
  // nearest: CK's default fp32 -> bf16 conversion (aiter #5151).
  bool y_stored_truncated = false;
};

using rmsnorm_plan::DwStrategy;

/// What fused add + RMSNorm's backward (kernels/fused_add_rmsnorm) asks of
/// the plain one: x (the saved residual_out) in its own dtype, the gradient
/// reaching residual_out added to every dx in fp32, that sum stored to
/// dresidual as well (in the residual's dtype).
struct ResidualGradients {
  std::optional<DType> x_dtype;         // x's dtype where it is not dy's
  const void* dresidual_out = nullptr;  // M x N, row stride ld, in residual_dtype
  void* dresidual = nullptr;            // M x N, row stride ld, in residual_dtype
  DType residual_dtype = DType::F32;
  // quack PR #53's bug: dresidual_out added to dy before the norm's backward,
  // dx = dnorm(dy + dresidual_out), not dresidual_out + dnorm(dy).
  bool added_before_the_norm = false;
};

void forward(const RmsNormForwardArgs& f, const LaunchEnv& env, const Defects& defects = {});
/// The backward with dW finished as `strategy` does on the GPU; Atomic
/// emulates arrival order by starting from a different CTA on every call.
void backward(const RmsNormBackwardArgs& b, const LaunchEnv& env, DwStrategy strategy, const Defects& defects = {},
              const ResidualGradients& residual = {});

/// Registers a host mutant: the port with `defects` switched on (and dW
/// finished as `strategy`), claiming the deterministic, batch-invariant
/// contracts of a correct variant. `row_depth_factor` scales the declared row
/// depth for a defect that lengthens chains without being an accuracy bug.
bool registerMutant(const char* name, const char* description, const char* bug, const char* caught_by, Defects defects,
                    DwStrategy strategy = DwStrategy::Separate, int64_t row_depth_factor = 1,
                    bool deterministic = true);

/// The specs the port implements (every one), for mutants that register
/// another way.
SpecSupport specSupport();

}  // namespace ulpcheck::rmsnorm_host
