// JSON-lines results: one object per line, flushed as written, so a crash or
// a hang loses nothing already measured.
#pragma once

#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace ulpcheck {

class JsonlWriter {
 public:
  explicit JsonlWriter(const std::string& path);  // throws std::runtime_error if it cannot be opened
  /// Hands each record, serialised on one line, to `sink` instead (a worker
  /// sends its records to its coordinator).
  explicit JsonlWriter(std::function<void(const std::string&)> sink) : sink_(std::move(sink)) {}
  /// A writer that keeps nothing but hands every record to `keep` (a report
  /// built at the end of a run), or null.
  static std::unique_ptr<JsonlWriter> keeping(std::function<void(const nlohmann::json&)> keep);
  /// Also hands every record written to `keep` (the records for --html).
  void alsoKeep(std::function<void(const nlohmann::json&)> keep) { keep_ = std::move(keep); }
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
  std::function<void(const std::string&)> sink_;
  std::function<void(const nlohmann::json&)> keep_;
  std::mutex mutex_;
};

}  // namespace ulpcheck
