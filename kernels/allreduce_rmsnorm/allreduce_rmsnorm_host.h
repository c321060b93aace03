// Host ports of the allreduce + residual + RMSNorm variants, and the defects
// a host mutant of the fused one-shot port can switch on.
#pragma once

#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm.h"

namespace ulpcheck::allreduce_rmsnorm_host {

struct Defects {
  // The residual is added to the fp32 sum, skipping its rounding to T
  // (aiter PR #2586): only a fused kernel can make this mistake, and it is
  // invisible when every rank holds the same partial (the sum is exact).
  bool no_round_trip = false;
  // Each rank starts the sum from its own partial, so ranks add in different
  // orders and may disagree in the last bit (caught by rank_consistency).
  bool sum_from_own_rank = false;
  // The norm weight gamma is read in the activation dtype whatever its dtype
  // (vLLM #48324: FlashInfer's allreduce_fusion misreads an fp32 gamma).
  bool gamma_as_input_dtype = false;
};

/// Registers a host mutant: the fused one-shot port with `defects` switched
/// on, claiming the correct port's contracts (bitwise with host_unfused).
bool registerMutant(const char* name, const char* description, const char* bug, const char* caught_by, Defects defects);

}  // namespace ulpcheck::allreduce_rmsnorm_host
