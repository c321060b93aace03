// The spec fields every norm op shares (core/spec.h): the dtype of its
// weights, where it rounds, a weight offset and the dtype of its saved
// statistics, and for the norms that add a residual first (allreduce_rmsnorm,
// fused_add_rmsnorm) the residual's dtype. An op's own fields live in its
// folder (LayerNorm's affine in kernels/layernorm/layernorm.h, RMSNorm's bias
// in kernels/rmsnorm/rmsnorm.h). Production norms differ
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
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/spec.h"

namespace ulpcheck {

enum class Rounding : uint8_t { Plain = 0, Llama = 1 };

/// Where a forward's saved statistics are rounded: fp32 (the default), or
/// the activation dtype (stats=T).
enum class SavedStats : uint8_t { Fp32 = 0, Activation = 1 };

/// The weights' dtype (w, gamma, beta and their gradients); unset: the activation dtype.
inline constexpr SpecKey<std::optional<DType>> kWeightDtype{"wdtype"};
inline constexpr SpecKey<Rounding> kRounding{"rounding"};
/// y = xhat (offset + w), offset + w formed in fp32; Gemma's 1.
inline constexpr SpecKey<float> kWeightOffset{"offset"};
inline constexpr SpecKey<SavedStats> kSavedStats{"stats"};

/// Their descriptors: an op whose spec has one declares it (OpAdapter::spec).
const SpecField& weightDtypeField();
const SpecField& roundingField();
const SpecField& weightOffsetField();
const SpecField& savedStatsField();

inline DType weightDtype(DType activations, const Spec& s) { return kWeightDtype(s).value_or(activations); }

/// The dtype of the residual and residual_out of a norm that adds one
/// (res=fp32: quack's residual_dtype=fp32 adds the residual in fp32, keeps
/// the sum in fp32 and normalises that sum); unset: the activation dtype.
inline constexpr SpecKey<std::optional<DType>> kResidualDtype{"res"};
inline DType residualDtype(DType activations, const Spec& s) { return kResidualDtype(s).value_or(activations); }
const SpecField& residualDtypeField();

/// The dtype whose values the saved statistics hold (stored as fp32 floats).
inline DType statsDtype(DType activations, const Spec& s) {
  return kSavedStats(s) == SavedStats::Activation ? activations : DType::F32;
}
inline bool statsInActivationDtype(const Spec& s) { return kSavedStats(s) == SavedStats::Activation; }

inline const char* roundingName(Rounding r) { return r == Rounding::Llama ? "llama" : "plain"; }

}  // namespace ulpcheck
