#include "kernels/door.h"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ulpcheck {

namespace {
std::vector<OpDoor>& doors() {
  static std::vector<OpDoor> all;
  return all;
}
}  // namespace

bool registerDoor(OpDoor door) {
  doors().push_back(std::move(door));
  return true;
}

const OpDoor* findDoor(const std::string& op) {
  for (const OpDoor& d : doors())
    if (d.op == op) return &d;
  return nullptr;
}

std::string opsWithDoors() {
  std::vector<std::string> ops;  // sorted: registration order is link order
  for (const OpDoor& d : doors()) ops.push_back(d.op);
  std::sort(ops.begin(), ops.end());
  std::string names;
  for (const std::string& op : ops) names += (names.empty() ? "" : ", ") + op;
  return names;
}

SpecSupport declaredSpecSupport(const std::string& op, const nlohmann::json& options) {
  SpecSupport support;
  if (options.is_null()) return support;
  if (!options.is_object()) throw std::invalid_argument(fmt::format("spec options {}: not an object", options.dump()));
  const std::vector<const SpecField*>& fields = specOf(op).fields;
  for (const auto& [option, value] : options.items()) {
    const auto field = std::find_if(fields.begin(), fields.end(),
                                    [&](const SpecField* f) { return f->option == option; });
    if (field == fields.end()) {
      std::string known;
      for (const SpecField* f : fields)
        if (!f->option.empty()) known += (known.empty() ? "" : ", ") + f->option;
      throw std::invalid_argument(fmt::format("'{}' is not a spec option of {} ({})", option, op,
                                              known.empty() ? "it has none" : "its options: " + known));
    }
    support.implements[(*field)->key] = (*field)->declared(value);
  }
  return support;
}

nlohmann::json parseSpecDeclaration(const char* text) {
  nlohmann::json options = nlohmann::json::object();
  if (!text) return options;
  std::istringstream in(text);
  for (std::string item; in >> item;) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw std::invalid_argument(fmt::format("'{}' is not option=value (e.g. fp32_weights=true)", item));
    const std::string option = item.substr(0, eq), value = item.substr(eq + 1);
    if (options.contains(option)) throw std::invalid_argument(fmt::format("'{}' is declared twice", option));
    // true, false, numbers and "quoted" names as JSON; a bare word is a name (rounding=llama).
    nlohmann::json parsed = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
    options[option] = parsed.is_discarded() ? nlohmann::json(value) : std::move(parsed);
  }
  return options;
}

std::pair<const OpDoor*, const OpDoor::Entry*> entryPoint(const std::string& entry) {
  for (const OpDoor& d : doors())
    for (const OpDoor::Entry& e : d.entries)
      if (e.name == entry) return {&d, &e};
  return {nullptr, nullptr};
}

}  // namespace ulpcheck
