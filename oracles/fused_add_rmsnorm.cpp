// Oracle of fused residual add + RMSNorm: allreduce_rmsnorm's oracle at one
// rank. Its rank sum of one partial is x itself (round_T(x) = x), so its
// residual_out = round_R(x + residual) and its y, the norm of residual_out,
// are this spec's with sum=rounded; with sum=fp32 (FlashInfer, quack) that
// oracle's norm reads round_fp32(x + residual) instead (norm_of_fp32_sum),
// residual_out staying round_R of the same sum.
#include "oracles/fused_add_rmsnorm.h"

#include <stdexcept>
#include <vector>

#include "oracles/rmsnorm.h"

namespace ulpcheck {

AllreduceRmsNormReference fusedAddRmsNormReference(const FusedAddRmsNormInputs& in, const AccuracyContract& contract,
                                                   ThreadPool& pool, OracleMode mode) {
  const std::vector<HostMatrix> one_rank{in.x};
  return allreduceRmsNormReference(AllreduceRmsNormInputs{.x = one_rank,
                                                          .residual = in.residual,
                                                          .w = in.w,
                                                          .eps = in.eps,
                                                          .spec = in.spec,
                                                          .norm_of_fp32_sum = in.fp32_sum},
                                   contract, pool, mode);
}

FusedAddRmsNormBackwardReference fusedAddRmsNormBackwardReference(const FusedAddRmsNormInputs& in, const HostMatrix& dy,
                                                                  const HostMatrix& dresidual_out,
                                                                  const AllreduceRmsNormReference& forward,
                                                                  const AccuracyContract& contract, ThreadPool& pool,
                                                                  OracleMode mode) {
  const DType T = in.x.dtype, R = in.residual.dtype;
  const int64_t M = in.x.rows, N = in.x.cols;
  // At one rank residual_out is exact in the spec (budget 0): the saved
  // residual_out a correct kernel's backward reads is this one.
  for (const double b : forward.residual_out.budget)
    if (b != 0.0) throw std::logic_error("fused add backward oracle: residual_out is not exact");
  HostMatrix saved{R, M, N, N, PackedBits(storageBytes(R), size_t(M * N))};
  for (int64_t e = 0; e < M * N; ++e) saved.bits.set(size_t(e), encodeBits(R, forward.residual_out.exact[size_t(e)]));
  // quack's sum=fp32 under res=T: rstd of the fp32 sum beside the rounded
  // residual_out it saves. x + residual of two 16-bit values is exact in a
  // double unless their exponents are 45 apart, and then the smaller is below
  // fp32's half ulp of the larger and no fp32 midpoint is within 2^-53 of the
  // sum: rounding the double to fp32 is the correctly rounded fp32 sum.
  HostMatrix fp32_sum;
  const bool rstd_of_fp32_sum = in.fp32_sum && R != DType::F32;
  if (rstd_of_fp32_sum) {
    fp32_sum = HostMatrix{DType::F32, M, N, N, PackedBits(4, size_t(M * N))};
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        fp32_sum.bits.set(size_t(i * N + j), doubleToBits(DType::F32, in.x.value(i, j) + in.residual.value(i, j)));
  }
  const RmsNormInputs norm{.x = saved,
                           .w = in.w,
                           .dy = dy,
                           .eps = in.eps,
                           .spec = in.spec,
                           .y_dtype = T,
                           .dx_addend = &dresidual_out,
                           .dresidual_dtype = R,
                           .rstd_of = rstd_of_fp32_sum ? &fp32_sum : nullptr};
  RmsNormReference ref = rmsnormReference(norm, contract, pool, mode);
  // A residual_out that overflowed (fp16 x + residual past 65504: inf in the
  // spec) makes the spec's backward non-finite there (x-hat of inf): any
  // non-finite result is its value, a finite one is wrong.
  for (ReferenceTensor* t : {&ref.dx, &ref.dresidual, &ref.dw}) anyNonFiniteWhereNotFinite(*t);
  return {std::move(ref.dx), std::move(ref.dresidual), std::move(ref.dw)};
}

}  // namespace ulpcheck
