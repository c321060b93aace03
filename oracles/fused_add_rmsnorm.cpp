// Oracle of fused residual add + RMSNorm: allreduce_rmsnorm's oracle at one
// rank. Its rank sum of one partial is x itself (round_T(x) = x), so its
// residual_out = round_R(x + residual) and its y, the norm of residual_out,
// are this spec's with sum=rounded.
//
// sum=fp32 (FlashInfer, quack: the norm of the fp32 sum, residual_out its
// rounding to T): residual_out is as above (round_T(round_fp32(h)) =
// round_T(h) for 16-bit T, fp32's 24 bits being at least twice T's + 2), and
// y is what the same oracle gives for an fp32 residual: its residual_out is
// then round_fp32(x + residual), the sum the norm reads, exact in the spec
// (budget 0 at one rank), and it normalises that fp32 value into a T y. The
// residual's values are T's either way; only the dtype the add rounds to
// differs.
#include "oracles/fused_add_rmsnorm.h"

#include <vector>

namespace ulpcheck {

namespace {

/// The same values as an fp32 matrix.
HostMatrix widenedToFp32(const HostMatrix& m) {
  HostMatrix out{DType::F32, m.rows, m.cols, m.ld, std::vector<uint32_t>(m.bits.size())};
  for (size_t i = 0; i < m.bits.size(); ++i) out.bits[i] = encodeBits(DType::F32, decodeBits(m.dtype, m.bits[i]));
  return out;
}

}  // namespace

AllreduceRmsNormReference fusedAddRmsNormReference(const FusedAddRmsNormInputs& in, const AccuracyContract& contract,
                                                   ThreadPool& pool, OracleMode mode) {
  const std::vector<HostMatrix> one_rank{in.x};
  AllreduceRmsNormReference ref = allreduceRmsNormReference(
      AllreduceRmsNormInputs{one_rank, in.residual, in.w, in.eps, in.spec}, contract, pool, mode);
  if (!in.fp32_sum || in.residual.dtype == DType::F32) return ref;
  const HostMatrix fp32_residual = widenedToFp32(in.residual);
  AllreduceRmsNormReference of_fp32_sum = allreduceRmsNormReference(
      AllreduceRmsNormInputs{one_rank, fp32_residual, in.w, in.eps, in.spec}, contract, pool, mode);
  ref.y = std::move(of_fp32_sum.y);
  return ref;
}

}  // namespace ulpcheck
