// The inputs of an allreduce_rmsnorm case, as every run and the oracle
// generate them: each rank's partial x_r from the case's distribution on a
// stream of its own (distinct per rank: identical partials sum exactly and
// hide a missing rounding, aiter PR #2586), the residual from the same
// distribution (in the spec's residual dtype), w around 1. Padding columns hold the dtype's NaN poison.
#pragma once

#include <vector>

#include "core/buffer.h"
#include "core/case_spec.h"
#include "core/datagen.h"
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm.h"
#include "properties/rmsnorm_inputs.h"

namespace ulpcheck {

/// The rank counts a case of this op draws, shrinking toward the first:
/// tensor-parallel degrees in use, 2, 4 and 8; 3, a non-power of two; 1, the
/// fused residual add + RMSNorm of one GPU (vLLM's fused_add_rms_norm,
/// quack's rmsnorm with residual and prenorm). A variant with one rank per
/// GPU takes only as many as there are GPUs, and 1 only where there is one
/// GPU: the simulated variants cover one rank, and a real-rank case of one
/// rank has no ranks to compare (rank_consistency applies to R > 1 only),
/// so on a 2-GPU host half its cases would leave that cell short of its target.
inline std::vector<int> rankCounts(bool one_rank_per_gpu, int gpus) {
  std::vector<int> degrees{2, 4, 8, 3, 1};
  if (one_rank_per_gpu) {
    std::erase_if(degrees, [gpus](int r) { return r > gpus || (r == 1 && gpus > 1); });
    if (degrees.empty()) degrees = {1};
  }
  return degrees;
}

inline TensorStream rankPartialStream(int rank) {
  return static_cast<TensorStream>(static_cast<uint64_t>(TensorStream::RankPartial) + static_cast<uint64_t>(rank));
}

struct AllreduceRmsNormInputData {
  std::vector<HostMatrix> x;  // one per rank
  HostMatrix residual, w;
};

/// Rows at the logical ids of `rows` (identityRows(c.M) for the case itself).
inline AllreduceRmsNormInputData generateAllreduceRmsNormInputs(const CaseSpec& c, const std::vector<int64_t>& rows) {
  const uint32_t pad = poisonBits(c.dtype);
  AllreduceRmsNormInputData in;
  for (int r = 0; r < c.ranks; ++r)
    in.x.push_back(generateHost(c.x, c.dtype, c.seed, rankPartialStream(r), rows, c.N, c.ld, pad));
  // In its own dtype under res=fp32 (quack's residual_dtype), else the activations'.
  const DType rt = residualDtype(c.dtype, c.spec);
  in.residual = generateHost(c.x, rt, c.seed, TensorStream::Residual, rows, c.N, c.ld, poisonBits(rt));
  const DType wt = weightDtype(c.dtype, c.spec);
  in.w = generateHost(rmsNormWeightDist(c.spec), wt, c.seed, TensorStream::Weight, {0}, c.N, c.N, poisonBits(wt));
  return in;
}

}  // namespace ulpcheck
