#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "properties/op.h"
#include "properties/property.h"

namespace ulpcheck {

std::vector<const OpAdapter*>& opRegistry() {
  static std::vector<const OpAdapter*> view;
  return view;
}

namespace {
std::vector<std::unique_ptr<OpAdapter>>& ownedOps() {
  static std::vector<std::unique_ptr<OpAdapter>> owned;
  return owned;
}
}  // namespace

bool registerOp(std::unique_ptr<OpAdapter> op) {
  declareSpec(op->name(), op->spec());
  opRegistry().push_back(op.get());
  ownedOps().push_back(std::move(op));
  return true;
}

const OpAdapter* findOp(const std::string& name) {
  for (const OpAdapter* op : opRegistry())
    if (op->name() == name) return op;
  return nullptr;
}

const KernelInfo* OpAdapter::findKernel(const std::string& op, const std::string& kernel) {
  for (const KernelInfo& k : kernelCatalog())
    if (k.op == op && k.name == kernel) return &k;
  return nullptr;
}

const KernelInfo& OpAdapter::requireKernel(const std::string& op, const std::string& kernel) {
  const KernelInfo* k = findKernel(op, kernel);
  if (!k)
    throw std::invalid_argument(fmt::format("op '{}' has no kernel variant '{}' (see `ulpcheck list`)", op, kernel));
  return *k;
}

std::optional<Outcome> OpAdapter::accuracyOnGpu(const CaseSpec&, const ExecContext&, const RunResult*,
                                                OutputDigests*) const {
  return std::nullopt;
}

std::vector<Property>& propertyRegistry() {
  static std::vector<Property> all;
  return all;
}

const Property* findProperty(const std::string& name) {
  for (const Property& p : propertyRegistry())
    if (p.name == name) return &p;
  return nullptr;
}

bool registerProperty(Property p) {
  propertyRegistry().push_back(std::move(p));
  return true;
}

const char* verdictName(Verdict v) {
  switch (v) {
    case Verdict::Pass: return "pass";
    case Verdict::Fail: return "FAIL";
    case Verdict::Expected: return "expected";
    case Verdict::Skip: return "skip";
    case Verdict::Inconclusive: return "inconclusive";
  }
  return "?";
}

nlohmann::json toJson(const Finding& f) {
  if (f.bitwise)
    return {{"tensor", f.tensor},
            {"row", f.row},
            {"col", f.col},
            {"got", hexFloat(f.got)},
            {"reference", hexFloat(f.exact)},
            {"note", f.note},
            {"inputs", f.inputs},
            {"bitwise", true}};
  return {{"tensor", f.tensor},
          {"row", f.row},
          {"col", f.col},
          {"got", hexFloat(f.got)},
          {"exact", hexFloat(f.exact)},
          {"correctly_rounded", hexFloat(f.correctly_rounded)},
          {"ulp", f.ulp},
          {"budget_ulp", f.budget_ulp},
          {"ratio", f.ratio},
          {"note", f.note},
          {"inputs", f.inputs}};
}

nlohmann::json toJson(const TensorStats& s) {
  const RoundingBias& b = s.bias;
  return {{"tensor", s.tensor},
          {"elements", s.elements},
          {"wrong", s.wrong},
          {"max_ulp", s.max_ulp},
          {"rms_ulp", s.rms_ulp},
          {"max_ratio", s.max_ratio},
          {"nonzero", s.nonzero},
          {"sharp", s.sharp},
          {"power", s.power()},
          {"errors", s.errors.toJson()},
          {"bias",
           {{"elements", b.elements},
            {"error_ulp", b.error_ulp},
            {"error_outward_ulp", b.error_outward_ulp},
            {"miss_ulp", b.miss_ulp},
            {"miss_outward_ulp", b.miss_outward_ulp},
            {"allowed", {-b.below, b.above}},
            {"allowed_outward", {-b.outward_below, b.outward_above}},
            {"biased", b.biased()}}}};
}

nlohmann::json toJson(const Outcome& o) {
  nlohmann::json j = {{"verdict", verdictName(o.verdict)}, {"summary", o.summary}};
  for (const auto& f : o.findings) j["findings"].push_back(toJson(f));
  for (const auto& s : o.stats) j["stats"].push_back(toJson(s));
  if (o.fault) j["fault"] = true;
  if (o.hang) j["hang"] = true;
  return j;
}

namespace {
// JSON has no Inf or NaN: nlohmann writes them as null.
double number(const nlohmann::json& j) { return j.is_null() ? INFINITY : j.get<double>(); }
double hexNumber(const nlohmann::json& j) { return std::strtod(j.get<std::string>().c_str(), nullptr); }
}  // namespace

Outcome outcomeFromJson(const nlohmann::json& j) {
  Outcome o;
  const std::string verdict = j.at("verdict").get<std::string>();
  bool known = false;
  for (Verdict v : {Verdict::Pass, Verdict::Fail, Verdict::Expected, Verdict::Skip, Verdict::Inconclusive})
    if (verdict == verdictName(v)) o.verdict = v, known = true;
  if (!known) throw std::invalid_argument("unknown verdict '" + verdict + "'");
  o.summary = j.at("summary").get<std::string>();
  o.fault = j.value("fault", false);
  o.hang = j.value("hang", false);
  for (const auto& f : j.value("findings", nlohmann::json::array())) {
    if (f.value("bitwise", false)) {
      Finding b{f.at("tensor"), f.at("row"), f.at("col"), hexNumber(f.at("got")), hexNumber(f.at("reference"))};
      b.note = f.at("note"), b.inputs = f.at("inputs"), b.bitwise = true;
      o.findings.push_back(std::move(b));
      continue;
    }
    o.findings.push_back({f.at("tensor"), f.at("row"), f.at("col"), hexNumber(f.at("got")), hexNumber(f.at("exact")),
                          hexNumber(f.at("correctly_rounded")), number(f.at("ulp")), number(f.at("budget_ulp")),
                          number(f.at("ratio")), f.at("note"), f.at("inputs")});
  }
  for (const auto& s : j.value("stats", nlohmann::json::array())) {
    TensorStats t;
    t.tensor = s.at("tensor");
    t.elements = s.at("elements");
    t.wrong = s.at("wrong");
    t.max_ulp = number(s.at("max_ulp"));
    t.rms_ulp = number(s.at("rms_ulp"));
    t.max_ratio = number(s.at("max_ratio"));
    t.nonzero = s.at("nonzero");
    t.sharp = s.at("sharp");
    if (s.contains("errors")) t.errors = ErrorDistribution::fromJson(s.at("errors"));
    if (s.contains("bias")) {
      const nlohmann::json& b = s.at("bias");
      t.bias.elements = b.at("elements");
      t.bias.error_ulp = b.at("error_ulp"), t.bias.error_outward_ulp = b.at("error_outward_ulp");
      t.bias.miss_ulp = b.at("miss_ulp"), t.bias.miss_outward_ulp = b.at("miss_outward_ulp");
      t.bias.below = -b.at("allowed")[0].get<double>(), t.bias.above = b.at("allowed")[1];
      t.bias.outward_below = -b.at("allowed_outward")[0].get<double>(),
      t.bias.outward_above = b.at("allowed_outward")[1];
    }
    o.stats.push_back(std::move(t));
  }
  return o;
}

}  // namespace ulpcheck
