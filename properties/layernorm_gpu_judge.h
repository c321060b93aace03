// The accuracy property of a LayerNorm case judged on the GPU, as RMSNorm's
// (properties/rmsnorm_gpu_judge.h): inputs generated on the device, the
// variant run there, and the oracle and judge of oracles/layernorm_device.h
// run over its outputs where they are; the host gets the figures, computes
// the rows the GPU left undecided, re-judges the few rows holding the worst
// elements (for the findings), and finishes dgamma and dbeta from the
// device's chunk sums. The outcome is the host judge's
// (properties/accuracy.h), but for rms_ulp's last bits.
#pragma once

#include <optional>

#include "kernels/layernorm/layernorm.h"
#include "properties/accuracy.h"

namespace ulpcheck {

/// Whether the GPU judge models case c of variant k: a CUDA variant that is
/// not a black box (whose probabilistic budgets the host still makes),
/// statistics saved in fp32. Otherwise the host judges.
bool layernormGpuJudgeApplies(const CaseSpec& c, const KernelInfo& k);

/// The accuracy outcome of case c. `outputs`: judge these (a run made
/// elsewhere: the audit compares both judges on one run) instead of running
/// the variant; otherwise its own run meets a schedule-perturbing load with
/// ctx.perturb_schedule, and leaves its outputs' digests in `digests` when
/// given. `widen` multiplies the oracle's certified intervals (1; more sends
/// rows and columns to the host, to test that path).
Outcome layernormAccuracyOnGpu(const CaseSpec& c, const LayerNormKernel& k, const ExecContext& ctx,
                               const DescribeInputs& describe, const RunResult* outputs = nullptr, double widen = 1.0,
                               OutputDigests* digests = nullptr);

}  // namespace ulpcheck
