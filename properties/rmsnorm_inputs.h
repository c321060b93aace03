// The inputs of an rmsnorm case, as every run and the oracle generate them:
// x from the case's distribution, w around 1 (in the spec's weight dtype), dy normal with the case's scale;
// padding columns hold the dtype's NaN poison so reading them shows up.
#pragma once

#include <optional>

#include "core/buffer.h"
#include "core/case_spec.h"
#include "core/datagen.h"
#include "kernels/rmsnorm/rmsnorm.h"

namespace ulpcheck {

// Norm weights sit around 1 after training; sigma 1/2 also gives small and
// negative weights. With a weight offset (Gemma: y = xhat (1 + w)) the stored
// weights sit around 1 - offset, so the effective weight is still around 1.
inline DistParams rmsNormWeightDist(const Spec& s) { return DistParams{Dist::Normal, 0.5, 1.0 - kWeightOffset(s)}; }

inline DistParams rmsNormGradDist(const CaseSpec& c) { return DistParams{Dist::Normal, c.dy_sigma, 0.0}; }

// A bias of the size of y's own values (x-hat w is around 1), so y = xhat w + b
// cancels in some elements: sigma 1.
inline constexpr DistParams kRmsNormBiasDist{Dist::Normal, 1.0, 0.0};

struct RmsNormInputData {
  HostMatrix x, w, dy;
  std::optional<HostMatrix> b;  // under the spec's bias (kRmsBias)
};

/// Rows at the logical ids of `rows` (identityRows(c.M) for the case itself).
inline RmsNormInputData generateRmsNormInputs(const CaseSpec& c, const std::vector<int64_t>& rows) {
  const uint32_t pad = poisonBits(c.dtype);
  const DType wt = weightDtype(c.dtype, c.spec);
  RmsNormInputData in{
      generateHost(c.x, c.dtype, c.seed, TensorStream::X, rows, c.N, c.ld, pad),
      generateHost(rmsNormWeightDist(c.spec), wt, c.seed, TensorStream::Weight, {0}, c.N, c.N, poisonBits(wt)),
      generateHost(rmsNormGradDist(c), c.dtype, c.seed, TensorStream::GradOut, rows, c.N, c.ld, pad), std::nullopt};
  if (kRmsBias(c.spec))
    in.b = generateHost(kRmsNormBiasDist, wt, c.seed, TensorStream::Bias, {0}, c.N, c.N, poisonBits(wt));
  return in;
}

}  // namespace ulpcheck
