// The audit of the certified fast oracles (oracles/rmsnorm.cpp and
// oracles/layernorm.cpp, "The certified fast path") against the MPFR oracles
// they replace: the references
// must be bitwise the same on generated cases of every spec, when the double
// words decide nothing (forced fallbacks), and the accuracy verdicts must
// agree on outputs placed where a verdict is most fragile: within a hair of
// the budget on either side, and on both neighbours of a rounding tie.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <rapidcheck.h>

#include "core/case_spec.h"
#include "core/datagen.h"
#include "core/parallel.h"
#include "oracles/allreduce_rmsnorm.h"
#include "oracles/fused_add_rmsnorm.h"
#include "oracles/layernorm.h"
#include "oracles/oracle_mode.h"
#include "oracles/rmsnorm.h"
#include "properties/accuracy.h"
#include "properties/allreduce_rmsnorm_inputs.h"
#include "properties/generators.h"
#include "properties/layernorm_inputs.h"
#include "properties/rmsnorm_inputs.h"

namespace ulpcheck {
namespace {

struct Audited {
  CaseSpec c;
  RmsNormInputData in;
  RmsNormInputs inputs() const { return RmsNormInputs{in.x, in.w, in.dy, c.eps, c.spec, in.b ? &*in.b : nullptr}; }
};

/// `count` Smoke-tier cases of op's `kernel`: shapes, distributions and
/// specs as a campaign draws them.
std::vector<CaseSpec> smokeCases(const char* op, const char* kernel, uint64_t seed, int count) {
  gen::CaseOptions o;
  o.op = op;
  o.kernels = {kernel};
  o.tier = Tier::Smoke;
  rc::Random random(seed);
  std::vector<CaseSpec> cases;
  for (int k = 0; k < count; ++k) cases.push_back(gen::caseSpec(o)(random.split(), rc::kNominalSize).value());
  return cases;
}

/// Generated rmsnorm cases of host_separate (which declares every spec the oracle models).
std::vector<Audited> generatedCases(uint64_t seed, int count) {
  std::vector<Audited> cases;
  for (const CaseSpec& c : smokeCases("rmsnorm", "host_separate", seed, count))
    cases.push_back(Audited{c, generateRmsNormInputs(c, identityRows(c.M))});
  return cases;
}

AccuracyContract contractOf(const CaseSpec& c) { return AccuracyContract{DType::F32, ReductionDepths{c.N, c.M}}; }

std::vector<const ReferenceTensor*> tensors(const RmsNormReference& r) { return {&r.y, &r.rstd, &r.dx, &r.dw}; }

TEST(OracleAudit, FastPathIsBitwiseTheMpfrOracleOnGeneratedCases) {
  ThreadPool pool(2);
  FastOracleCounts counts;
  int64_t plain = 0, bias = 0, offset = 0, mixed = 0, llama = 0, llama_fast = 0, saved = 0, saved_fast = 0;
  for (const Audited& a : generatedCases(0xa0d17, 400)) {
    const int64_t fast_before = counts.fast.load();
    const RmsNormReference exact = rmsnormReferenceMpfr(a.inputs(), contractOf(a.c), pool);
    const RmsNormReference fast = rmsnormReferenceFast(a.inputs(), contractOf(a.c), pool, &counts);
    EXPECT_NO_THROW(auditReferences("rmsnorm", tensors(exact), tensors(fast))) << toCaseString(a.c);
    plain += a.c.spec.plain();
    bias += kRmsBias(a.c.spec);
    offset += kWeightOffset(a.c.spec) != 0.f;
    mixed += kWeightDtype(a.c.spec).has_value();
    const bool carried = counts.fast.load() > fast_before;
    if (kRounding(a.c.spec) == Rounding::Llama) ++llama, llama_fast += carried;
    if (statsInActivationDtype(a.c.spec) && a.c.dtype != DType::F32) ++saved, saved_fast += carried;
  }
  // The fast path carried the generated cases of every spec, Llama's
  // rounding points and stats=T's saved rstd (the backward's) included. A
  // stats=T row whose backward is exact arithmetic (rb a T value: tiny
  // rows, large means) may have a dx that is itself a double, which a
  // nonzero bound cannot decide: such rows go to MPFR (6 of 54 cases here).
  EXPECT_GT(plain, 50);
  EXPECT_GT(llama, 30);
  EXPECT_GT(llama_fast, llama * 9 / 10) << "of " << llama << " Llama cases";
  EXPECT_GT(saved, 20);
  EXPECT_GT(saved_fast, saved * 8 / 10) << "of " << saved << " stats=T cases";
  EXPECT_GT(bias, 30);
  EXPECT_GT(offset, 30);
  EXPECT_GT(mixed, 30);
  EXPECT_GT(counts.fast.load(), 1'000'000);
  EXPECT_EQ(counts.mpfr_only.load(), 0);
  std::printf("fast %lld, fell back %lld, MPFR only (specs the fast path does not model) %lld elements\n",
              (long long)counts.fast.load(), (long long)counts.fell_back.load(), (long long)counts.mpfr_only.load());
}

TEST(OracleAudit, ValuesExactBesideZerosAndTinyTermsAreDecidedInDoubleWords) {
  // Elements whose exact value is a double, or within far less than 2 u2 of
  // one, which a relative bound of the add could not decide: they sent
  // their rows to MPFR (the default tier's largest share of fallbacks).
  // A bias beside an exact zero x w (y = b, exact in MPFR too) or beside a
  // subnormal x w (y = b + tiny: the add's own error, dw::plus's `dropped`,
  // is far below it); stats=T zero rows (t = x rb c an exact zero, dx = a
  // rb one exact product); LayerNorm's y = beta + a tiny x-hat gamma. Every
  // row is now decided in the words, every value still MPFR's.
  ThreadPool pool(2);
  for (const char* text : {"op=rmsnorm kernel=host_separate dtype=fp32 M=16 N=96 dist=subnormal bias=yes",
                           "op=rmsnorm kernel=host_separate dtype=bf16 M=16 N=96 dist=zero_rows bias=yes",
                           "op=rmsnorm kernel=host_separate dtype=bf16 M=16 N=96 stats=bf16",
                           "op=rmsnorm kernel=host_separate dtype=fp16 M=16 N=96 stats=fp16"}) {
    const CaseSpec c = parseCaseString(text);
    Audited a{c, generateRmsNormInputs(c, identityRows(c.M))};
    if (statsInActivationDtype(c.spec))  // every row zero, dy random
      for (int64_t e = 0; e < c.M * c.ld; ++e) a.in.x.bits.set(size_t(e), 0);
    FastOracleCounts counts;
    const RmsNormReference exact = rmsnormReferenceMpfr(a.inputs(), contractOf(c), pool);
    const RmsNormReference fast = rmsnormReferenceFast(a.inputs(), contractOf(c), pool, &counts);
    EXPECT_NO_THROW(auditReferences("rmsnorm", tensors(exact), tensors(fast))) << text;
    EXPECT_EQ(counts.fell_back.load(), 0) << text;
  }
  const CaseSpec c = parseCaseString("op=layernorm kernel=host_twopass dtype=bf16 M=16 N=96 dist=subnormal");
  const LayerNormInputData in = generateLayerNormInputs(c, identityRows(c.M));
  const LayerNormInputs inputs{in.x, in.gamma, in.beta, in.dy, c.eps, c.spec};
  const AccuracyContract contract{DType::F32, ReductionDepths{c.N, c.M}};
  FastOracleCounts counts;
  const LayerNormReference exact = layernormReferenceMpfr(inputs, contract, pool);
  const LayerNormReference fast = layernormReferenceFast(inputs, contract, pool, &counts);
  EXPECT_NO_THROW(auditReferences("layernorm", layernormTensors(exact), layernormTensors(fast)));
  EXPECT_EQ(counts.fell_back.load(), 0);
}

TEST(OracleAudit, StatsInTExactArithmeticIsDecidedByColumnAndElementNotWholeRowsAndColumns) {
  // Under stats=T the backward's rstd rb is a T value: with 16-bit inputs
  // the backward is often exact arithmetic, and an exact double no nonzero
  // bound decides.
  // - dW: each term rb (dy x) is an exact double (at most 33 bits) and a
  //   column's sum is often a double itself. Every such column went to
  //   MPFR, M products and adds each (all 4445 columns of a default-tier
  //   bf16 case of 58 x 4445); they are now summed exactly in double words
  //   (mp::decideExactLeafColumn). fp32 inputs' terms (56 bits) are not
  //   doubles and still take the words' bound.
  // - dx: at N a power of two, c = P rb / N is a double of ~45 bits and
  //   some dx are exactly doubles: their rows went to MPFR whole (5 of the
  //   58 rows below); now the element alone is (MpfrDxElements).
  // Either way the references stay bitwise MPFR's.
  ThreadPool pool(2);
  struct Expect {
    const char* text;
    bool none_back;  // nothing left to MPFR at all
  };
  for (const Expect& e : {Expect{"op=rmsnorm kernel=host_separate dtype=bf16 M=58 N=500 stats=bf16", false},
                          Expect{"op=rmsnorm kernel=host_separate dtype=fp16 M=64 N=300 stats=fp16", true},
                          Expect{"op=rmsnorm kernel=host_separate dtype=bf16 M=58 N=512 stats=bf16", false},
                          Expect{"op=rmsnorm kernel=host_separate dtype=fp16 M=16 N=1024 stats=fp16", false}}) {
    const CaseSpec c = parseCaseString(e.text);
    const Audited a{c, generateRmsNormInputs(c, identityRows(c.M))};
    FastOracleCounts counts;
    const RmsNormReference exact = rmsnormReferenceMpfr(a.inputs(), contractOf(c), pool);
    const RmsNormReference fast = rmsnormReferenceFast(a.inputs(), contractOf(c), pool, &counts);
    EXPECT_NO_THROW(auditReferences("rmsnorm", tensors(exact), tensors(fast))) << e.text;
    EXPECT_EQ(counts.mpfr_rows.load(), 0) << e.text;
    if (e.none_back) EXPECT_EQ(counts.fell_back.load(), 0) << e.text;
    else EXPECT_LT(counts.fell_back.load(), c.M * c.N / 10) << e.text;  // dx elements alone
  }
}

TEST(OracleAudit, ForcedFallbacksGiveBitwiseTheSameReferences) {
  // Intervals widened until the double words decide about half, then none,
  // of the values: every mix of fast rows, MPFR rows and MPFR columns.
  ThreadPool pool(2);
  int64_t fell_back = 0, fast = 0, cases_mixed = 0;
  for (const Audited& a : generatedCases(0xfa11, 60)) {
    const RmsNormReference exact = rmsnormReferenceMpfr(a.inputs(), contractOf(a.c), pool);
    for (double widen : {0x1p46, 0x1p49, 0x1p52, 0x1p80}) {
      FastOracleCounts counts;
      const RmsNormReference forced = rmsnormReferenceFast(a.inputs(), contractOf(a.c), pool, &counts, widen);
      EXPECT_NO_THROW(auditReferences("rmsnorm", tensors(exact), tensors(forced)))
          << toCaseString(a.c) << " widened " << widen;
      fell_back += counts.fell_back.load();
      fast += counts.fast.load();
      cases_mixed += counts.fell_back.load() > 0 && counts.fast.load() > 0;
    }
  }
  EXPECT_GT(fell_back, 100'000);
  EXPECT_GT(fast, 10'000);
  EXPECT_GT(cases_mixed, 10);  // rows of both kinds, and columns, in one reference
}

/// Outputs of the reference's dtype placed at the fragile points of element
/// e's verdict: the dtype's values nearest exact + budget and exact - budget
/// (one inside, one outside, where the format has them), and both
/// neighbours of the exact value (a tie when it sits on a midpoint).
std::vector<double> fragileOutputs(const ReferenceTensor& r, size_t e) {
  const double x = r.exact[e], b = r.budget[e], unit = ulpOf(r.dtype, x);
  std::vector<double> out;
  for (double edge : {x + b, x - b})
    for (double step : {-1.0, 0.0, 1.0}) out.push_back(roundToFormat(r.dtype, edge + step * unit));
  out.push_back(roundToFormat(r.dtype, x - 0.5 * unit));
  out.push_back(roundToFormat(r.dtype, x + 0.5 * unit));
  return out;
}

/// Judges outputs at every fragile point of `exact_refs` (element e of each
/// tensor takes point (e + variant) mod points, so every point is met across
/// the elements) against both references: verdicts, wrong counts and worst
/// ratios must agree. Returns how many of the 8 variants failed.
int expectSameVerdictsAtFragilePoints(const std::vector<ReferenceTensor>& exact_refs,
                                      const std::vector<ReferenceTensor>& fast_refs, const std::string& what) {
  int failing = 0;
  for (int variant = 0; variant < 8; ++variant) {
    RunResult run;
    for (const ReferenceTensor& r : exact_refs) {
      OutputTensor o{r.name, r.dtype, r.rows, r.cols, r.cols, r.per_row, {}};
      for (size_t e = 0; e < r.exact.size(); ++e) {
        const std::vector<double> points = fragileOutputs(r, e);
        o.bits.push_back(doubleToBits(r.dtype, points[(e + size_t(variant)) % points.size()]));
      }
      run.outputs.push_back(std::move(o));
    }
    const DescribeInputs none = [](const std::string&, int64_t, int64_t) { return std::string(); };
    const Outcome with_mpfr = judgeAccuracy(run, exact_refs, none), with_fast = judgeAccuracy(run, fast_refs, none);
    EXPECT_EQ(with_mpfr.verdict, with_fast.verdict) << what << " variant " << variant;
    EXPECT_EQ(with_mpfr.stats.size(), with_fast.stats.size()) << what;
    for (size_t t = 0; t < std::min(with_mpfr.stats.size(), with_fast.stats.size()); ++t) {
      EXPECT_EQ(with_mpfr.stats[t].wrong, with_fast.stats[t].wrong) << what << " " << with_mpfr.stats[t].tensor;
      EXPECT_EQ(with_mpfr.stats[t].max_ratio, with_fast.stats[t].max_ratio) << what;
    }
    failing += with_mpfr.verdict == Verdict::Fail;
  }
  return failing;
}

TEST(OracleAudit, VerdictsAgreeAtTheBudgetEdgeAndAtRoundingTies) {
  ThreadPool pool(2);
  int64_t judged = 0, failing = 0;
  for (const Audited& a : generatedCases(0x71e5, 40)) {
    const RmsNormReference exact = rmsnormReferenceMpfr(a.inputs(), contractOf(a.c), pool);
    const RmsNormReference fast = rmsnormReferenceFast(a.inputs(), contractOf(a.c), pool);
    failing += expectSameVerdictsAtFragilePoints({exact.y, exact.rstd, exact.dx, exact.dw},
                                                 {fast.y, fast.rstd, fast.dx, fast.dw}, toCaseString(a.c));
    judged += 8;
  }
  // The injected outputs decide both ways: a point just outside the budget
  // fails the case, and a variant can pass where every point is inside
  // (the exact value's own neighbours).
  EXPECT_GT(judged, 100);
  EXPECT_GT(failing, 10);
}

// ---------------------------------------------------------------------------
// LayerNorm

struct AuditedLayerNorm {
  CaseSpec c;
  LayerNormInputData in;
  AccuracyContract contract;
  LayerNormInputs inputs() const { return LayerNormInputs{in.x, in.gamma, in.beta, in.dy, c.eps, c.spec}; }
};

/// Generated layernorm cases of host_twopass (every spec the oracle models:
/// fp32 gamma and beta, stats=T), each under one of the contracts whose
/// budgets the fast path must reproduce: depth bounds alone (a black box's
/// running means), ulpcheck's own kernels' (a rounded-quotient mean,
/// two-pass statistics, fixed column orders), a flushing column reduction,
/// two-pass statistics alone.
std::vector<AuditedLayerNorm> generatedLayerNormCases(uint64_t seed, int count) {
  std::vector<AuditedLayerNorm> cases;
  const std::vector<CaseSpec> specs = smokeCases("layernorm", "host_twopass", seed, count);
  for (int k = 0; k < count; ++k) {
    const CaseSpec& c = specs[size_t(k)];
    AccuracyContract contract{DType::F32, ReductionDepths{c.N, c.M}};
    switch (k % 4) {
      case 1:
        contract.depths.mean_is_rounded_quotient = contract.depths.two_pass_statistics = true;
        contract.depths.col_orders = {ColumnOrder{std::min<int64_t>(c.M, 3), 2}, ColumnOrder{1, 1}};
        break;
      case 2: contract.column_reduction_ftz = true; break;
      case 3: contract.depths.two_pass_statistics = true; break;
    }
    cases.push_back(AuditedLayerNorm{c, generateLayerNormInputs(c, identityRows(c.M)), contract});
  }
  return cases;
}

TEST(OracleAudit, LayerNormFastPathIsBitwiseTheMpfrOracle) {
  // Generated cases (every distribution: large means, constant and zero
  // rows, subnormals), then the same cases with every interval widened until
  // the double words decide about half, then none, of the values: rows of
  // both kinds and dgamma columns summed by MPFR in one reference.
  ThreadPool pool(2);
  FastOracleCounts counts, forced;
  int64_t saved = 0, saved_fast = 0, cases_mixed = 0;
  const std::vector<AuditedLayerNorm> cases = generatedLayerNormCases(0x1a7d, 300);
  for (size_t k = 0; k < cases.size(); ++k) {
    const AuditedLayerNorm& a = cases[k];
    const int64_t fast_before = counts.fast.load();
    const LayerNormReference exact = layernormReferenceMpfr(a.inputs(), a.contract, pool);
    const LayerNormReference fast = layernormReferenceFast(a.inputs(), a.contract, pool, &counts);
    EXPECT_NO_THROW(auditReferences("layernorm", layernormTensors(exact), layernormTensors(fast))) << toCaseString(a.c);
    // stats=T: the backward at the saved round_T(mean) and round_T(rstd), with their spreads.
    if (statsDtype(a.c.dtype, a.c.spec) != DType::F32) ++saved, saved_fast += counts.fast.load() > fast_before;
    if (k % 5 != 0) continue;
    for (double widen : {0x1p46, 0x1p49, 0x1p52, 0x1p80}) {
      FastOracleCounts one;
      const LayerNormReference wide = layernormReferenceFast(a.inputs(), a.contract, pool, &one, widen);
      EXPECT_NO_THROW(auditReferences("layernorm", layernormTensors(exact), layernormTensors(wide)))
          << toCaseString(a.c) << " widened " << widen;
      forced.fast += one.fast.load();
      forced.fell_back += one.fell_back.load();
      cases_mixed += one.fell_back.load() > 0 && one.fast.load() > 0;
    }
  }
  EXPECT_GT(saved, 20);
  EXPECT_GT(saved_fast, saved * 8 / 10) << "of " << saved << " stats=T cases";
  EXPECT_GT(counts.fast.load(), 1'000'000);
  EXPECT_GT(counts.fell_back.load(), 0) << "no row or column fell back: the fallback is untested";
  EXPECT_EQ(counts.mpfr_only.load(), 0) << "every spec is in the fast path";
  EXPECT_GT(forced.fell_back.load(), 100'000);
  EXPECT_GT(forced.fast.load(), 10'000);
  EXPECT_GT(cases_mixed, 10);
  std::printf("fast %lld, fell back %lld, MPFR only %lld elements; forced: fast %lld, fell back %lld\n",
              (long long)counts.fast.load(), (long long)counts.fell_back.load(), (long long)counts.mpfr_only.load(),
              (long long)forced.fast.load(), (long long)forced.fell_back.load());
}

TEST(OracleAudit, LayerNormVerdictsAgreeAtTheBudgetEdgeAndAtRoundingTies) {
  ThreadPool pool(2);
  int64_t judged = 0, failing = 0;
  for (const AuditedLayerNorm& a : generatedLayerNormCases(0x71e6, 60)) {
    const LayerNormReference exact = layernormReferenceMpfr(a.inputs(), a.contract, pool);
    const LayerNormReference fast = layernormReferenceFast(a.inputs(), a.contract, pool);
    failing += expectSameVerdictsAtFragilePoints({exact.y, exact.mean, exact.rstd, exact.dx, exact.dgamma, exact.dbeta},
                                                 {fast.y, fast.mean, fast.rstd, fast.dx, fast.dgamma, fast.dbeta},
                                                 toCaseString(a.c));
    judged += 8;
  }
  EXPECT_GT(judged, 200);
  EXPECT_GT(failing, 10);
}

TEST(OracleAudit, AllreduceResidualSumsAreBitwiseTheMpfrOnes) {
  // Generated allreduce_rmsnorm cases of every distribution (zero rows and
  // signed zeros send their zero sums to MPFR), ranks 1 to 8, res=fp32 too,
  // each also with the norm reading the fp32 sum (fused_add_rmsnorm's
  // sum=fp32), and the 16-bit ones with the partials summed in T (acc=T):
  // the fast path's residual_out and y equal the MPFR path's, and
  // the audit mode (both, compared element by element) raises nothing.
  ThreadPool pool(2);
  const int64_t fast_before = oracleCounts().fast.load(), back_before = oracleCounts().fell_back.load();
  int64_t multi_rank = 0, in_t_multi_rank = 0;
  for (const CaseSpec& c : smokeCases("allreduce_rmsnorm", "host_unfused", 0xa11d, 150)) {
    const AllreduceRmsNormInputData d = generateAllreduceRmsNormInputs(c, identityRows(c.M));
    const AccuracyContract contract{DType::F32, ReductionDepths{c.N, c.M}};
    for (bool fp32_sum : {false, true}) {
      const AllreduceRmsNormInputs in{d.x, d.residual, d.w, c.eps, c.spec, fp32_sum};
      AllreduceRmsNormReference exact, fast;
      exact = allreduceRmsNormReference(in, contract, pool, OracleMode::Mpfr);
      fast = allreduceRmsNormReference(in, contract, pool, OracleMode::Fast);
      EXPECT_NO_THROW(
          auditReferences("allreduce_rmsnorm", {&exact.residual_out, &exact.y}, {&fast.residual_out, &fast.y}))
          << toCaseString(c) << (fp32_sum ? " (the norm of the fp32 sum)" : "");
      EXPECT_NO_THROW(allreduceRmsNormReference(in, contract, pool, OracleMode::Audit)) << toCaseString(c);
    }
    // The partials added in T one rank at a time (acc=T, 16-bit cases).
    if (c.dtype != DType::F32) {
      const AllreduceRmsNormInputs in{
          .x = d.x, .residual = d.residual, .w = d.w, .eps = c.eps, .spec = c.spec, .sum_in_activation_dtype = true};
      const AllreduceRmsNormReference exact = allreduceRmsNormReference(in, contract, pool, OracleMode::Mpfr);
      const AllreduceRmsNormReference fast = allreduceRmsNormReference(in, contract, pool, OracleMode::Fast);
      EXPECT_NO_THROW(
          auditReferences("allreduce_rmsnorm", {&exact.residual_out, &exact.y}, {&fast.residual_out, &fast.y}))
          << toCaseString(c) << " (acc=T)";
      EXPECT_NO_THROW(allreduceRmsNormReference(in, contract, pool, OracleMode::Audit)) << toCaseString(c);
      in_t_multi_rank += c.ranks > 2;
    }
    multi_rank += c.ranks > 1;
  }
  EXPECT_GT(multi_rank, 50);
  EXPECT_GT(in_t_multi_rank, 20);
  EXPECT_GT(oracleCounts().fast.load() - fast_before, 100'000);
  EXPECT_GT(oracleCounts().fell_back.load() - back_before, 0) << "zero sums go to MPFR";
}

TEST(OracleAudit, OneRanksZeroPartialIsItsOwnSumNotMpfrs) {
  // At one rank (fused_add_rmsnorm's) the rank sum is x itself: a zero x is
  // its own sum, its sign included, as the MPFR path's sum starts from x_0.
  // Every zero x went to MPFR (half of the 2.2 M elements a 150-case host
  // campaign of fused_add_rmsnorm recomputed). Signed zeros beside a -0
  // residual (-0 + -0 = -0, +0 + -0 = +0): bitwise MPFR's, none by MPFR.
  ThreadPool pool(2);
  const CaseSpec c = parseCaseString("op=allreduce_rmsnorm kernel=host_unfused dtype=bf16 M=8 N=64 ranks=1");
  AllreduceRmsNormInputData d = generateAllreduceRmsNormInputs(c, identityRows(c.M));
  for (int64_t e = 0; e < c.M * c.ld; e += 3) {
    d.x[0].bits.set(size_t(e), e % 2 ? 0x8000u : 0u);  // bf16 -0, +0
    if (e % 4 == 0) d.residual.bits.set(size_t(e), 0x8000u);
  }
  const AccuracyContract contract{DType::F32, ReductionDepths{c.N, c.M}};
  for (bool fp32_sum : {false, true}) {
    const AllreduceRmsNormInputs in{d.x, d.residual, d.w, c.eps, c.spec, fp32_sum};
    const AllreduceRmsNormReference exact = allreduceRmsNormReference(in, contract, pool, OracleMode::Mpfr);
    const int64_t back_before = oracleCounts().fell_back.load();
    const AllreduceRmsNormReference fast = allreduceRmsNormReference(in, contract, pool, OracleMode::Fast);
    EXPECT_EQ(oracleCounts().fell_back.load() - back_before, 0) << (fp32_sum ? "sum=fp32" : "");
    EXPECT_NO_THROW(
        auditReferences("allreduce_rmsnorm", {&exact.residual_out, &exact.y}, {&fast.residual_out, &fast.y}));
    EXPECT_NO_THROW(allreduceRmsNormReference(in, contract, pool, OracleMode::Audit));
  }
}

TEST(OracleAudit, FusedAddBackwardFastPathIsBitwiseTheMpfrOracle) {
  // fused_add_rmsnorm's backward (rmsnorm's oracle at residual_out, the
  // gradient reaching it added to dx, dresidual in the residual's dtype), in
  // both orders (sum=fp32 under res=T: quack's rstd of the fp32 sum beside
  // the rounded residual_out) and under res=fp32: the certified fast path
  // gives the MPFR path's references bit for bit.
  ThreadPool pool(2);
  int64_t cases = 0;
  for (const CaseSpec& base : smokeCases("allreduce_rmsnorm", "host_unfused", 0xfadd, 60)) {
    for (bool fp32_sum : {false, true}) {
      CaseSpec c = base;
      c.ranks = 1;
      const AllreduceRmsNormInputData d = generateAllreduceRmsNormInputs(c, identityRows(c.M));
      const DType rt = d.residual.dtype;
      const HostMatrix dy = generateHost(rmsNormGradDist(c), c.dtype, c.seed, TensorStream::GradOut, identityRows(c.M),
                                         c.N, c.ld, poisonBits(c.dtype));
      const HostMatrix dres = generateHost(rmsNormGradDist(c), rt, c.seed, TensorStream::ResidualGrad,
                                           identityRows(c.M), c.N, c.ld, poisonBits(rt));
      const FusedAddRmsNormInputs in{d.x.front(), d.residual, d.w, c.eps, c.spec, fp32_sum};
      const AccuracyContract contract{DType::F32, ReductionDepths{c.N, c.M}};
      const AllreduceRmsNormReference forward = fusedAddRmsNormReference(in, contract, pool, OracleMode::Fast);
      const FusedAddRmsNormBackwardReference exact = fusedAddRmsNormBackwardReference(in, dy, dres, forward, contract,
                                                                                      pool, OracleMode::Mpfr);
      const FusedAddRmsNormBackwardReference fast = fusedAddRmsNormBackwardReference(in, dy, dres, forward, contract,
                                                                                     pool, OracleMode::Fast);
      EXPECT_NO_THROW(auditReferences("fused_add_rmsnorm", {&exact.dx, &exact.dresidual, &exact.dw},
                                      {&fast.dx, &fast.dresidual, &fast.dw}))
          << toCaseString(c) << (fp32_sum ? " sum=fp32" : "");
      EXPECT_EQ(exact.dresidual.dtype, rt);
      ++cases;
    }
  }
  EXPECT_EQ(cases, 120);
}

}  // namespace
}  // namespace ulpcheck
