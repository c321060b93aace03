// The host (CPU) port of the CUDA RMSNorm kernels: the same plan, the same
// per-thread accumulation order, the same butterfly and warp-order block
// reduction and the same dW partials, executed sequentially. It lets every
// property run in CI without a GPU. Host mutants reuse it with one defect
// switched on.
#pragma once

#include "kernels/rmsnorm/rmsnorm.h"

namespace ulpcheck::rmsnorm_host {

/// Defects a host mutant can switch on; all off is the correct port.
struct Defects {
  bool rowsum_in_bf16 = false;     // backward row sum c accumulated in bf16 (rounded after every add)
  bool drop_tail = false;          // backward skips the scalar tail (N % vec elements) of every row
  bool threads_from_m = false;     // CTA size picked from M as well as N, changing a row's reduction order
  bool arrival_order_dw = false;   // dW partials summed in an order that changes from call to call
};

void forward(const RmsNormForwardArgs& f, const LaunchEnv& env);
void backward(const RmsNormBackwardArgs& b, const LaunchEnv& env, const Defects& defects = {});

/// Registers a host mutant: the port with `defects` switched on, claiming the
/// correct port's contracts. `row_depth_factor` scales the declared row depth
/// for a defect that lengthens chains without being an accuracy bug.
bool registerMutant(const char* name, const char* description, const char* bug, const char* caught_by,
                    Defects defects, int64_t row_depth_factor = 1);

}  // namespace ulpcheck::rmsnorm_host
