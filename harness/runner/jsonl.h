// JSON-lines results: one object per line, written as it is measured, so a
// crash or a hang loses nothing already measured. A write that fails (a full
// disk, /dev/full, a file-size limit) is not ignored: the file is cut back to
// its last whole record (a record half written is taken back, so readers see
// only complete lines), later records are not written, and `error()` says
// what happened, for the run to report and end with exit code 4.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ulpcheck {

class JsonlWriter {
 public:
  explicit JsonlWriter(const std::string& path);  // throws std::runtime_error if it cannot be opened
  /// Hands each record, serialised on one line, to `sink` instead (a worker
  /// sends its records to its coordinator).
  explicit JsonlWriter(std::function<void(const std::string&)> sink) : sink_(std::move(sink)) {}
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;
  /// A writer that keeps nothing but hands every record to `keep` (a report
  /// built at the end of a run), or null.
  static std::unique_ptr<JsonlWriter> keeping(std::function<void(const nlohmann::json&)> keep);
  /// Also hands every record written to `keep` (the records for --html).
  void alsoKeep(std::function<void(const nlohmann::json&)> keep) { keep_ = std::move(keep); }
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }
  /// Why the file stopped being written (empty: every record was written).
  std::string error() const;

 private:
  std::string path_;
  int fd_ = -1;
  int64_t written_ = 0;  // bytes of whole records in the file
  int64_t records_ = 0;  // whole records in the file
  std::string error_;
  std::function<void(const std::string&)> sink_;
  std::function<void(const nlohmann::json&)> keep_;
  mutable std::mutex mutex_;
};

/// Writes `text` as the whole of file `path`; throws std::runtime_error
/// saying `what` could not be written, and why (a full disk included).
void writeWholeFile(const std::string& path, const std::string& text, const std::string& what);

/// Throws std::runtime_error naming `option` unless `path` can be written: a
/// file that is not a folder, in a folder that exists. Checked before a run,
/// so a report it cannot write does not cost the whole campaign first. A file
/// created to see that it can be is removed again.
void checkWritableFile(const std::string& path, const std::string& option);

/// Checks, before any case runs, that a command's report files can be
/// written (option, path; an empty path is none): a UsageError now, not
/// after the whole campaign.
void checkOutputFiles(const std::vector<std::pair<std::string, std::string>>& files);

/// The JSON-lines writer of --json `path` (null for none; a UsageError if
/// the file cannot be written).
std::unique_ptr<JsonlWriter> openJsonLines(const std::string& path);

/// A JSON-lines file that could not be written in full: said after the
/// command's table (the table and the file's whole records stand); true
/// then, for exit code 4.
bool sayJsonLinesError(const JsonlWriter* json);

}  // namespace ulpcheck
