// allreduce_rmsnorm's own spec field: the dtype its ranks' partials are
// summed in (kRankSum). Its own header, not allreduce_rmsnorm.h, so that the
// op, its door and its tests see it without the CUDA kernels' includes.
#pragma once

#include <cstdint>

#include "core/spec.h"

namespace ulpcheck {

/// How the ranks' partials are summed before the one rounding (or the
/// roundings) to the activation dtype T:
///   Fp32        in fp32, in any order, then rounded to T once (NCCL's fp32
///               all_reduce, FlashInfer's fp32_acc=True; the default);
///   Activation  each rank's partial added to the running sum in T, in rank
///               order 0..R-1, rounding to T after each add (FlashInfer's
///               fp32_acc=False, allreduce_sum in trtllm_allreduce_fusion.cuh).
/// With one or two ranks the two are the same spec (one rounding of the
/// exact sum); from three on they differ by up to a few ulps of T.
enum class RankSum : uint8_t { Fp32 = 0, Activation = 1 };
inline constexpr SpecKey<RankSum> kRankSum{"acc"};
/// Its descriptor: allreduce_rmsnorm_spec.cpp.
const SpecField& rankSumField();

}  // namespace ulpcheck
