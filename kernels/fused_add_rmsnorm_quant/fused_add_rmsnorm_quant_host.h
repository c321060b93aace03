// The host fused add + RMSNorm + FP8 quantization port and the switches its
// mutants turn on (kernels/fused_add_rmsnorm_quant/mutants/). The chain's
// own defects are rmsnorm_quant's mutants'; these are the fusion's.
#pragma once

namespace ulpcheck::fused_add_quant_host {

/// Defects a host mutant can switch on; all off is the correct port.
struct Defects {
  // The norm reads residual_out, the sum rounded to the residual's dtype,
  // where the spec (sum=fp32) normalises the fp32 sum.
  bool norm_of_rounded_sum = false;
};

/// Registers the port, with `defects` switched on.
bool registerPort(const char* name, const char* description, const char* bug, const char* caught_by, Defects defects);

}  // namespace ulpcheck::fused_add_quant_host
