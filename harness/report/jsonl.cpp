#include "harness/report/jsonl.h"

#include <stdexcept>

namespace ulpcheck {

JsonlWriter::JsonlWriter(const std::string& path) : path_(path), out_(path, std::ios::out | std::ios::trunc) {
  if (!out_) throw std::runtime_error("cannot open '" + path + "' for writing");
}

void JsonlWriter::write(const nlohmann::json& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (sink_) {
    sink_(record.dump());
    return;
  }
  out_ << record.dump() << '\n';
  out_.flush();
}

}  // namespace ulpcheck
