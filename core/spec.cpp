#include "core/spec.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/case_spec.h"

namespace ulpcheck {

namespace {

std::map<std::string, OpSpecDeclaration>& declarations() {
  static std::map<std::string, OpSpecDeclaration> by_op;
  return by_op;
}

std::map<std::string, const SpecField*>& fieldsByKey() {
  static std::map<std::string, const SpecField*> by_key;
  return by_key;
}

DType dtypeOrThrow(const std::string& key, const std::string& text) {
  const auto t = parseDType(text);
  if (!t) throw CaseParseError(fmt::format("'{}': '{}' is not one of fp32, fp16, bf16", key, text));
  return *t;
}

}  // namespace

bool takes(const std::vector<SpecCode>& can, SpecCode code) {
  return std::find(can.begin(), can.end(), code) != can.end();
}

std::function<std::string(const std::vector<SpecCode>&, SpecCode, DType)> unlessListed(std::string why) {
  return [why = std::move(why)](const std::vector<SpecCode>& can, SpecCode c, DType) {
    return takes(can, c) ? std::string() : why;
  };
}

bool declaredFlag(const char* option, const nlohmann::json& value) {
  if (!value.is_boolean())
    throw std::invalid_argument(fmt::format("{}: give true or false, not {}", option, value.dump()));
  return value.get<bool>();
}

std::string declaredText(const char* option, const nlohmann::json& value) {
  if (!value.is_string()) throw std::invalid_argument(fmt::format("{}: give a name, not {}", option, value.dump()));
  return value.get<std::string>();
}

double declaredNumber(const char* option, const nlohmann::json& value) {
  if (!value.is_number()) throw std::invalid_argument(fmt::format("{}: give a number, not {}", option, value.dump()));
  return value.get<double>();
}

std::function<std::vector<SpecCode>(const nlohmann::json&)> declaredName(
    std::string option, std::function<SpecCode(const std::string&, DType)> parse, std::string names) {
  return [option = std::move(option), parse = std::move(parse), names = std::move(names)](const nlohmann::json& v) {
    const std::string name = declaredText(option.c_str(), v);
    try {
      return std::vector<SpecCode>{parse(name, DType::F32)};
    } catch (const CaseParseError&) {
      throw std::invalid_argument(fmt::format("{} '{}' is not one of {}", option, name, names));
    }
  };
}

std::vector<SpecDraw> firstMostly(const std::vector<SpecCode>& can) {
  std::vector<SpecDraw> d;
  for (SpecCode c : can) d.push_back({d.empty() ? size_t(3) : size_t(1), c});
  return d;
}

void declareSpec(const std::string& op, OpSpecDeclaration declaration) {
  std::map<int, std::string> slots;
  for (const auto& [key, f] : fieldsByKey()) slots[f->draw_slot] = key;
  // A variant's declaration would set two fields with one option.
  std::map<std::string, std::string> options;  // a declarable field's option -> its key
  for (const SpecField* f : declaration.fields)
    if (!f->option.empty() && !options.emplace(f->option, f->key).second)
      throw std::logic_error(fmt::format("op {}: spec fields '{}' and '{}' are both declared as '{}'", op,
                                         options[f->option], f->key, f->option));
  for (const SpecField* f : declaration.fields) {
    const auto known = fieldsByKey().find(f->key);
    if (known != fieldsByKey().end() && known->second != f)
      throw std::logic_error(fmt::format("op {} declares a second spec field named '{}'", op, f->key));
    const auto slot = slots.find(f->draw_slot);
    if (slot != slots.end() && slot->second != f->key)
      throw std::logic_error(
          fmt::format("spec fields '{}' and '{}' share draw slot {}", slot->second, f->key, f->draw_slot));
    fieldsByKey()[f->key] = f;
    slots[f->draw_slot] = f->key;
  }
  for (const SpecRule& r : declaration.rules) {
    auto declared = [&](const std::string& k) {
      return std::any_of(declaration.fields.begin(), declaration.fields.end(),
                         [&](const SpecField* f) { return f->key == k; });
    };
    if (!declared(r.when) || !declared(r.then))
      throw std::logic_error(
          fmt::format("op {}: a rule between '{}' and '{}', not both its fields", op, r.when, r.then));
  }
  declarations()[op] = std::move(declaration);
}

const OpSpecDeclaration& specOf(const std::string& op) {
  static const OpSpecDeclaration none;
  const auto it = declarations().find(op);
  return it == declarations().end() ? none : it->second;
}

const SpecField* findSpecField(const std::string& key) {
  const auto it = fieldsByKey().find(key);
  return it == fieldsByKey().end() ? nullptr : it->second;
}

int specDrawSlots() {
  int n = 0;
  for (const auto& [key, f] : fieldsByKey()) n = std::max(n, f->draw_slot + 1);
  return n;
}

std::string specLabel(const std::string& op, DType activations, const Spec& s) {
  if (s.plain()) return "plain";
  std::string out;
  for (const SpecField* f : specOf(op).fields)
    if (const auto c = s.code(f->key)) {
      if (!out.empty()) out += ' ';
      out += f->label(*c, activations);
    }
  return out;
}

SpecField choiceField(std::string key, std::string meaning, int draw_slot, std::vector<std::string> names) {
  SpecField f;
  f.key = std::move(key);
  f.meaning = std::move(meaning);
  f.draw_slot = draw_slot;
  f.print = [names](SpecCode c, DType) { return names.at(size_t(c)); };
  f.parse = [key = f.key, names](const std::string& text, DType) {
    const auto it = std::find(names.begin(), names.end(), text);
    if (it == names.end()) {
      std::string all;
      for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
      throw CaseParseError(fmt::format("'{}': '{}' is not one of {}", key, text, all));
    }
    return SpecCode(it - names.begin());
  };
  f.label = [key = f.key, names](SpecCode c, DType) { return fmt::format("{}={}", key, names.at(size_t(c))); };
  return f;
}

SpecField fp32OrActivationField(std::string key, std::string meaning, int draw_slot, std::string option,
                                std::string does) {
  SpecField f;
  f.key = std::move(key);
  f.meaning = std::move(meaning);
  f.draw_slot = draw_slot;
  f.print = [](SpecCode c, DType a) { return std::string(dtypeName(c != 0 ? a : DType::F32)); };
  f.parse = [key = f.key](const std::string& text, DType a) {  // "fp32" is the default, in an fp32 case too
    const auto t = parseDType(text);
    if (!t) throw CaseParseError(fmt::format("'{}': '{}' is not one of fp32, fp16, bf16", key, text));
    if (*t == DType::F32) return SpecCode(0);
    if (*t != a)
      throw CaseParseError(
          fmt::format("'{}' must be fp32 or the activation dtype ({}), got {}", key, dtypeName(a), dtypeName(*t)));
    return SpecCode(1);
  };
  f.label = [key = f.key](SpecCode, DType a) { return fmt::format("{}={}", key, dtypeName(a)); };
  f.unsupported = [does](const std::vector<SpecCode>& can, SpecCode c, DType a) {
    if (a == DType::F32 || takes(can, c)) return std::string();  // in fp32 both are the same spec
    return c != 0 ? fmt::format("{} in fp32 only", does)
                  : fmt::format("{} in the activation dtype ({}) only", does, dtypeName(a));
  };
  f.draws = [](const std::vector<SpecCode>& can, DType a) {
    std::vector<SpecDraw> d;
    if (takes(can, 0) || a == DType::F32) d.push_back({3, 0});
    if (takes(can, 1) && a != DType::F32) d.push_back({d.empty() ? size_t(3) : size_t(1), 1});
    return d;
  };
  f.option = option;  // "activation": that one only
  f.declared = [option](const nlohmann::json& v) {
    const std::string value = declaredText(option.c_str(), v);
    if (value == "activation") return std::vector<SpecCode>{1};
    if (value != "fp32")
      throw std::invalid_argument(fmt::format("{} '{}' is not one of fp32, activation", option, value));
    return std::vector<SpecCode>{0};
  };
  return f;
}

SpecField yesNoField(std::string key, std::string meaning, int draw_slot) {
  SpecField f = choiceField(std::move(key), std::move(meaning), draw_slot, {"no", "yes"});
  f.parse = [key = f.key](const std::string& text, DType) {
    if (text != "yes" && text != "no") throw CaseParseError(fmt::format("'{}': '{}' is not one of yes, no", key, text));
    return SpecCode(text == "yes" ? 1 : 0);
  };
  f.label = [key = f.key](SpecCode, DType) { return key; };
  return f;
}

SpecField dtypeField(std::string key, std::string meaning, int draw_slot) {
  using Codec = SpecCodec<std::optional<DType>>;
  SpecField f;
  f.key = std::move(key);
  f.meaning = std::move(meaning);
  f.draw_slot = draw_slot;
  f.print = [](SpecCode c, DType activations) {
    return std::string(dtypeName(Codec::decode(c).value_or(activations)));
  };
  f.parse = [key = f.key](const std::string& text,
                          DType activations) {  // one spelling per case: "same as the activations"
    const DType t = dtypeOrThrow(key, text);
    return t == activations ? SpecCode(0) : Codec::encode(t);
  };
  f.label = [key = f.key](SpecCode c, DType activations) {
    return fmt::format("{}={}", key, dtypeName(Codec::decode(c).value_or(activations)));
  };
  return f;
}

SpecField realField(std::string key, std::string meaning, int draw_slot, float limit) {
  SpecField f;
  f.key = std::move(key);
  f.meaning = std::move(meaning);
  f.draw_slot = draw_slot;
  f.print = [](SpecCode c, DType) { return hexFloat(c); };
  f.parse = [key = f.key](const std::string& text, DType) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);  // decimal or hex (%a)
    if (text.empty() || *end != '\0') throw CaseParseError(fmt::format("'{}': '{}' is not a number", key, text));
    if (static_cast<double>(static_cast<float>(v)) != v)
      throw CaseParseError(fmt::format("'{}': {} is not exactly representable in fp32", key, text));
    return SpecCode(v);
  };
  f.label = [key = f.key](SpecCode c, DType) { return fmt::format("{}={:g}", key, c); };
  f.check = [key = f.key, limit](SpecCode c, DType) {
    if (!(std::fabs(c) <= limit))
      throw CaseParseError(fmt::format("'{}' must be in [-{:g}, {:g}], got {}", key, limit, limit, hexFloat(c)));
  };
  return f;
}

}  // namespace ulpcheck
