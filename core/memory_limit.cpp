#include "core/memory_limit.h"

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace ulpcheck {

namespace {

constexpr uint64_t kNoLimit = uint64_t{1} << 60;  // cgroups write "max" or a huge number for "none"

/// A cgroup file's number, or 0 where it says none.
uint64_t readLimitFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  return *end || v >= kNoLimit ? 0 : v;
}

/// The tightest memory limit from the process's cgroup up to the root: v2's
/// memory.max, v1's memory.limit_in_bytes; 0: none.
uint64_t cgroupLimit() {
  namespace fs = std::filesystem;
  uint64_t limit = 0;
  auto tighten = [&](uint64_t v) {
    if (v && (!limit || v < limit)) limit = v;
  };
  auto walk = [&](const fs::path& root, const std::string& path, const char* file) {
    for (fs::path p = root / fs::path(path).relative_path();; p = p.parent_path()) {
      tighten(readLimitFile(p / file));
      if (p == root || !p.has_parent_path()) break;
    }
  };
  // Lines "hierarchy:controllers:path": v2's is "0::/path", v1's memory one "N:memory:/path".
  std::ifstream in("/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    if (line.rfind("0::", 0) == 0) walk("/sys/fs/cgroup", path, "memory.max");
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');)
      if (name == "memory") walk("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes");
  }
  return limit;
}

/// MemTotal + SwapTotal from /proc/meminfo, in bytes.
uint64_t memTotal() {
  std::ifstream in("/proc/meminfo");
  uint64_t total = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    if ((fields >> key >> kib) && (key == "MemTotal:" || key == "SwapTotal:")) total += kib * 1024;
  }
  return total;
}

/// Where memory is hot-plugged as it is used, what it may grow to, as a
/// multiple of MemTotal at the start: the Firecracker GPU machines here
/// started at 31 GiB and gave 256 GiB (2 x H200), 31 and 512 (4 x), 62 and
/// 560 (8 x). A bound far above any real case, that still refuses absurd ones.
constexpr uint64_t kHotPlugGrowth = 20;

/// Memory that grows as it is used (virtio-mem): MemTotal says too little.
bool memoryHotPlugged() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/bus/virtio/drivers/virtio_mem", ec))
    if (e.path().filename().string().rfind("virtio", 0) == 0) return true;
  return false;
}

}  // namespace

uint64_t parseMemorySize(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !(v > 0)) return 0;
  std::string unit(end);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (!unit.empty() && (unit.back() == 'i')) unit.pop_back();
  double scale = 1;
  if (unit.size() > 1) return 0;
  if (!unit.empty()) {
    switch (std::toupper(static_cast<unsigned char>(unit[0]))) {
      case 'K': scale = 1024.0; break;
      case 'M': scale = 1024.0 * 1024; break;
      case 'G': scale = 1024.0 * 1024 * 1024; break;
      case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
      default: return 0;
    }
  }
  return uint64_t(v * scale);
}

std::string formatBytes(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", double(bytes) / double(uint64_t{1} << 30));
  if (bytes >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", double(bytes) / double(uint64_t{1} << 20));
  return fmt::format("{} bytes", bytes);
}

const MemoryLimit& hostMemoryLimit() {
  static const MemoryLimit limit = [] {
    if (const char* env = std::getenv("ULPCHECK_MAX_MEMORY"); env && *env) {
      if (const uint64_t v = parseMemorySize(env)) return MemoryLimit{v, fmt::format("ULPCHECK_MAX_MEMORY={}", env)};
    }
    MemoryLimit m;
    auto tighten = [&](uint64_t v, const std::string& source) {
      if (v && (!m.bytes || v < m.bytes)) m = {v, source};
    };
    tighten(cgroupLimit(), "the cgroup's memory limit");
    rlimit as{};
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) tighten(as.rlim_cur, "RLIMIT_AS (ulimit -v)");
    if (!memoryHotPlugged()) tighten(memTotal(), "MemTotal + SwapTotal");
    else
      tighten(kHotPlugGrowth * memTotal(),
              fmt::format("{} x MemTotal: memory hot-plugged as it is used", kHotPlugGrowth));
    return m;
  }();
  return limit;
}

}  // namespace ulpcheck
