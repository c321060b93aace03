#include "core/case_spec.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ulpcheck {

namespace {

// Ranks of one allreduce case: a node's GPUs, and more virtual ranks than any node has.
constexpr int64_t kMaxRanks = 64;

const char* const kDistNames[] = {"normal",     "constant_rows",    "zero_rows", "signed_zeros",
                                  "large_mean", "outlier_channels", "subnormal", "near_overflow"};
static_assert(sizeof kDistNames / sizeof kDistNames[0] == static_cast<size_t>(Dist::kCount));

int64_t parseInt(std::string_view key, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  const long long r = std::strtoll(v.c_str(), &end, 0);
  if (v.empty() || *end != '\0' || errno == ERANGE)
    throw CaseParseError(fmt::format("'{}': '{}' is not an integer", key, v));
  return r;
}

/// An int field: parsed in 64 bits and range-checked before it is narrowed
/// (ctas=4294967297 must not become ctas=1).
int parseIntIn(std::string_view key, const std::string& v, int64_t lo, int64_t hi) {
  const int64_t r = parseInt(key, v);
  if (r < lo || r > hi) throw CaseParseError(fmt::format("'{}' must be in [{}, {}], got {}", key, lo, hi, v));
  return static_cast<int>(r);
}

uint64_t parseUnsigned(std::string_view key, const std::string& v) {
  errno = 0;
  char* end = nullptr;
  if (!v.empty() && v[0] == '-') throw CaseParseError(fmt::format("'{}': '{}' must not be negative", key, v));
  const unsigned long long r = std::strtoull(v.c_str(), &end, 0);
  if (v.empty() || *end != '\0' || errno == ERANGE)
    throw CaseParseError(fmt::format("'{}': '{}' is not an unsigned integer", key, v));
  return r;
}

double parseReal(std::string_view key, const std::string& v) {
  char* end = nullptr;
  const double r = std::strtod(v.c_str(), &end);  // decimal or hex (%a)
  if (v.empty() || *end != '\0') throw CaseParseError(fmt::format("'{}': '{}' is not a number", key, v));
  return r;
}

std::string hexU64(uint64_t v) { return fmt::format("{:#x}", v); }

/// One serialised field: how to print it, how to parse it, whether the case
/// string may leave it out (then it keeps its default) and whether it is
/// printed when it holds its default.
struct Field {
  const char* key;
  bool required;
  std::function<std::string(const CaseSpec&)> print;
  std::function<void(CaseSpec&, const std::string&)> parse;
  std::function<bool(const CaseSpec&)> is_default;
};

const std::vector<Field>& fields() {
  static const CaseSpec d{};
  static const std::vector<Field> table = {
      {"op", true, [](const CaseSpec& c) { return c.op; }, [](CaseSpec& c, const std::string& v) { c.op = v; },
       nullptr},
      {"kernel", true, [](const CaseSpec& c) { return c.kernel; },
       [](CaseSpec& c, const std::string& v) { c.kernel = v; }, nullptr},
      {"dtype", true, [](const CaseSpec& c) { return std::string(dtypeName(c.dtype)); },
       [](CaseSpec& c, const std::string& v) {
         auto t = parseDType(v);
         if (!t) throw CaseParseError(fmt::format("'dtype': '{}' is not one of fp32, fp16, bf16", v));
         c.dtype = *t;
       },
       nullptr},
      {"M", true, [](const CaseSpec& c) { return std::to_string(c.M); },
       [](CaseSpec& c, const std::string& v) { c.M = parseInt("M", v); }, nullptr},
      {"N", true, [](const CaseSpec& c) { return std::to_string(c.N); },
       [](CaseSpec& c, const std::string& v) { c.N = parseInt("N", v); }, nullptr},
      {"ld", false, [](const CaseSpec& c) { return std::to_string(c.ld); },
       [](CaseSpec& c, const std::string& v) { c.ld = parseInt("ld", v); }, nullptr},
      {"eps", false, [](const CaseSpec& c) { return hexFloat(c.eps); },
       [](CaseSpec& c, const std::string& v) {
         const double e = parseReal("eps", v);
         if (static_cast<double>(static_cast<float>(e)) != e)
           throw CaseParseError(fmt::format("'eps': {} is not exactly representable in fp32", v));
         c.eps = static_cast<float>(e);
       },
       nullptr},
      {"dist", false, [](const CaseSpec& c) { return std::string(distName(c.x.kind)); },
       [](CaseSpec& c, const std::string& v) {
         auto k = parseDist(v);
         if (!k) throw CaseParseError(fmt::format("'dist': unknown distribution '{}'", v));
         c.x.kind = *k;
       },
       nullptr},
      {"sigma", false, [](const CaseSpec& c) { return hexFloat(c.x.sigma); },
       [](CaseSpec& c, const std::string& v) { c.x.sigma = parseReal("sigma", v); }, nullptr},
      {"mean", false, [](const CaseSpec& c) { return hexFloat(c.x.mean); },
       [](CaseSpec& c, const std::string& v) { c.x.mean = parseReal("mean", v); }, nullptr},
      {"dy_sigma", false, [](const CaseSpec& c) { return hexFloat(c.dy_sigma); },
       [](CaseSpec& c, const std::string& v) { c.dy_sigma = parseReal("dy_sigma", v); }, nullptr},
      {"seed", false, [](const CaseSpec& c) { return hexU64(c.seed); },
       [](CaseSpec& c, const std::string& v) { c.seed = parseUnsigned("seed", v); }, nullptr},
      {"ranks", false, [](const CaseSpec& c) { return std::to_string(c.ranks); },
       [](CaseSpec& c, const std::string& v) { c.ranks = parseIntIn("ranks", v, 1, kMaxRanks); },
       [](const CaseSpec& c) { return c.ranks == d.ranks; }},
      {"ctas", false, [](const CaseSpec& c) { return std::to_string(c.ctas); },
       [](CaseSpec& c, const std::string& v) { c.ctas = parseIntIn("ctas", v, 0, std::numeric_limits<int>::max()); },
       [](const CaseSpec& c) { return c.ctas == d.ctas; }},
  };
  return table;
}

/// The spec field `key` of case `c`'s op, or a CaseParseError naming its op's fields.
const SpecField& specFieldOf(const CaseSpec& c, const std::string& key) {
  const OpSpecDeclaration& spec = specOf(c.op);
  for (const SpecField* f : spec.fields)
    if (f->key == key) return *f;
  const SpecField* other = findSpecField(key);
  if (!other) throw CaseParseError(fmt::format("unknown key '{}'", key));
  std::string has;
  for (const SpecField* f : spec.fields) has += (has.empty() ? "" : ", ") + f->key;
  throw CaseParseError(fmt::format("'{}' ({}) is not a spec field of op={}; {}", key, other->meaning, c.op,
                                   has.empty() ? "it has none" : "its spec fields: " + has));
}

/// Throws CaseParseError where the spec sets a field its op lacks, a value
/// out of its field's range, or a combination its op's rules exclude.
void validateSpec(const CaseSpec& c) {
  for (const auto& [key, code] : c.spec.values()) {
    const SpecField& f = specFieldOf(c, key);
    if (f.check) f.check(code, c.dtype);
  }
  for (const SpecRule& r : specOf(c.op).rules)
    if (c.spec.code(r.when).value_or(0) == r.when_code && c.spec.code(r.then)) throw CaseParseError(r.message);
}

/// Whether `key` is a spec field of another op set to its default (bias=no on a
/// LayerNorm case): a value that says nothing, accepted as the absent field.
bool defaultOfAnotherOp(const CaseSpec& c, const std::string& key, const std::string& value) {
  const SpecField* f = findSpecField(key);
  if (!f) return false;
  for (const SpecField* own : specOf(c.op).fields)
    if (own == f) return false;
  try {
    return f->parse(value, c.dtype) == 0;
  } catch (const CaseParseError&) {
    return false;
  }
}

CaseSpec fromPairs(const std::vector<std::pair<std::string, std::string>>& pairs) {
  CaseSpec c;
  std::set<std::string> seen;
  bool ld_given = false;
  std::vector<std::pair<std::string, std::string>> spec_pairs;  // read once op and dtype are known
  for (const auto& [key, value] : pairs) {
    const Field* field = nullptr;
    for (const Field& f : fields())
      if (key == f.key) field = &f;
    if (!field && !findSpecField(key)) throw CaseParseError(fmt::format("unknown key '{}'", key));
    if (!seen.insert(key).second) throw CaseParseError(fmt::format("key '{}' given twice", key));
    if (!field) {
      spec_pairs.emplace_back(key, value);
      continue;
    }
    field->parse(c, value);
    ld_given |= key == "ld";
  }
  for (const Field& f : fields())
    if (f.required && !seen.count(f.key)) throw CaseParseError(fmt::format("missing required key '{}'", f.key));
  if (!ld_given) c.ld = c.N;
  for (const auto& [key, value] : spec_pairs) {
    if (defaultOfAnotherOp(c, key, value)) continue;
    const SpecField& f = specFieldOf(c, key);
    c.spec.setCode(key, f.parse(value, c.dtype));
  }
  validateCase(c);
  return c;
}

}  // namespace

const char* distName(Dist d) {
  const auto i = static_cast<size_t>(d);
  return i < static_cast<size_t>(Dist::kCount) ? kDistNames[i] : "?";
}

std::optional<Dist> parseDist(std::string_view name) {
  for (size_t i = 0; i < static_cast<size_t>(Dist::kCount); ++i)
    if (name == kDistNames[i]) return static_cast<Dist>(i);
  return std::nullopt;
}

bool CaseSpec::operator==(const CaseSpec& o) const { return toCaseString(*this) == toCaseString(o); }

double maxAbsInput(const DistParams& p) {
  // |z| < sqrt(3) * 2 = 3.4641 for the Irwin-Hall normal; outliers scale by 2^8.
  const double normal = std::fabs(p.mean) + 3.4642 * p.sigma;
  switch (p.kind) {
    case Dist::OutlierChannels: return 256.0 * normal;
    case Dist::Subnormal: return 0.0;
    case Dist::NearOverflow: return 65504.0;
    default: return normal;
  }
}

void validateCase(const CaseSpec& c) {
  auto fail = [](const std::string& m) { throw CaseParseError(m); };
  if (c.op.empty()) fail("'op' is empty");
  if (c.kernel.empty()) fail("'kernel' is empty");
  if (c.M < 1) fail(fmt::format("'M' must be >= 1, got {}", c.M));
  if (c.N < 1) fail(fmt::format("'N' must be >= 1, got {}", c.N));
  if (c.M > (int64_t{1} << 31) || c.N > (int64_t{1} << 31))
    fail(fmt::format("shape {}x{} is beyond the 2^31 rows/columns the generator indexes", c.M, c.N));
  if (c.ld < c.N) fail(fmt::format("'ld' ({}) must be >= N ({})", c.ld, c.N));
  // eps >= 2^-60 keeps mean(x^2) + eps a normal fp32 number even for zero rows
  // (the rstd budget relies on it); eps <= 1 covers every norm layer in use.
  if (!(c.eps >= 0x1p-60f && c.eps <= 1.0f)) fail(fmt::format("'eps' must be in [2^-60, 1], got {}", hexFloat(c.eps)));
  if (!(c.x.sigma > 0.0) || !std::isfinite(c.x.sigma)) fail("'sigma' must be positive and finite");
  if (!std::isfinite(c.x.mean)) fail("'mean' must be finite");
  if (!(c.dy_sigma > 0.0) || !std::isfinite(c.dy_sigma)) fail("'dy_sigma' must be positive and finite");
  if (c.ranks < 1 || c.ranks > kMaxRanks) fail(fmt::format("'ranks' must be in [1, {}], got {}", kMaxRanks, c.ranks));
  if (c.ctas < 0) fail(fmt::format("'ctas' must be >= 0, got {}", c.ctas));
  // Inputs must be finite: a distribution that overflows the dtype would make
  // every check about Inf handling rather than the regime it names.
  if (maxAbsInput(c.x) > maxFinite(c.dtype))
    fail(fmt::format("dist={} sigma={} mean={} can reach {:g}, beyond the largest {} ({:g})", distName(c.x.kind),
                     hexFloat(c.x.sigma), hexFloat(c.x.mean), maxAbsInput(c.x), dtypeName(c.dtype),
                     maxFinite(c.dtype)));
  if (3.4642 * c.dy_sigma >= maxFinite(c.dtype)) fail("'dy_sigma' overflows the dtype");
  validateSpec(c);
}

std::string toCaseString(const CaseSpec& c) {
  std::string out;
  auto add = [&](const std::string& key, const std::string& value) {
    out += (out.empty() ? "" : " ") + key + "=" + value;
  };
  for (const Field& f : fields())
    if (!f.is_default || !f.is_default(c)) add(f.key, f.print(c));
  // The spec, in its op's order: only the fields that are not at their default.
  for (const SpecField* f : specOf(c.op).fields)
    if (const auto code = c.spec.code(f->key)) add(f->key, f->print(*code, c.dtype));
  return out;
}

CaseSpec parseCaseString(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> pairs;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) ++i;
    if (i >= text.size()) break;
    size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\t' && text[j] != '\n' && text[j] != '\r') ++j;
    const std::string_view token = text.substr(i, j - i);
    const size_t eq = token.find('=');
    if (eq == std::string_view::npos || eq == 0)
      throw CaseParseError(fmt::format("'{}' is not of the form key=value", token));
    pairs.emplace_back(std::string(token.substr(0, eq)), std::string(token.substr(eq + 1)));
    i = j;
  }
  if (pairs.empty()) throw CaseParseError("empty case string");
  return fromPairs(pairs);
}

nlohmann::json toJson(const CaseSpec& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const Field& f : fields()) {
    if (f.is_default && f.is_default(c)) continue;
    j[f.key] = f.print(c);
  }
  for (const SpecField* f : specOf(c.op).fields)
    if (const auto code = c.spec.code(f->key)) j[f->key] = f->print(*code, c.dtype);
  j["case"] = toCaseString(c);
  return j;
}

CaseSpec caseFromJson(const nlohmann::json& j) {
  if (!j.is_object()) throw CaseParseError("case JSON must be an object");
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& [key, value] : j.items()) {
    if (key == "case") continue;  // the redundant one-line form
    if (value.is_string()) pairs.emplace_back(key, value.get<std::string>());
    else if (value.is_number_unsigned()) pairs.emplace_back(key, std::to_string(value.get<uint64_t>()));
    else if (value.is_number_integer()) pairs.emplace_back(key, std::to_string(value.get<int64_t>()));
    else if (value.is_number()) pairs.emplace_back(key, hexFloat(value.get<double>()));
    else throw CaseParseError(fmt::format("'{}': expected a string or a number", key));
  }
  return fromPairs(pairs);
}

}  // namespace ulpcheck
