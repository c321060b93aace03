#include "harness/runner/corpus.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/rng.h"

namespace ulpcheck {

namespace fs = std::filesystem;

CorpusEntry readCorpusFile(const std::string& path, const std::string& op, const std::string& property) {
  std::ifstream in(path);
  if (!in) throw CorpusError(fmt::format("{}: cannot be read", path));
  CorpusEntry e;
  e.path = path;
  e.op = op;
  e.property = property;
  std::string line, case_line;
  int number = 0, case_line_number = 0;
  while (std::getline(in, line)) {
    ++number;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    if (line[first] == '#') {
      e.comments.push_back(line.substr(first + 1));
      const auto key = line.find_first_not_of(" \t", first + 1);
      if (key != std::string::npos && line.compare(key, 7, "repeat:") == 0) {
        const std::string value = line.substr(key + 7);
        char* end = nullptr;
        const long n = std::strtol(value.c_str(), &end, 10);
        if (end == value.c_str() ||
            value.find_first_not_of(" \t\r", size_t(end - value.c_str())) != std::string::npos || n < 1 ||
            n > kMaxCorpusRepeat)
          throw CorpusError(fmt::format("{}:{}: 'repeat:' takes a count from 1 to {}, not '{}'", path, number,
                                        kMaxCorpusRepeat, value));
        e.repeat = int(n);
      }
      continue;
    }
    if (case_line_number)
      throw CorpusError(fmt::format("{}:{}: a second case line (the first is line {}); one case per file", path, number,
                                    case_line_number));
    case_line = line;
    case_line_number = number;
  }
  if (!case_line_number) throw CorpusError(fmt::format("{}: no case line (only comments or empty)", path));
  try {
    e.spec = parseCaseString(case_line);
  } catch (const CaseParseError& err) {
    throw CorpusError(fmt::format("{}:{}: {}", path, case_line_number, err.what()));
  }
  if (!op.empty() && e.spec.op != op)
    throw CorpusError(
        fmt::format("{}:{}: case is for op '{}' but the file lies under '{}'", path, case_line_number, e.spec.op, op));
  return e;
}

std::vector<CorpusEntry> loadCorpus(const std::string& root, const std::string& kind) {
  std::vector<CorpusEntry> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  std::vector<std::string> paths;
  for (const auto& op_dir : fs::directory_iterator(root))
    if (op_dir.is_directory())
      for (const auto& prop_dir : fs::directory_iterator(op_dir.path()))
        if (prop_dir.is_directory() && fs::is_directory(prop_dir.path() / kind))
          for (const auto& f : fs::directory_iterator(prop_dir.path() / kind))
            if (f.is_regular_file() && f.path().extension() == ".case") paths.push_back(f.path().string());
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    const fs::path path(p);
    out.push_back(readCorpusFile(p, path.parent_path().parent_path().parent_path().filename().string(),
                                 path.parent_path().parent_path().filename().string()));
  }
  return out;
}

std::string defaultCorpusDir() {
  if (const char* env = std::getenv("ULPCHECK_CORPUS"); env && *env) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "ulpcheck" / "corpora";
    if (fs::is_directory(installed, ec)) return installed.string();
  }
  return ULPCHECK_DEFAULT_CORPUS;
}

std::string saveCrashingCase(const std::string& root, const std::string& property, const CaseSpec& spec,
                             const std::vector<std::string>& comments) {
  const std::string line = toCaseString(spec);
  uint64_t h = 0;
  for (char ch : line) h = mix64(h ^ static_cast<unsigned char>(ch));
  const fs::path dir = fs::path(root) / spec.op / property / "crashing";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw CorpusError(fmt::format("{}: cannot be created: {}", dir.string(), ec.message()));
  const fs::path file = dir / fmt::format("{}-{:08x}.case", spec.kernel, uint32_t(h));
  // Written whole under a name of its own, then renamed into place: runs
  // saving the same case at once never leave a mix of their lines.
  const fs::path part = dir / fmt::format(".{}.{}.part", file.filename().string(), ::getpid());
  {
    std::ofstream out(part);
    for (const auto& c : comments) out << "# " << c << '\n';
    out << line << '\n';
    out.close();
    if (!out) {
      fs::remove(part, ec);
      throw CorpusError(fmt::format("{}: cannot be written", file.string()));
    }
  }
  fs::rename(part, file, ec);
  if (ec) {
    fs::remove(part, ec);
    throw CorpusError(fmt::format("{}: cannot be written", file.string()));
  }
  return file.string();
}

}  // namespace ulpcheck
