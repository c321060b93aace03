// The host (CPU) port of the CUDA LayerNorm (layernorm_cuda.cu): the same
// plan, per-thread accumulation order, block reductions and per-CTA partials,
// executed sequentially, so every property runs in CI without a GPU. Host
// mutants reuse it with one defect switched on.
#pragma once

#include "kernels/layernorm/layernorm.h"

namespace ulpcheck::layernorm_host {

/// Defects a host mutant can switch on; all off is the correct port.
struct Defects {
  // The variance pass counts the lanes masked off past N in the last vector
  // as zeros: each adds (0 - mean)^2, invisible at mean ~ 0 and huge at a
  // large mean (Liger #518; quack commit 9310d47 saw it at x ~ 1000).
  bool variance_counts_masked_lanes = false;
  // dgamma and dbeta written to each other's outputs in one shape regime (the
  // large-batch path, M >= 256), as torch-xpu-ops PR #4790 fixed.
  bool swap_dgamma_dbeta_at_large_m = false;
  // The variance in one pass, E[x^2] - E[x]^2 in fp32, which cancels on
  // large-mean rows (PyTorch #51102, TVM PR #19643, onnxruntime #28463).
  bool one_pass_variance = false;
};

void forward(const LayerNormForwardArgs& f, const LaunchEnv& env, const Defects& defects = {});
void backward(const LayerNormBackwardArgs& b, const LaunchEnv& env, const Defects& defects = {});

/// Registers a host mutant: the port with `defects` switched on, claiming a
/// correct variant's contracts.
bool registerMutant(const char* name, const char* description, const char* bug, const char* caught_by, Defects defects);

}  // namespace ulpcheck::layernorm_host
