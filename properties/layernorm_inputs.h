// The inputs of a layernorm case, as every run and the oracle generate them:
// x from the case's distribution, gamma around 1, beta around 0 (in the
// spec's weight dtype), dy normal
// with the case's scale; padding columns hold the dtype's NaN poison.
#pragma once

#include <algorithm>

#include "core/buffer.h"
#include "core/case_spec.h"
#include "core/datagen.h"
#include "kernels/layernorm/layernorm.h"

namespace ulpcheck {

// Trained LayerNorm affine parameters: gamma near 1 (sigma 1/2 also gives
// small and negative ones), beta near 0.
inline constexpr DistParams kLayerNormGammaDist{Dist::Normal, 0.5, 1.0};
inline constexpr DistParams kLayerNormBetaDist{Dist::Normal, 0.25, 0.0};

inline DistParams layerNormGradDist(const CaseSpec& c) { return DistParams{Dist::Normal, c.dy_sigma, 0.0}; }

struct LayerNormInputData {
  HostMatrix x, gamma, beta, dy;
};

/// Rows at the logical ids of `rows` (identityRows(c.M) for the case itself).
/// gamma and beta are in the spec's weight dtype (fp32 beside 16-bit x in
/// mixed-precision training), x and dy in the case's.
inline LayerNormInputData generateLayerNormInputs(const CaseSpec& c, const std::vector<int64_t>& rows) {
  const uint32_t pad = poisonBits(c.dtype);
  const DType wt = weightDtype(c.dtype, c.spec);
  LayerNormInputData in{
      generateHost(c.x, c.dtype, c.seed, TensorStream::X, rows, c.N, c.ld, pad),
      generateHost(kLayerNormGammaDist, wt, c.seed, TensorStream::Weight, {0}, c.N, c.N, poisonBits(wt)),
      generateHost(kLayerNormBetaDist, wt, c.seed, TensorStream::Bias, {0}, c.N, c.N, poisonBits(wt)),
      generateHost(layerNormGradDist(c), c.dtype, c.seed, TensorStream::GradOut, rows, c.N, c.ld, pad)};
  // A spec without gamma or beta (affine=nobias, none) is the spec with
  // gamma = 1 and beta = 0: what the oracle computes; kernels get no pointer.
  for (size_t j = 0; j < in.gamma.bits.size(); ++j) {
    if (!hasGamma(c.spec)) in.gamma.bits[j] = doubleToBits(wt, 1.0);
    if (!hasBeta(c.spec)) in.beta.bits[j] = doubleToBits(wt, 0.0);
  }
  return in;
}

}  // namespace ulpcheck
