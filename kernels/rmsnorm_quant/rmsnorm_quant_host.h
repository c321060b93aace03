// The host RMSNorm + FP8 quantization port and the switches its mutants
// turn on (kernels/rmsnorm_quant/mutants/).
#pragma once

#include "kernels/rmsnorm_quant/rmsnorm_quant.h"

namespace ulpcheck::rmsnorm_quant_host {

/// Defects a host mutant can switch on; all off is the correct port.
struct Defects {
  // fp32 -> fp8 by truncation toward zero, not to nearest even.
  bool truncating_conversion = false;
  // overflow=satfinite ignored: NaN (E4M3) or +-Inf (E5M2) where the
  // largest finite value is due.
  bool no_saturation = false;
  // quant=token's (and group's) amax taken over y rounded to T where the spec scales the fp32 y.
  bool token_scale_of_t_rounded_y = false;
  // One element of the last row stored one code away from zero: the first
  // whose fp32 value lies within a quarter ulp of an fp8 value (far from any
  // rounding boundary, so no budget admits it).
  bool one_element_one_ulp_off = false;
  // The last element of y_q never stored.
  bool last_element_not_stored = false;
};

/// The shape of the fp32 y a norm computes before its quantization:
/// activations read as T, the weight in its own dtype; the host ports plan
/// their norm's reduction (and declare its depths) at it.
RowShape fp32Shape(const RowShape& s);

/// The spec's chain (rmsnorm_quant.h) on a norm's fp32 y, M x N at row
/// stride s.ld, row by row: y_q (s.ld apart) and, under quant=token or
/// group, the scales; `static_scale` under quant=static. The host ports of
/// every op with an FP8 output end in it.
void quantize(const RowShape& s, const float* y, const float* static_scale, void* y_q, float* scale,
              const Defects& d = {});

/// Registers the port, with `defects` switched on, claiming a correct
/// variant's deterministic, batch-invariant contracts.
bool registerPort(const char* name, const char* description, const char* bug, const char* caught_by, Defects defects);

}  // namespace ulpcheck::rmsnorm_quant_host
