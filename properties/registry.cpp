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
  return {{"tensor", f.tensor},       {"row", f.row},       {"col", f.col},
          {"got", hexFloat(f.got)},   {"exact", hexFloat(f.exact)},
          {"correctly_rounded", hexFloat(f.correctly_rounded)},
          {"ulp", f.ulp},             {"budget_ulp", f.budget_ulp},
          {"ratio", f.ratio},         {"note", f.note},     {"inputs", f.inputs}};
}

nlohmann::json toJson(const TensorStats& s) {
  return {{"tensor", s.tensor},   {"elements", s.elements}, {"wrong", s.wrong},
          {"max_ulp", s.max_ulp}, {"rms_ulp", s.rms_ulp},   {"max_ratio", s.max_ratio},
          {"nonzero", s.nonzero}, {"sharp", s.sharp},       {"power", s.power()}};
}

nlohmann::json toJson(const Outcome& o) {
  nlohmann::json j = {{"verdict", verdictName(o.verdict)}, {"summary", o.summary}};
  for (const auto& f : o.findings) j["findings"].push_back(toJson(f));
  for (const auto& s : o.stats) j["stats"].push_back(toJson(s));
  return j;
}

}  // namespace ulpcheck
