// The spec a norm kernel implements, beyond its op's formula: the dtype of
// its weights, where it rounds, and a weight offset. Production norms differ
// exactly here (../docs/ARCHITECTURE.md, "Specs"):
//   plain  y = round_T(x rstd (offset + w)), all in fp32, one rounding
//          (PyTorch's F.rms_norm, quack, Liger's gemma mode; with offset 1
//          and w kept near 0 it is HF's GemmaRMSNorm)
//   llama  y = round_T(round_T(x rstd) (offset + w)): x-hat rounded to the
//          activation dtype T before the weight multiplies it (HF
//          LlamaRMSNorm, vLLM's rms_norm spec, Liger's llama mode)
// The weights w (gamma, beta) and their gradients are in `weight`'s dtype,
// the activation dtype when unset; an fp32 weight beside 16-bit activations
// is the common training setup (AMP). offset + w is formed in fp32.
// The statistics a forward saves for its backward (rstd; LayerNorm's mean
// too) are fp32 unless `stats` names the activation dtype: Liger's
// LayerNorm up to at least 0.8.2 stored Mean and RSTD in X's dtype (0.8.5
// stores fp32) and its backward
// rebuilt x-hat from those rounded values, so the backward's spec is the
// derivative taken at the saved, rounded statistics. The kernel ABI passes
// them as fp32 arrays either way; under stats=T their values are values of T.
// RMSNorm may carry a bias, y = xhat (offset + w) + b with b and db in the
// weight dtype (quack's rmsnorm(bias=), whose db is the sum of dy over rows
// rounded to the weight's dtype). allreduce_rmsnorm's residual and
// residual_out may have a dtype of their own: quack's residual_dtype=fp32
// adds the residual in fp32, keeps the sum in fp32 and normalises that sum.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/dtype.h"

namespace ulpcheck {

enum class Rounding : uint8_t { Plain = 0, Llama = 1 };

/// LayerNorm's affine parameters: gamma and beta (torch.nn.LayerNorm's
/// default), gamma only (bias=False: y = xhat gamma, no dbeta), or neither
/// (elementwise_affine=False: y = xhat, no dgamma and no dbeta). A kernel is
/// given null pointers for the parameters and gradients the spec lacks.
enum class Affine : uint8_t { Full = 0, NoBias = 1, None = 2 };

struct NormSpec {
  std::optional<DType> weight;  // unset: the activation dtype
  Rounding rounding = Rounding::Plain;
  float weight_offset = 0.f;      // y = xhat (offset + w); Gemma's 1
  Affine affine = Affine::Full;   // LayerNorm only
  std::optional<DType> stats;     // unset: saved in fp32; else the activation dtype
  bool bias = false;              // RMSNorm only: y = xhat (offset + w) + b
  std::optional<DType> residual;  // allreduce_rmsnorm only: residual and residual_out; unset: the activation dtype

  bool operator==(const NormSpec& o) const {
    return weight == o.weight && rounding == o.rounding && weight_offset == o.weight_offset && affine == o.affine &&
           stats == o.stats && bias == o.bias && residual == o.residual;
  }
  bool plain() const {
    return !weight && rounding == Rounding::Plain && weight_offset == 0.f && affine == Affine::Full && !stats &&
           !bias && !residual;
  }
  bool hasGamma() const { return affine != Affine::None; }
  bool hasBeta() const { return affine == Affine::Full; }
};

inline DType weightDtype(DType activations, const NormSpec& s) { return s.weight.value_or(activations); }

/// The dtype of allreduce_rmsnorm's residual and residual_out.
inline DType residualDtype(DType activations, const NormSpec& s) { return s.residual.value_or(activations); }

/// The dtype whose values the saved statistics hold (stored as fp32 floats).
inline DType statsDtype(const NormSpec& s) { return s.stats.value_or(DType::F32); }

inline const char* roundingName(Rounding r) { return r == Rounding::Llama ? "llama" : "plain"; }

inline std::optional<Rounding> parseRounding(std::string_view name) {
  if (name == "plain") return Rounding::Plain;
  if (name == "llama") return Rounding::Llama;
  return std::nullopt;
}

inline const char* affineName(Affine a) { return a == Affine::NoBias ? "nobias" : a == Affine::None ? "none" : "full"; }

inline std::optional<Affine> parseAffine(std::string_view name) {
  if (name == "full") return Affine::Full;
  if (name == "nobias") return Affine::NoBias;
  if (name == "none") return Affine::None;
  return std::nullopt;
}

/// "plain", or the parts that differ from it, e.g. "w=fp32 llama offset=1":
/// how tables and reports name a case's spec.
std::string specLabel(const NormSpec& s);

}  // namespace ulpcheck
