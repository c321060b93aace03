#include "kernels/door.h"

#include <algorithm>

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

std::pair<const OpDoor*, const OpDoor::Entry*> entryPoint(const std::string& entry) {
  for (const OpDoor& d : doors())
    for (const OpDoor::Entry& e : d.entries)
      if (e.name == entry) return {&d, &e};
  return {nullptr, nullptr};
}

}  // namespace ulpcheck
