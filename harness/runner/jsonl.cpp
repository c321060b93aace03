#include "harness/runner/jsonl.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "harness/runner/exit_codes.h"

namespace ulpcheck {

namespace {
/// Writes all `n` bytes (through short writes and EINTR); returns the bytes
/// written and sets `err` (ENOSPC for a write of none) when it stops early.
size_t writeAll(int fd, const char* p, size_t n, int& err) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : ENOSPC;
      break;
    }
    done += size_t(w);
  }
  return done;
}
}  // namespace

JsonlWriter::JsonlWriter(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(fmt::format("cannot open '{}' for writing: {}", path, std::strerror(errno)));
}

JsonlWriter::~JsonlWriter() {
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<JsonlWriter> JsonlWriter::keeping(std::function<void(const nlohmann::json&)> keep) {
  auto w = std::make_unique<JsonlWriter>([](const std::string&) {});
  w->alsoKeep(std::move(keep));
  return w;
}

std::string JsonlWriter::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

void JsonlWriter::write(const nlohmann::json& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (keep_) keep_(record);
  if (sink_) {
    sink_(record.dump());
    return;
  }
  if (!error_.empty()) return;  // the file ends at its last whole record; the run reports why
  const std::string line = record.dump() + '\n';
  int err = 0;
  const size_t done = writeAll(fd_, line.data(), line.size(), err);
  if (done < line.size()) {
    // Take back the part of this record that was written, so the file holds
    // whole lines only (a regular file; /dev/full and pipes cannot be cut).
    struct stat st {};
    const bool cut_back = done > 0 && ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode) &&
                          ::ftruncate(fd_, written_) == 0 && ::lseek(fd_, written_, SEEK_SET) == written_;
    error_ = fmt::format("cannot write the JSON lines to '{}': {} (after {} whole records{}; later records were not "
                         "written)",
                         path_, std::strerror(err), records_,
                         done == 0 || cut_back ? ", which the file keeps" : ", and a part of the next");
    // Said at once (the run goes on, its table still printed, and ends with exit code 4).
    std::fprintf(stderr, "\nulpcheck: %s\n", error_.c_str());
    std::fflush(stderr);
    return;
  }
  written_ += int64_t(line.size());
  ++records_;
}

void writeWholeFile(const std::string& path, const std::string& text, const std::string& what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot write {} to '{}': {}", what, path, std::strerror(errno)));
  int err = 0;
  if (writeAll(fd, text.data(), text.size(), err) < text.size()) {
    ::close(fd);
    throw std::runtime_error(fmt::format("cannot write {} to '{}': {}", what, path, std::strerror(err)));
  }
  if (::close(fd) != 0)
    throw std::runtime_error(fmt::format("cannot write {} to '{}': {}", what, path, std::strerror(errno)));
}

void checkWritableFile(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) throw std::runtime_error(fmt::format("{}: the file name is empty", option));
  if (fs::is_directory(path, ec))
    throw std::runtime_error(fmt::format("{} {}: is a folder; give a file name (e.g. {}/report)", option, path, path));
  // A pipe or a device (/dev/stdout, a FIFO a reader waits on) is opened
  // once, by the run: opened and closed here, a FIFO's reader would see its end.
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec)) return;
  const fs::path parent = fs::absolute(path, ec).parent_path();
  if (!fs::is_directory(parent, ec))
    throw std::runtime_error(fmt::format("{} {}: the folder {} does not exist", option, path, parent.string()));
  // Opened as the run will open it; a file made only to see that it can be
  // is removed again (a run refused later leaves no empty report behind).
  const bool existed = fs::exists(path, ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("{} {}: cannot be written: {}", option, path, std::strerror(errno)));
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

void checkOutputFiles(const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [option, path] : files) {
    if (path.empty()) continue;
    try {
      checkWritableFile(path, option);
    } catch (const std::runtime_error& e) {
      throw UsageError(e.what());
    }
  }
}

std::unique_ptr<JsonlWriter> openJsonLines(const std::string& path) {
  if (path.empty()) return nullptr;
  checkOutputFiles({{"--json", path}});
  return std::make_unique<JsonlWriter>(path);
}

bool sayJsonLinesError(const JsonlWriter* json) {
  if (!json || json->error().empty()) return false;
  fmt::print("\n# I/O ERROR: {}\n", json->error());
  return true;
}

}  // namespace ulpcheck
