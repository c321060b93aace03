// The accuracy property of an RMSNorm case judged on the GPU: inputs
// generated on the device, the variant run there, and the oracle and judge
// of oracles/rmsnorm_device.h run over its outputs where they are; the host
// gets the figures, computes the rows the GPU left undecided, re-judges the
// few rows holding the worst elements (for the findings: their inputs and
// values, as the host judge reports them), and finishes dW. The outcome is
// the host judge's (properties/accuracy.h), but for rms_ulp's last bits.
#pragma once

#include <optional>

#include "kernels/rmsnorm/rmsnorm.h"
#include "properties/accuracy.h"

namespace ulpcheck {

/// Whether the GPU judge models case c of variant k: a CUDA variant (in
/// process, a plugin or a Python door's; a black box gets the probabilistic
/// budget as on the host), plain rounding, rstd saved in fp32, no bias.
/// Otherwise the host judges.
bool rmsnormGpuJudgeApplies(const CaseSpec& c, const KernelInfo& k);

/// The accuracy outcome of case c. `outputs`: judge these (a run made
/// elsewhere: the audit compares both judges on one run) instead of running
/// the variant; otherwise its own run meets a schedule-perturbing load with
/// ctx.perturb_schedule, and leaves its outputs' digests in `digests` when
/// given. `widen` multiplies the oracle's certified intervals (1; more sends
/// rows and columns to the host, to test that path).
Outcome rmsnormAccuracyOnGpu(const CaseSpec& c, const RmsNormKernel& k, const ExecContext& ctx,
                             const DescribeInputs& describe, const RunResult* outputs = nullptr, double widen = 1.0,
                             OutputDigests* digests = nullptr);

}  // namespace ulpcheck
