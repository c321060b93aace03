// The host fused add + RMSNorm (fused_add_rmsnorm_host.cpp), and the
// defects its mutants switch on (kernels/fused_add_rmsnorm/mutants/).
#pragma once

#include <vector>

#include "kernels/common/row_launch.h"

namespace ulpcheck::fused_add_host {

/// The residual add: x + residual in fp32, rounded to the residual's dtype
/// into residual_out (row stride s.ld). Returns the fp32 sums (s.ld apart)
/// under sum=fp32, where the norm reads them; else nothing.
std::vector<float> addResidual(const RowShape& s, const void* x, const void* residual, void* residual_out);

/// Defects a host mutant can switch on; all off is host_fused_add.
struct Defects {
  // quack PR #53: the backward took the norm's backward of dy +
  // dresidual_out, (dres_out + dout) * dnorm, instead of dres_out + dout * dnorm.
  bool residual_grad_through_norm = false;
};

/// Registers the host port with `defects` (a mutant where `bug` is not empty).
bool registerPort(const char* name, const char* description, const char* bug, const char* caught_by, Defects defects);

}  // namespace ulpcheck::fused_add_host
