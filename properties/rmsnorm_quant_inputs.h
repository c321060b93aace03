// The inputs of an rmsnorm_quant case, as every run and the oracle generate
// them: x from the case's distribution and w around 1, as RMSNorm's, and
// under quant=static one fp32 scale. Padding columns hold the dtype's NaN poison.
#pragma once

#include <vector>

#include "core/case_spec.h"
#include "core/datagen.h"
#include "core/rng.h"
#include "kernels/rmsnorm_quant/rmsnorm_quant.h"
#include "properties/rmsnorm_inputs.h"

namespace ulpcheck {

/// quant=static's scale: (1 + k/16) 2^e / fmax for k in 0..15 and e in
/// -1..4, from the case's seed. A normal row's largest |y| is 2 to 5 (w
/// around 1), so its largest |y| / s lands from a quarter of fmax (the
/// smallest values in the format's subnormals) to 20 times it (overflow:
/// saturation, or NaN and Inf, is reached in about half the cases).
inline float staticQuantScale(const CaseSpec& c) {
  const uint64_t h = counterHash(c.seed, uint64_t(TensorStream::QuantScale), 0);
  const int k = int(h & 15), e = int((h >> 4) % 6) - 1;
  return float(std::ldexp(1.0 + k / 16.0, e)) / float(fp8MaxFinite(kFp8Format(c.spec)));
}

struct RmsNormQuantInputData {
  HostMatrix x, w, scale;     // scale: 1 x 1 fp32 (quant=static; unused under token)
  std::vector<int64_t> rows;  // the logical ids they were made at
};

/// Rows at the logical ids of `rows` (identityRows(c.M) for the case itself).
inline RmsNormQuantInputData generateRmsNormQuantInputs(const CaseSpec& c, const std::vector<int64_t>& rows) {
  const DType wt = weightDtype(c.dtype, c.spec);
  HostMatrix scale{DType::F32, 1, 1, 1, PackedBits(4, 1)};
  scale.bits.set(0, doubleToBits(DType::F32, staticQuantScale(c)));
  return RmsNormQuantInputData{
      generateHost(c.x, c.dtype, c.seed, TensorStream::X, rows, c.N, c.ld, poisonBits(c.dtype)),
      generateHost(rmsNormWeightDist(c.spec), wt, c.seed, TensorStream::Weight, {0}, c.N, c.N, poisonBits(wt)),
      std::move(scale), rows};
}

}  // namespace ulpcheck
