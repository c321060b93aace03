// CaseSpec serialisation: round trips (property-based over generated cases)
// and a clear error naming the field for every kind of malformed input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <rapidcheck.h>

#include "harness/core/case_spec.h"
#include "properties/generators.h"

namespace ulpcheck {
namespace {

rc::Gen<CaseSpec> anyCase() {
  return gen::caseSpec(gen::CaseOptions{"rmsnorm", {"host_separate", "cuda_separate"}, {DType::F32, DType::F16, DType::BF16}, Tier::Nightly});
}

TEST(CaseSpec, StringAndJsonRoundTrip) {
  EXPECT_TRUE(rc::check("case string and JSON round trip", [] {
    const CaseSpec c = *anyCase();
    RC_ASSERT(parseCaseString(toCaseString(c)) == c);
    RC_ASSERT(caseFromJson(nlohmann::json::parse(toJson(c).dump())) == c);
    RC_ASSERT(toCaseString(c).find('\n') == std::string::npos);
  }));
}

TEST(CaseSpec, GeneratedCasesAreValid) {
  EXPECT_TRUE(rc::check("generated cases pass validateCase", [] {
    const CaseSpec c = *anyCase();
    validateCase(c);  // throws on an invalid case, failing the property
    RC_ASSERT(c.M * c.N <= maxElements(Tier::Nightly) || c.M == 1);
  }));
}

TEST(CaseSpec, DefaultsAndOrderFreedom) {
  const CaseSpec c = parseCaseString("  N=7 dtype=bf16   M=3 kernel=k op=rmsnorm ");
  EXPECT_EQ(c.ld, 7);  // ld defaults to N
  EXPECT_EQ(c.M, 3);
  EXPECT_EQ(c.dtype, DType::BF16);
  EXPECT_EQ(c.x.kind, Dist::Normal);
  EXPECT_EQ(parseCaseString("op=rmsnorm kernel=k dtype=fp32 M=1 N=1 seed=0x10").seed, 16u);
}

void expectError(const std::string& text, const std::string& mentions) {
  try {
    parseCaseString(text);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const CaseParseError& e) {
    EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
  }
}

TEST(CaseSpec, MalformedInputsNameTheProblem) {
  const std::string base = "op=rmsnorm kernel=k dtype=fp32 ";
  expectError("", "empty");
  expectError(base + "M=1", "missing required key 'N'");
  expectError(base + "M=1 N=2 N=3", "given twice");
  expectError(base + "M=1 N=2 colour=red", "unknown key 'colour'");
  expectError(base + "M=x N=2", "'M'");
  expectError(base + "M=0 N=2", "'M' must be >= 1");
  expectError(base + "M=1 N=8 ld=4", "'ld'");
  expectError(base + "M=1 N=2 eps=0", "'eps'");
  expectError(base + "M=1 N=2 eps=0.1", "not exactly representable");
  expectError(base + "M=1 N=2 sigma=-1", "'sigma'");
  expectError(base + "M=1 N=2 seed=-4", "negative");
  expectError(base + "M=1 N=2 dist=gaussian", "unknown distribution");
  expectError("op=rmsnorm kernel=k dtype=fp64 M=1 N=2", "'dtype'");
  expectError("op=rmsnorm kernel=k dtype=fp16 M=1 N=2 sigma=0x1p+15", "beyond the largest fp16");
  expectError(base + "M=1 N=2 justtext", "key=value");
  EXPECT_THROW(caseFromJson(nlohmann::json::parse("[1,2]")), CaseParseError);
  EXPECT_THROW(caseFromJson(nlohmann::json::parse(R"({"op":"rmsnorm","kernel":"k","dtype":"fp32","M":1,"N":[2]})")),
               CaseParseError);
}

}  // namespace
}  // namespace ulpcheck
