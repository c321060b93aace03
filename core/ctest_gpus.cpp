#include "core/ctest_gpus.h"

#include <cstdlib>
#include <string>

namespace ulpcheck {

void useCtestAllocatedGpus() {
  const char* count_text = std::getenv("CTEST_RESOURCE_GROUP_COUNT");
  if (!count_text) return;
  const int groups = std::atoi(count_text);
  std::string visible;
  for (int g = 0; g < groups; ++g) {
    const char* kind = std::getenv(("CTEST_RESOURCE_GROUP_" + std::to_string(g)).c_str());
    if (!kind || std::string(kind) != "gpus") continue;
    const char* spec = std::getenv(("CTEST_RESOURCE_GROUP_" + std::to_string(g) + "_GPUS").c_str());
    if (!spec) continue;
    // "id:<id>,slots:<n>" (one allocation per group).
    const std::string s = spec;
    const size_t at = s.find("id:");
    if (at == std::string::npos) continue;
    const size_t end = s.find(',', at);
    if (!visible.empty()) visible += ',';
    visible += s.substr(at + 3, end == std::string::npos ? std::string::npos : end - at - 3);
  }
  if (!visible.empty()) setenv("CUDA_VISIBLE_DEVICES", visible.c_str(), 1);
}

}  // namespace ulpcheck
