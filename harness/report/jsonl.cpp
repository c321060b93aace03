#include "harness/report/jsonl.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

namespace ulpcheck {

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
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      // Take back the part of this record that was written, so the file holds
      // whole lines only (a regular file; /dev/full and pipes cannot be cut).
      struct stat st {};
      const bool cut_back = done > 0 && ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode) && ::ftruncate(fd_, written_) == 0 &&
                            ::lseek(fd_, written_, SEEK_SET) == written_;
      error_ = fmt::format("cannot write the JSON lines to '{}': {} (after {} whole records{}; later records were not "
                           "written)",
                           path_, std::strerror(err), records_,
                           done == 0 || cut_back ? ", which the file keeps" : ", and a part of the next");
      // Said at once (the run goes on, its table still printed, and ends with exit code 4).
      std::fprintf(stderr, "\nulpcheck: %s\n", error_.c_str());
      std::fflush(stderr);
      return;
    }
    done += size_t(n);
  }
  written_ += int64_t(line.size());
  ++records_;
}

void writeWholeFile(const std::string& path, const std::string& text, const std::string& what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot write {} to '{}': {}", what, path, std::strerror(errno)));
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      throw std::runtime_error(fmt::format("cannot write {} to '{}': {}", what, path, std::strerror(err)));
    }
    done += size_t(n);
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

}  // namespace ulpcheck
