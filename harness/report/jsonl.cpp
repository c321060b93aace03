#include "harness/report/jsonl.h"

#include <stdexcept>

namespace ulpcheck {

JsonlWriter::JsonlWriter(const std::string& path) : path_(path), out_(path, std::ios::out | std::ios::trunc) {
  if (!out_) throw std::runtime_error("cannot open '" + path + "' for writing");
}

std::unique_ptr<JsonlWriter> JsonlWriter::keeping(std::function<void(const nlohmann::json&)> keep) {
  auto w = std::make_unique<JsonlWriter>([](const std::string&) {});
  w->alsoKeep(std::move(keep));
  return w;
}

void JsonlWriter::write(const nlohmann::json& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (keep_) keep_(record);
  if (sink_) {
    sink_(record.dump());
    return;
  }
  out_ << record.dump() << '\n';
  out_.flush();
}

}  // namespace ulpcheck
