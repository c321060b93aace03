// JSON-lines results: one object per line, flushed as written, so a crash or
// a hang loses nothing already measured.
#pragma once

#include <fstream>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace ulpcheck {

class JsonlWriter {
 public:
  explicit JsonlWriter(const std::string& path);  // throws std::runtime_error if it cannot be opened
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
  std::mutex mutex_;
};

}  // namespace ulpcheck
