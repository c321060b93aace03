// An op's spec: the choices a kernel makes beyond its op's formula (the
// dtype of its weights, where it rounds, a weight offset, a bias, ...).
// Each op declares the fields its spec has (OpAdapter::spec); a field
// is a SpecField descriptor, defined in the folder of the op that owns it
// (or, for the fields every norm shares, in core/norm_spec.h), and a case's
// Spec holds values of its own op's fields only. Shared code (the case
// string, JSON, the workers, generators, variants' declarations) meets
// fields only through their descriptors, never by name.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.h"

namespace ulpcheck {

/// The value of a spec field, encoded as a double (its code); 0 is the
/// field's default, which a Spec never stores: two specs are equal exactly
/// when their non-default values are.
using SpecCode = double;

/// How a typed value is encoded (SpecKey<T>): every default value (false,
/// 0, an enum's first, no dtype) has code 0.
template <typename T>
struct SpecCodec {
  static SpecCode encode(T v) { return static_cast<SpecCode>(v); }
  static T decode(SpecCode c) { return static_cast<T>(c); }
};
template <>
struct SpecCodec<std::optional<DType>> {  // unset: "the activation dtype" (code 0); else the dtype's code + 1
  static SpecCode encode(std::optional<DType> v) { return v ? static_cast<SpecCode>(static_cast<int>(*v) + 1) : 0; }
  static std::optional<DType> decode(SpecCode c) {
    if (c == 0) return std::nullopt;
    return static_cast<DType>(static_cast<int>(c) - 1);
  }
};

/// The non-default values of one case's spec fields.
class Spec {
 public:
  std::optional<SpecCode> code(std::string_view key) const {
    const auto it = values_.find(key);  // no string is made: kernels read fields per call
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }
  /// Sets a field's code; its default (0) erases it.
  void setCode(const std::string& key, SpecCode c) {
    if (c == 0) values_.erase(key);
    else values_[key] = c;
  }
  bool plain() const { return values_.empty(); }
  const std::map<std::string, SpecCode, std::less<>>& values() const { return values_; }
  bool operator==(const Spec& o) const { return values_ == o.values_; }
  bool operator!=(const Spec& o) const { return !(*this == o); }

 private:
  std::map<std::string, SpecCode, std::less<>> values_;
};

/// Typed access to one field of a spec: `kRounding(spec)`, `kRounding.set(spec, r)`.
template <typename T>
struct SpecKey {
  using value_type = T;
  const char* key;
  T operator()(const Spec& s) const {
    const auto c = s.code(key);
    return c ? SpecCodec<T>::decode(*c) : T{};
  }
  void set(Spec& s, T v) const { s.setCode(key, SpecCodec<T>::encode(v)); }
  SpecCode code(T v) const { return SpecCodec<T>::encode(v); }
};

/// A spec with some values set: `withSpec(kRounding, Rounding::Llama, kWeightOffset, 1.f)`.
inline Spec withSpec() { return Spec{}; }
template <typename T, typename... Rest>
Spec withSpec(const SpecKey<T>& k, typename SpecKey<T>::value_type v, Rest&&... rest) {
  Spec s = withSpec(std::forward<Rest>(rest)...);
  k.set(s, v);
  return s;
}

/// One choice a generator may draw, with its weight (properties/generators.cpp).
struct SpecDraw {
  size_t weight;
  SpecCode code;
};

/// A spec field: its case-string key, what it means (for messages), how its
/// value reads and prints, what a variant may declare it implements, and how
/// cases draw it. Defined once, in the folder of the op that owns it.
struct SpecField {
  std::string key;
  std::string meaning;
  /// Its position among the random draws of a case's spec
  /// (properties/generators.cpp): a new field takes the next free slot, so
  /// the fields before it keep drawing the same cases.
  int draw_slot = 0;
  /// Its value in a case string (any code, the default's included).
  std::function<std::string(SpecCode, DType activations)> print;
  /// The code of a value written in a case string; throws CaseParseError. A
  /// value meaning the default (wdtype equal to the activations) is code 0.
  std::function<SpecCode(const std::string& text, DType activations)> parse;
  /// How a non-default value names itself in a spec's label ("w=fp32", "llama").
  std::function<std::string(SpecCode, DType activations)> label;
  /// Throws CaseParseError where a value is out of the range the field
  /// admits (an offset beyond [-16, 16]); null: every parsed value is admitted.
  std::function<void(SpecCode, DType activations)> check;
  /// Why a variant implementing the codes `can` does not take `code`; empty
  /// if it does. Null: "does not implement <key>=<value>" unless `can` has it.
  std::function<std::string(const std::vector<SpecCode>& can, SpecCode, DType activations)> unsupported;
  /// The choices a case of a variant implementing `can` draws, weighted,
  /// the first the one shrinking goes toward. Null: firstMostly(can).
  std::function<std::vector<SpecDraw>(const std::vector<SpecCode>& can, DType activations)> draws;
  /// How a variant declares the values it implements, in the same words
  /// through both doors: `option` names it (Python: ulpcheck.rmsnorm(...,
  /// <option>=value); a C plugin: ulpcheck_variant::spec, "<option>=value
  /// ..."), and `declared` gives the codes a declared value means (throws
  /// std::invalid_argument for a value it cannot take). An option not
  /// declared: the default only. No option: the field cannot be declared.
  std::string option;
  std::function<std::vector<SpecCode>(const nlohmann::json& value)> declared;
};

/// A rule between two of an op's fields: where `when` holds `when_code`,
/// `then` must keep its default (a combination no library ships and the
/// oracle does not model). Generators draw `then` back to its default there.
struct SpecRule {
  std::string when;
  SpecCode when_code;
  std::string then;
  std::string message;  // the error a case breaking it gets
};

/// The spec an op declares (OpAdapter::spec), in the order
/// its fields print in a case string.
struct OpSpecDeclaration {
  std::vector<const SpecField*> fields;
  std::vector<SpecRule> rules;
};

/// Declares op `op`'s spec fields; its table does when it registers. A field
/// declared by several ops (wdtype) is one descriptor; two descriptors of
/// one key, or two fields of one draw slot, are a logic_error.
void declareSpec(const std::string& op, OpSpecDeclaration declaration);
/// The spec op `op` declared; empty for an op that declared none.
const OpSpecDeclaration& specOf(const std::string& op);
/// A field any op declared, by key; null if none did.
const SpecField* findSpecField(const std::string& key);
/// The largest draw slot of every field declared, plus one.
int specDrawSlots();

/// The codes a variant implements for each field of its op's spec (absent:
/// the default only): the Spec's counterpart in kernels/registry.h's
/// SpecSupport.
using SpecCodes = std::map<std::string, std::vector<SpecCode>>;

/// Whether a variant implementing the codes `can` takes `code`.
bool takes(const std::vector<SpecCode>& can, SpecCode code);
/// SpecField::unsupported for a field whose variants either list a value or
/// do not take it, saying `why` ("implements RMSNorm without a bias only").
std::function<std::string(const std::vector<SpecCode>&, SpecCode, DType)> unlessListed(std::string why);
/// A declared option's value (SpecField::declared) as a flag, a text or a
/// number; throws std::invalid_argument naming `option` for another kind.
bool declaredFlag(const char* option, const nlohmann::json& value);
std::string declaredText(const char* option, const nlohmann::json& value);
double declaredNumber(const char* option, const nlohmann::json& value);
/// SpecField::declared of a choice declared by one of its names (that one
/// only): `parse` reads it, a name it refuses is std::invalid_argument
/// saying `option` is not one of `names`.
std::function<std::vector<SpecCode>(const nlohmann::json&)> declaredName(
    std::string option, std::function<SpecCode(const std::string&, DType)> parse, std::string names);

/// The default draws: `can`, the first weighted 3 and each other 1.
std::vector<SpecDraw> firstMostly(const std::vector<SpecCode>& can);

/// Descriptors of the common kinds of field; their owner sets the rest
/// (label, check, unsupported, draws, option and declared) where the default will not do.
/// A choice among names, code i the i-th (the first the default).
SpecField choiceField(std::string key, std::string meaning, int draw_slot, std::vector<std::string> names);
/// "yes" or "no" (the default).
SpecField yesNoField(std::string key, std::string meaning, int draw_slot);
/// A dtype, unset meaning the activation dtype (SpecKey<std::optional<DType>>).
SpecField dtypeField(std::string key, std::string meaning, int draw_slot);
/// An fp32 value in [-limit, limit], 0 the default (SpecKey<float>).
SpecField realField(std::string key, std::string meaning, int draw_slot, float limit);
/// fp32 (code 0, the default) or the activation dtype (code 1), written as a
/// dtype in case strings (key=bf16) and declared as `option`="fp32" or
/// "activation"; in fp32 cases the two are one spec. `does` says what a
/// variant does in one of them only ("saves its statistics": "... in fp32
/// only").
SpecField fp32OrActivationField(std::string key, std::string meaning, int draw_slot, std::string option,
                                std::string does);

/// "plain", or the labels of the fields that differ from it, in the op's
/// order, e.g. "w=fp32 llama offset=1": how tables and reports name a spec.
std::string specLabel(const std::string& op, DType activations, const Spec& s);

}  // namespace ulpcheck
