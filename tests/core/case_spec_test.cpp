// CaseSpec serialisation: round trips (property-based over generated cases)
// and a clear error naming the field for every kind of malformed input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <rapidcheck.h>

#include "core/case_spec.h"
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm_spec.h"
#include "kernels/fused_add_rmsnorm/fused_add_rmsnorm.h"
#include "kernels/layernorm/layernorm.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "properties/allreduce_rmsnorm_inputs.h"
#include "properties/generators.h"
#include "properties/op.h"

namespace ulpcheck {
namespace {

/// Cases of the host variant, and of the CUDA one where this build has it
/// (its specs differ: no bias); a build without CUDA has no cuda_separate.
rc::Gen<CaseSpec> anyCase() {
  std::vector<std::string> kernels{"host_separate"};
  if (OpAdapter::findKernel("rmsnorm", "cuda_separate")) kernels.push_back("cuda_separate");
  return gen::caseSpec(gen::CaseOptions{"rmsnorm", kernels, {DType::F32, DType::F16, DType::BF16}, Tier::Nightly});
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

// A variant that is not registered (cuda_separate without CUDA, a plugin's
// not loaded) is named, with its op, where the generator is made: it once
// came back as a nullptr and the generator dereferenced it.
TEST(CaseSpec, GeneratorsNameAVariantThatIsNotThere) {
  const std::string says = "op 'rmsnorm' has no kernel variant 'no_such_variant'";
  try {
    gen::caseSpec(gen::CaseOptions{"rmsnorm", {"host_separate", "no_such_variant"}, {DType::F32}, Tier::Smoke});
    ADD_FAILURE() << "caseSpec accepted an unknown variant";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
  const CaseSpec base = parseCaseString("op=rmsnorm kernel=no_such_variant dtype=fp32 M=1 N=8");
  try {
    gen::withSpec(base);
    ADD_FAILURE() << "withSpec accepted an unknown variant";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
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

TEST(CaseSpec, ASpecDeclarationClashingWithAnotherIsRefused) {
  // Two descriptors of one key would parse one case string two ways.
  static const SpecField second_wdtype = dtypeField("wdtype", "another weights' dtype", 40);
  EXPECT_THROW(declareSpec("test_op_a", {{&second_wdtype}, {}}), std::logic_error);
  // Two fields of one draw slot would draw from one random stream.
  static const SpecField same_slot = yesNoField("test_flag", "a flag", weightDtypeField().draw_slot);
  EXPECT_THROW(declareSpec("test_op_b", {{&same_slot}, {}}), std::logic_error);
  // A rule must be between two of the op's own fields.
  EXPECT_THROW(declareSpec("test_op_c", {{&weightDtypeField()}, {{"rounding", 1, "wdtype", "never"}}}),
               std::logic_error);
  // Two fields declared by one option would both be set by a variant's declaration.
  static SpecField flag_a = yesNoField("test_flag_a", "a flag", 41), flag_b = yesNoField("test_flag_b", "b flag", 42);
  flag_a.option = flag_b.option = "test_variants";
  EXPECT_THROW(declareSpec("test_op_d", {{&flag_a, &flag_b}, {}}), std::logic_error);
  for (const char* op : {"test_op_a", "test_op_b", "test_op_c", "test_op_d"})
    EXPECT_TRUE(specOf(op).fields.empty()) << op;
  EXPECT_EQ(findSpecField("test_flag_a"), nullptr);
  EXPECT_EQ(findSpecField("test_flag"), nullptr);
}

TEST(CaseSpec, SpecFieldsRoundTripAndDefaultToPlain) {
  const CaseSpec c = parseCaseString("op=rmsnorm kernel=k dtype=bf16 M=2 N=8 wdtype=fp32 rounding=llama offset=1");
  EXPECT_EQ(kWeightDtype(c.spec), DType::F32);
  EXPECT_EQ(kRounding(c.spec), Rounding::Llama);
  EXPECT_EQ(kWeightOffset(c.spec), 1.f);
  EXPECT_EQ(specLabel(c.op, c.dtype, c.spec), "w=fp32 llama offset=1");
  EXPECT_EQ(parseCaseString(toCaseString(c)), c);
  EXPECT_EQ(caseFromJson(toJson(c)), c);
  // The plain spec prints nothing, and weights in the activation dtype have one spelling.
  const CaseSpec plain = parseCaseString("op=rmsnorm kernel=k dtype=bf16 M=2 N=8 wdtype=bf16 rounding=plain offset=0");
  EXPECT_TRUE(plain.spec.plain());
  EXPECT_EQ(specLabel(plain.op, plain.dtype, plain.spec), "plain");
  EXPECT_EQ(toCaseString(plain).find("wdtype"), std::string::npos) << toCaseString(plain);
  EXPECT_EQ(toCaseString(plain).find("rounding"), std::string::npos) << toCaseString(plain);
  EXPECT_EQ(toCaseString(plain).find("offset"), std::string::npos) << toCaseString(plain);
  const std::string base = "op=rmsnorm kernel=k dtype=bf16 M=1 N=2 ";
  expectError(base + "wdtype=fp64", "'wdtype'");
  expectError(base + "rounding=gemma", "'rounding'");
  expectError(base + "offset=0.1", "not exactly representable");
  expectError(base + "offset=100", "'offset'");
  // LayerNorm without beta / without either parameter: a LayerNorm spec only,
  // with no weight dtype when there are no weights.
  const CaseSpec nobias = parseCaseString("op=layernorm kernel=k dtype=bf16 M=2 N=8 wdtype=fp32 affine=nobias");
  EXPECT_EQ(kAffine(nobias.spec), Affine::NoBias);
  EXPECT_TRUE(hasGamma(nobias.spec));
  EXPECT_FALSE(hasBeta(nobias.spec));
  EXPECT_EQ(specLabel(nobias.op, nobias.dtype, nobias.spec), "w=fp32 affine=nobias");
  EXPECT_EQ(parseCaseString(toCaseString(nobias)), nobias);
  EXPECT_EQ(caseFromJson(toJson(nobias)), nobias);
  EXPECT_EQ(toCaseString(parseCaseString("op=layernorm kernel=k dtype=bf16 M=2 N=8 affine=full")).find("affine"),
            std::string::npos);
  expectError(base + "affine=nobias", "'affine' (which affine parameters there are) is not a spec field of op=rmsnorm");
  expectError("op=layernorm kernel=k dtype=bf16 M=1 N=2 affine=none wdtype=fp32", "no weights");
  expectError("op=layernorm kernel=k dtype=bf16 M=1 N=2 affine=bias", "'affine'");
  // Statistics saved in the activation dtype: rmsnorm and layernorm only, the
  // case's own dtype (fp32 is the default and prints nothing), not with llama.
  const CaseSpec saved = parseCaseString("op=layernorm kernel=k dtype=fp16 M=2 N=8 stats=fp16");
  EXPECT_EQ(kSavedStats(saved.spec), SavedStats::Activation);
  EXPECT_EQ(statsDtype(saved.dtype, saved.spec), DType::F16);
  EXPECT_EQ(specLabel(saved.op, saved.dtype, saved.spec), "stats=fp16");
  EXPECT_EQ(parseCaseString(toCaseString(saved)), saved);
  EXPECT_EQ(caseFromJson(toJson(saved)), saved);
  EXPECT_TRUE(parseCaseString(base + "stats=fp32").spec.plain());
  expectError(base + "stats=fp16", "'stats' must be fp32 or the activation dtype (bf16)");
  expectError(base + "stats=bf16 rounding=llama", "not modelled");
  expectError("op=allreduce_rmsnorm kernel=k dtype=bf16 M=1 N=2 stats=bf16",
              "'stats' (the dtype of saved statistics) is not a spec field of op=allreduce_rmsnorm");
  expectError(base + "stats=half", "'stats'");
  // RMSNorm's bias (quack): yes/no, RMSNorm only, not with llama.
  const CaseSpec biased = parseCaseString(base + "wdtype=fp32 bias=yes");
  EXPECT_TRUE(kRmsBias(biased.spec));
  EXPECT_EQ(specLabel(biased.op, biased.dtype, biased.spec), "w=fp32 bias");
  EXPECT_EQ(parseCaseString(toCaseString(biased)), biased);
  EXPECT_EQ(caseFromJson(toJson(biased)), biased);
  EXPECT_TRUE(parseCaseString(base + "bias=no").spec.plain());
  expectError("op=layernorm kernel=k dtype=bf16 M=1 N=2 bias=yes",
              "'bias' (a bias added after the weight, y = xhat w + b) is not a spec field of op=layernorm; its spec "
              "fields: wdtype, affine, stats");
  expectError(base + "bias=yes rounding=llama", "not modelled");
  expectError(base + "bias=1", "'bias': '1' is not one of yes, no");
  // allreduce_rmsnorm's residual dtype: fp32 or the activations' (the default, printing nothing).
  const CaseSpec fused = parseCaseString("op=allreduce_rmsnorm kernel=k dtype=bf16 M=2 N=8 ranks=1 res=fp32");
  EXPECT_EQ(kResidualDtype(fused.spec), DType::F32);
  EXPECT_EQ(residualDtype(fused.dtype, fused.spec), DType::F32);
  EXPECT_EQ(specLabel(fused.op, fused.dtype, fused.spec), "res=fp32");
  EXPECT_EQ(parseCaseString(toCaseString(fused)), fused);
  EXPECT_EQ(caseFromJson(toJson(fused)), fused);
  EXPECT_TRUE(parseCaseString("op=allreduce_rmsnorm kernel=k dtype=bf16 M=2 N=8 res=bf16").spec.plain());
  expectError("op=allreduce_rmsnorm kernel=k dtype=bf16 M=2 N=8 res=fp16",
              "'res' must be fp32 or the activation dtype");
  expectError(base + "res=fp32", "'res' (the residual's dtype) is not a spec field of op=rmsnorm");
  // ...and the dtype its ranks' partials are summed in: fp32 (the default,
  // printing nothing) or the activations' (FlashInfer's fp32_acc=False).
  const CaseSpec in_t = parseCaseString("op=allreduce_rmsnorm kernel=k dtype=fp16 M=2 N=8 ranks=4 acc=fp16");
  EXPECT_EQ(kRankSum(in_t.spec), RankSum::Activation);
  EXPECT_EQ(specLabel(in_t.op, in_t.dtype, in_t.spec), "acc=fp16");
  EXPECT_EQ(parseCaseString(toCaseString(in_t)), in_t);
  EXPECT_EQ(caseFromJson(toJson(in_t)), in_t);
  EXPECT_TRUE(parseCaseString("op=allreduce_rmsnorm kernel=k dtype=bf16 M=2 N=8 acc=fp32").spec.plain());
  expectError("op=allreduce_rmsnorm kernel=k dtype=bf16 M=2 N=8 acc=fp16",
              "'acc' must be fp32 or the activation dtype (bf16)");
  expectError("op=allreduce_rmsnorm kernel=k dtype=bf16 M=2 N=8 acc=bf16 rounding=llama", "not modelled");
  expectError(base + "acc=bf16",
              "'acc' (the dtype the ranks' partials are summed in) is not a spec field of op=rmsnorm");
  // fused_add_rmsnorm: the residual's dtype too, and which sum its norm reads.
  const CaseSpec add = parseCaseString("op=fused_add_rmsnorm kernel=k dtype=bf16 M=2 N=8 wdtype=fp32 sum=fp32");
  EXPECT_EQ(kNormedSum(add.spec), NormedSum::Fp32);
  EXPECT_EQ(specLabel(add.op, add.dtype, add.spec), "w=fp32 sum=fp32");
  EXPECT_EQ(parseCaseString(toCaseString(add)), add);
  EXPECT_EQ(caseFromJson(toJson(add)), add);
  EXPECT_TRUE(parseCaseString("op=fused_add_rmsnorm kernel=k dtype=bf16 M=2 N=8 sum=rounded res=bf16").spec.plain());
  expectError("op=fused_add_rmsnorm kernel=k dtype=bf16 M=2 N=8 sum=fp16", "'sum': 'fp16' is not one of rounded, fp32");
  expectError(base + "sum=fp32", "is not a spec field of op=rmsnorm");
  // A field no op declares for itself: LayerNorm has no rounding point or offset, a made-up op no fields.
  expectError("op=layernorm kernel=k dtype=bf16 M=1 N=2 rounding=llama", "not a spec field of op=layernorm");
  expectError("op=nosuchop kernel=k dtype=bf16 M=1 N=2 offset=1", "not a spec field of op=nosuchop; it has none");
}

/// Counts, over generated cases of one kernel, the 16-bit ones and the specs drawn.
struct SpecCounts {
  int cases = 0, sixteen_bit = 0, fp32_weights = 0, llama = 0, offset = 0, no_bias = 0, no_affine = 0, saved_in_t = 0;
  int rms_bias = 0, fp32_residual = 0;
};

SpecCounts drawSpecs(const std::string& op, const std::string& kernel, int n) {
  SpecCounts k;
  const auto g = gen::caseSpec(gen::CaseOptions{op, {kernel}, {DType::F32, DType::F16, DType::BF16}, Tier::Smoke});
  rc::Random random(0x5bec);
  for (int i = 0; i < n; ++i) {
    const CaseSpec c = g(random.split(), rc::kNominalSize).value();
    ++k.cases;
    k.sixteen_bit += c.dtype != DType::F32;
    k.fp32_weights += c.dtype != DType::F32 && kWeightDtype(c.spec) == DType::F32;
    k.llama += kRounding(c.spec) == Rounding::Llama;
    k.offset += kWeightOffset(c.spec) != 0.f;
    k.no_bias += kAffine(c.spec) == Affine::NoBias;
    k.no_affine += kAffine(c.spec) == Affine::None;
    k.saved_in_t += statsInActivationDtype(c.spec);
    k.rms_bias += kRmsBias(c.spec);
    k.fp32_residual += kResidualDtype(c.spec).has_value();
    if (kRmsBias(c.spec)) {
      EXPECT_EQ(kRounding(c.spec), Rounding::Plain) << toCaseString(c);
    }
    if (statsInActivationDtype(c.spec)) {
      EXPECT_NE(c.dtype, DType::F32) << toCaseString(c);
    }
    if (statsInActivationDtype(c.spec)) {
      EXPECT_EQ(kRounding(c.spec), Rounding::Plain) << toCaseString(c);
    }
  }
  return k;
}

TEST(Generators, SpecsAreDrawnWhereProductionRunsAndOnlyForVariantsThatImplementThem) {
  // The issue's floor: at least 30% of 16-bit cases with fp32 weights (the
  // generator aims at half); Llama rounding and Gemma's offset in 1 of 4.
  const SpecCounts rms = drawSpecs("rmsnorm", "host_separate", 1200);
  EXPECT_GE(rms.fp32_weights * 10, rms.sixteen_bit * 4) << rms.fp32_weights << " of " << rms.sixteen_bit;
  EXPECT_GE(rms.llama * 5, rms.cases) << rms.llama << " of " << rms.cases;
  EXPECT_GE(rms.offset * 5, rms.cases) << rms.offset << " of " << rms.cases;
  EXPECT_EQ(rms.no_bias + rms.no_affine, 0);  // LayerNorm specs
  // rstd saved in the activation dtype: 1 in 4 of the 16-bit plain-rounding cases.
  EXPECT_GE(rms.saved_in_t * 8, rms.sixteen_bit) << rms.saved_in_t << " of " << rms.sixteen_bit;
  // A bias in 1 of 4 of the plain-rounding cases; no residual dtype (allreduce_rmsnorm's).
  EXPECT_GE(rms.rms_bias * 6, rms.cases - rms.llama) << rms.rms_bias << " of " << rms.cases - rms.llama;
  EXPECT_EQ(rms.fp32_residual, 0);
  // The CUDA variants implement no bias: never generated for them (where built).
  if (OpAdapter::findKernel("rmsnorm", "cuda_separate")) {
    EXPECT_EQ(drawSpecs("rmsnorm", "cuda_separate", 300).rms_bias, 0);
  }
  // host_twopass implements fp32 gamma and beta and LayerNorm without beta or
  // without either, and neither rounding=llama nor an offset: those are never
  // generated for it. Without gamma there is no weight dtype.
  const SpecCounts ln = drawSpecs("layernorm", "host_twopass", 600);
  EXPECT_GE(ln.fp32_weights * 10, (ln.sixteen_bit - ln.no_affine) * 4) << ln.fp32_weights << " of " << ln.sixteen_bit;
  EXPECT_GE(ln.no_bias * 6, ln.cases) << ln.no_bias << " of " << ln.cases;
  EXPECT_GE(ln.no_affine * 6, ln.cases) << ln.no_affine << " of " << ln.cases;
  EXPECT_EQ(ln.llama + ln.offset + ln.rms_bias + ln.fp32_residual, 0);
  EXPECT_GE(ln.saved_in_t * 6, ln.sixteen_bit) << ln.saved_in_t << " of " << ln.sixteen_bit;
  // The fused allreduce's host port implements fp32 weights, an offset and an
  // fp32 residual (1 in 4 of 16-bit cases), not llama.
  const SpecCounts ar = drawSpecs("allreduce_rmsnorm", "host_fused_oneshot", 600);
  EXPECT_GE(ar.fp32_weights * 10, ar.sixteen_bit * 4) << ar.fp32_weights << " of " << ar.sixteen_bit;
  EXPECT_GE(ar.offset * 5, ar.cases) << ar.offset << " of " << ar.cases;
  EXPECT_GE(ar.fp32_residual * 6, ar.sixteen_bit) << ar.fp32_residual << " of " << ar.sixteen_bit;
  EXPECT_EQ(ar.llama + ar.no_bias + ar.no_affine + ar.saved_in_t + ar.rms_bias, 0);
}

TEST(Generators, SpecShrinksTowardPlain) {
  CaseSpec base = parseCaseString("op=rmsnorm kernel=host_separate dtype=bf16 M=2 N=8");
  rc::Random random(0x5b);
  for (int tries = 0; tries < 1000; ++tries) {
    const rc::Shrinkable<CaseSpec> s = gen::withSpec(base)(random.split(), rc::kNominalSize);
    if (kWeightDtype(s.value().spec) != DType::F32 || kRounding(s.value().spec) != Rounding::Llama ||
        kWeightOffset(s.value().spec) == 0.f)
      continue;
    // Greedy shrinking (the campaign's driver takes the first shrink that
    // still fails): with every shrink accepted it must end at the plain spec.
    rc::Shrinkable<CaseSpec> at = s;
    for (;;) {
      auto shrinks = at.shrinks();
      auto first = shrinks.next();
      if (!first) break;
      at = *first;
    }
    EXPECT_TRUE(at.value().spec.plain()) << toCaseString(at.value());
    return;
  }
  FAIL() << "withSpec never drew fp32 weights, llama and an offset together";
}

TEST(Generators, RealRankVariantsDrawTheRanksTheHostHasAndOneOnlyOnAOneGpuHost) {
  // Simulated ranks: every degree, shrinking toward 2.
  EXPECT_EQ(rankCounts(false, 0), (std::vector<int>{2, 4, 8, 3, 1}));
  EXPECT_EQ(rankCounts(false, 8), (std::vector<int>{2, 4, 8, 3, 1}));
  // One rank per GPU: no more ranks than GPUs, and no R = 1 case (which has
  // nothing to compare across ranks) where more than one GPU is there.
  EXPECT_EQ(rankCounts(true, 0), (std::vector<int>{1}));
  EXPECT_EQ(rankCounts(true, 1), (std::vector<int>{1}));
  EXPECT_EQ(rankCounts(true, 2), (std::vector<int>{2}));
  EXPECT_EQ(rankCounts(true, 4), (std::vector<int>{2, 4, 3}));
  EXPECT_EQ(rankCounts(true, 8), (std::vector<int>{2, 4, 8, 3}));
}

}  // namespace
}  // namespace ulpcheck
