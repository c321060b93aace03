// How much host memory this process may use, so a case too large for the
// machine is skipped (in a campaign) or refused (by `repro`) with the reason,
// instead of the kernel's OOM killer ending ulpcheck (and, on a shared CI
// runner, its neighbours) with nothing said.
#pragma once

#include <cstdint>
#include <string>

namespace ulpcheck {

struct MemoryLimit {
  uint64_t bytes = 0;  // 0: not known (no limit is applied)
  std::string source;  // where it comes from, for messages
};

/// The first of: $ULPCHECK_MAX_MEMORY (bytes, or with a K/M/G/T suffix:
/// "64G"); the smallest of the cgroup's memory limit (v2 memory.max, v1
/// memory.limit_in_bytes, along the process's cgroup path), RLIMIT_AS, and
/// MemTotal + SwapTotal — or, on machines whose memory is hot-plugged as it
/// is used (virtio-mem: MemTotal starts far below what the machine will
/// give, as on the Firecracker GPU machines), 20 x MemTotal. Read once.
const MemoryLimit& hostMemoryLimit();

/// Parses $ULPCHECK_MAX_MEMORY's format; 0 if malformed.
uint64_t parseMemorySize(const std::string& text);

/// "1.5 GiB" and the like.
std::string formatBytes(uint64_t bytes);

}  // namespace ulpcheck
