#include "core/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include <fmt/format.h>

namespace ulpcheck {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<const char*, SharedRegion> by_base;
  uint64_t next_id = 1;
};

Registry& registry() {
  static Registry r;
  return r;
}

void add(SharedRegion region) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  region.id = r.next_id++;
  r.by_base[region.base] = region;
}

std::optional<SharedRegion> remove(const void* base) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.by_base.find(static_cast<const char*>(base));
  if (it == r.by_base.end()) return std::nullopt;
  SharedRegion out = it->second;
  r.by_base.erase(it);
  return out;
}

}  // namespace

void* allocateSharedHost(size_t bytes, const std::string& name) {
  const int fd = memfd_create(("ulpcheck:" + name).c_str(), MFD_CLOEXEC);
  if (fd < 0) throw OutOfMemory(fmt::format("memfd_create for '{}': {}", name, std::strerror(errno)));
  if (ftruncate(fd, off_t(bytes)) != 0) {
    close(fd);
    throw OutOfMemory(
        fmt::format("cannot allocate {} bytes of shared host memory for '{}': {}", bytes, name, std::strerror(errno)));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    throw OutOfMemory(
        fmt::format("cannot map {} bytes of shared host memory for '{}': {}", bytes, name, std::strerror(errno)));
  }
  add(SharedRegion{0, Backend::Host, fd, 0, static_cast<char*>(p), bytes});
  return p;
}

void releaseSharedHost(void* base) noexcept {
  if (const auto region = remove(base)) {
    munmap(region->base, region->bytes);
    close(region->fd);
  }
}

void registerDeviceRegion(void* base, size_t bytes, int device) {
  add(SharedRegion{0, Backend::Cuda, -1, device, static_cast<char*>(base), bytes});
}

void unregisterDeviceRegion(void* base) noexcept { remove(base); }

std::optional<std::pair<SharedRegion, size_t>> findRegion(const void* p) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const char* c = static_cast<const char*>(p);
  auto it = r.by_base.upper_bound(c);
  if (it == r.by_base.begin()) return std::nullopt;
  --it;
  if (c >= it->second.base + it->second.bytes) return std::nullopt;
  return std::make_pair(it->second, size_t(c - it->second.base));
}

void* mapForeignHost(int pid, int fd, size_t bytes) {
  const std::string path = fmt::format("/proc/{}/fd/{}", pid, fd);
  const int mine = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (mine < 0) throw std::runtime_error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, mine, 0);
  close(mine);
  if (p == MAP_FAILED) throw std::runtime_error(fmt::format("cannot map {}: {}", path, std::strerror(errno)));
  return p;
}

void unmapForeignHost(void* p, size_t bytes) noexcept { munmap(p, bytes); }

}  // namespace ulpcheck
