// `ulpcheck list`: the ops, the kernel variants with their contracts,
// preconditions and origins (mutants with the bug they reproduce), the
// properties, and the device.
#pragma once

#include <string>

namespace ulpcheck {

std::string formatCatalog();

}  // namespace ulpcheck
