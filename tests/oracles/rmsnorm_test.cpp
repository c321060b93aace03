// Self-checks of the RMSNorm MPFR oracle (oracles/rmsnorm.cpp). Every check
// compares it with something computed another way, so a wrong formula, a lost
// bit in the round-to-odd conversion or a thread-dependent sum shows up here
// before it silently passes or fails kernels:
//   OracleCrossCheck        an independent Boost.Multiprecision RMSNorm
//   OracleFiniteDifference  dx, dw (db) against central differences of the loss
//   OracleThreads           bitwise the same result on 1, 3 and 4 threads
//   OracleRoundToOdd        round-to-odd then roundToFormat == direct rounding
//   OracleBudget            budgets finite, positive and not absurdly loose
// Each runs over the spec variants of core/norm_spec.h too (weight
// dtype, Gemma's offset, Llama's rounding point), with the spec's formulas
// written here from its definition, not from the oracle's code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/buffer.h"
#include "core/case_spec.h"
#include "core/datagen.h"
#include "core/parallel.h"
#include "oracles/allreduce_rmsnorm.h"
#include "oracles/mpfr_util.h"
#include "oracles/rmsnorm.h"
#include "oracles/tolerances.h"
#include "properties/allreduce_rmsnorm_inputs.h"
#include "properties/generators.h"
#include "properties/rmsnorm_inputs.h"
#include "tests/support/oracle_test_support.h"

namespace ulpcheck {
namespace {

using namespace oracle_check;

// Budget sanity: with fp32 accumulation and D_row <= 64, the relative part of
// the y budget is K u (delta_r + 2) <= 2 * 2^-24 * 39.5 ~ 2^-17.7; a y budget
// above 2^-10 |y| (plus one ulp and the underflow term) means the budget lost
// its scaling and would pass kernels that are wrong in the 10th bit.
constexpr double kBudgetLooseRelative = 0x1p-10;

using Inputs = RmsNormInputData;

/// The inputs of a case exactly as the rmsnorm op generates them (padding
/// columns poisoned with NaN, so an oracle that read them would show it).
Inputs makeInputs(const CaseSpec& c) { return generateRmsNormInputs(c, identityRows(c.M)); }

RmsNormReference oracleOf(const CaseSpec& c, const Inputs& in, ThreadPool& pool) {
  const AccuracyContract contract{DType::F32, ReductionDepths{c.N, c.M}};
  return rmsnormReference(RmsNormInputs{in.x, in.w, in.dy, c.eps, c.spec, in.b ? &*in.b : nullptr}, contract, pool,
                          OracleMode::Fast);
}

/// The plain spec only: weights in the activation dtype, no offset, one rounding.
std::vector<Spec> plainSpec(DType) { return {Spec{}}; }

/// Every spec an rmsnorm case with activations t may take: weight dtype
/// {same, fp32 (beside 16-bit activations only: for fp32 it is the same)} x
/// rounding {plain, llama} x offset {0, 1 (Gemma)}, and the plain rounding's
/// with rstd saved in T (stats=T, 16-bit only) and with a bias (quack's).
std::vector<Spec> everySpec(DType t) {
  std::vector<std::optional<DType>> weights{std::nullopt};
  if (t != DType::F32) weights.push_back(DType::F32);
  std::vector<Spec> specs;
  for (const std::optional<DType>& w : weights)
    for (float offset : {0.f, 1.f}) {
      for (Rounding rounding : {Rounding::Plain, Rounding::Llama})
        specs.push_back(withSpec(kWeightDtype, w, kRounding, rounding, kWeightOffset, offset));
      if (t != DType::F32)
        specs.push_back(withSpec(kWeightDtype, w, kWeightOffset, offset, kSavedStats, SavedStats::Activation));
      specs.push_back(withSpec(kWeightDtype, w, kWeightOffset, offset, kRmsBias, true));
    }
  return specs;
}

/// everySpec but stats=T: a backward taken at the saved round_T(rstd) is not
/// the derivative of the forward's loss, so central differences cannot check it
/// (OracleCrossCheck does, with Boost at round_T(r)).
std::vector<Spec> everyDerivativeSpec(DType t) {
  std::vector<Spec> specs = everySpec(t);
  std::erase_if(specs, [](const Spec& s) { return statsInActivationDtype(s); });
  return specs;
}

/// A Smoke-tier rmsnorm case from the project's generator, forced to dtype t
/// and to an x distribution of kind `kind` (drawn from the generator's own
/// distribution() so sigma/mean stay in the generated, valid ranges).
CaseSpec drawCase(rc::Random& random, DType t, Dist kind) {
  gen::CaseOptions o;
  o.op = "rmsnorm";
  o.kernels = {"host_separate"};
  o.dtypes = {t};
  o.tier = Tier::Smoke;
  CaseSpec c = gen::caseSpec(o)(random.split(), rc::kNominalSize).value();
  // Redraw until the kind matches (rc::gen::suchThat gives up after ~100 tries,
  // which the rarest kinds, weight 1/13, could need).
  for (int tries = 0; tries < 100000; ++tries) {
    const DistParams d = gen::distribution()(random.split(), rc::kNominalSize).value();
    if (d.kind == kind) {
      c.x = d;
      return c;
    }
  }
  throw std::runtime_error(std::string("gen::distribution() never drew ") + distName(kind));
}

/// `per_combination` cases for every dtype x every distribution x every spec
/// of `specs(dtype)` (the generator draws a spec too; it is overwritten, so
/// the spec coverage is explicit): the coverage is guaranteed rather than
/// left to chance. A fixed seed keeps the suite reproducible; `shape` may
/// shrink the shape (keeping the padding).
template <typename Shape>
std::vector<CaseSpec> coverageCases(uint64_t seed, int per_combination, Shape shape,
                                    std::vector<Spec> (*specs)(DType) = plainSpec) {
  rc::Random random(seed);
  std::vector<CaseSpec> cases;
  for (DType t : kAllDTypes)
    for (int d = 0; d < static_cast<int>(Dist::kCount); ++d)
      for (const Spec& spec : specs(t))
        for (int k = 0; k < per_combination; ++k) {
          CaseSpec c = drawCase(random, t, static_cast<Dist>(d));
          c.spec = spec;
          shape(c);
          validateCase(c);  // throws (failing the test) if the forced combination is not a valid case
          cases.push_back(c);
        }
  return cases;
}

// ---------------------------------------------------------------------------
// OracleCrossCheck

/// What the spec variants of the cross-check reached, beside the Agreement.
struct SpecCoverage {
  int64_t llama_y = 0;           // Llama y elements compared exactly (round_T(x r) decided)
  int64_t undecided_q = 0;       // Llama elements whose round_T(x r) Boost could not decide (skipped)
  int64_t skipped_dw = 0;        // Llama dw columns left out for such an element
  int64_t offset_elements = 0;   // y elements of cases with an offset
  int64_t fp32_weights = 0;      // fp32 weights beside 16-bit x that the activation dtype cannot hold
  int64_t llama_rounded = 0;     // Llama elements where round_T(x r) != x r (the rounding did something)
  int64_t llama_dw_exact = 0;    // Llama dw columns whose Boost sum is exact (compared exactly)
  int64_t saved_rstd_rows = 0;   // stats=T rows whose backward Boost took at round_T(r) (decided)
  int64_t undecided_rstd = 0;    // stats=T rows whose round_T(r) Boost could not decide (backward skipped)
  int64_t overflowing_rstd = 0;  // stats=T rows whose rstd overflows T (backward skipped)
  int64_t bias_y = 0;            // y elements of cases with a bias
  int64_t bias_cancelled = 0;    // ... where |y| < |b| / 4 (x-hat v and b cancel)
};

/// RMSNorm forward and backward of the case's spec written the textbook way
/// in Boost (plain left-to-right sums, 1/sqrt, the r^3 form of dx), from the
/// spec's definition (core/norm_spec.h), independent of the oracle's
/// mpfr_sum / rec_sqrt / r (a - xhat c) formulation. With v = offset + w (the
/// weight decoded here from its storage bits in the spec's weight dtype):
///   plain  y = x r v                  dw_j = sum_i dy_ij x_ij r_i
///   llama  y = round_T(x r) v         dw_j = sum_i round_T(dy_ij round_T(x_ij r_i)) (16 bits)
///   both   dx = r v dy - r^3 x (1/N) sum_j v_j dy_j x_j
///   stats=T: rstd's tensor in T; dx and dw as above with r replaced by the
///          saved rb = round_T(r), the backward rebuilding x-hat = x rb
///   bias:  y = x r v + b (b in the weight dtype), db_j = sum_i dy_ij
/// Returns failures.
std::vector<std::string> crossCheck(const CaseSpec& c, const Inputs& in, const RmsNormReference& ref,
                                    Agreement& agreement, SpecCoverage& coverage) {
  const int64_t M = c.M, N = c.N;
  const DType T = c.dtype, W = weightDtype(c.dtype, c.spec);
  const bool llama = kRounding(c.spec) == Rounding::Llama;
  const bool stats_in_T = statsInActivationDtype(c.spec) && T != DType::F32;
  const Big offset = Big(double(kWeightOffset(c.spec)));
  // Llama in 16 bits: dw's terms dy q, products of two T values, are T values.
  const bool terms_in_T = llama && T != DType::F32;
  std::vector<std::string> failures;
  auto note = [&](std::string s) {
    if (!s.empty() && failures.size() < 5) failures.push_back(std::move(s));
  };
  // The tensors' dtypes: y and dx in the activation dtype, dw in the weight dtype.
  if (in.w.dtype != W || ref.dw.dtype != W || ref.y.dtype != T || ref.dx.dtype != T)
    note(fmt::format("dtypes: w {} dw {} y {} dx {}, spec wants w/dw {} and y/dx {}", dtypeName(in.w.dtype),
                     dtypeName(ref.dw.dtype), dtypeName(ref.y.dtype), dtypeName(ref.dx.dtype), dtypeName(W),
                     dtypeName(T)));
  if (kRmsBias(c.spec) != !ref.db.exact.empty() || (kRmsBias(c.spec) && ref.db.dtype != W))
    note(fmt::format("db: {} elements of {}, the spec {} a bias in {}", ref.db.exact.size(), dtypeName(ref.db.dtype),
                     kRmsBias(c.spec) ? "has" : "has no", dtypeName(W)));
  if (ref.rstd.dtype != statsDtype(c.dtype, c.spec))
    note(fmt::format("rstd's tensor is {}, the spec saves it in {}", dtypeName(ref.rstd.dtype),
                     dtypeName(statsDtype(c.dtype, c.spec))));
  // v = offset + w, exact at 256 bits (|offset| <= 16, w's last bit >= 2^-149).
  std::vector<Big> v(N);
  std::vector<double> v_abs(N);
  for (int64_t j = 0; j < N; ++j) {
    const double w = decodeBits(W, in.w.bits[size_t(j)]);
    v[j] = offset + Big(w);
    v_abs[j] = bmp::abs(v[j]).convert_to<double>();
    if (W != T && roundToFormat(T, w) != w) ++coverage.fp32_weights;
  }
  std::vector<Big> dw(N, Big(0));
  std::vector<double> dw_scale(N, 0.0);
  std::vector<bool> dw_undecided(N, false);
  // Llama's dw terms dy q are exact (24 + 24 bits), multiples of
  // 2^(ilogb dy + ilogb q - 104) (each factor a multiple of its double ulp);
  // the smallest such exponent of a column bounds where its sum's bits end.
  std::vector<int> dw_low(N, INT_MAX);
  for (int64_t i = 0; i < M; ++i) {
    Big sum_sq = 0, sum_vdyx = 0;
    double sum_abs = 0;
    for (int64_t j = 0; j < N; ++j) {
      const Big x = in.x.value(i, j), dy = in.dy.value(i, j);
      sum_sq += x * x;
      sum_vdyx += v[j] * dy * x;
      sum_abs += v_abs[j] * std::fabs(in.dy.value(i, j) * in.x.value(i, j));
    }
    const Big r_exact = 1 / bmp::sqrt(sum_sq / N + Big(double(c.eps)));
    note(agreement.check("rstd", i, ref.rstd.exact[i], r_exact, r_exact.convert_to<double>()));
    // The rstd the backward takes: the exact one, or the saved round_T(r).
    Big r = r_exact;
    if (stats_in_T) {
      const std::optional<double> rb = roundToFormatOf(T, r_exact, r_exact * Big(kHighPrecisionSlack));
      if (!rb) {
        ++coverage.undecided_rstd;
        std::fill(dw_undecided.begin(), dw_undecided.end(), true);
        continue;
      }
      if (std::isinf(*rb)) {
        // rstd beyond fp16's range (a zero row with a tiny eps): the saved inf
        // makes the backward NaN, in the oracle as in a kernel.
        ++coverage.overflowing_rstd;
        std::fill(dw_undecided.begin(), dw_undecided.end(), true);
        continue;
      }
      ++coverage.saved_rstd_rows;
      r = Big(*rb);
    }
    const Big c_row = r * sum_vdyx / N;  // c = (1/N) sum_j v_j dy_j xhat_j
    const Big r3_mean = r * r * c_row;   // r^3 (1/N) sum_j v_j dy_j x_j
    const double rd = r.convert_to<double>(), cd = bmp::abs(c_row).convert_to<double>();
    for (int64_t j = 0; j < N; ++j) {
      const double xv = in.x.value(i, j), dyv = in.dy.value(i, j);
      const Big x = xv, dy = dyv;
      const int64_t e = i * N + j;
      const double xhat = xv * rd;
      coverage.offset_elements += kWeightOffset(c.spec) != 0.f;
      if (llama) {
        // x r is within kHighPrecisionSlack |x r| of Boost's value (r carries
        // a few 2^-256 roundings and an N-term sum, N < 2^13).
        const Big xr = x * r_exact;
        const std::optional<double> q = roundToFormatOf(T, xr, bmp::abs(xr) * Big(kHighPrecisionSlack));
        if (!q) {
          ++coverage.undecided_q;
          dw_undecided[j] = true;
        } else {
          // q v is exact at 256 bits (24 + 154 bits): its round-to-odd double
          // is known exactly, and the oracle must equal it bit for bit.
          ++coverage.llama_y;
          coverage.llama_rounded += Big(*q) != xr;
          note(agreement.checkExact("y", e, ref.y.exact[e], roundToOddExact(Big(*q) * v[j])));
          const double term = terms_in_T ? roundToFormat(T, dyv * *q) : dyv * *q;  // dy q: exact in double
          dw[j] += Big(term);
          dw_scale[j] += std::fabs(term);
          if (dyv != 0.0 && *q != 0.0) dw_low[j] = std::min(dw_low[j], std::ilogb(dyv) + std::ilogb(*q) - 104);
        }
      } else {
        const double b = in.b ? in.b->value(0, j) : 0.0;  // decoded from its bits in the weight dtype
        const Big scaled = x * r_exact * v[j], y = scaled + Big(b);
        if (in.b) {
          ++coverage.bias_y;
          coverage.bias_cancelled += bmp::abs(y) < Big(std::fabs(b) / 4);
        }
        note(agreement.check("y", e, ref.y.exact[e], y, (bmp::abs(scaled) + Big(std::fabs(b))).convert_to<double>()));
        dw[j] += dy * x * r;
        dw_scale[j] += std::fabs(dyv * xhat);
      }
      const Big dx = r * v[j] * dy - r3_mean * x;
      // dx cancels: the scale is its terms, r (|v dy| + |xhat| (|c| + m)) with
      // c = r/N sum v dy x and m = r/N sum |v dy x| (a bound on c's error).
      const double scale_dx = rd * (v_abs[j] * std::fabs(dyv) + std::fabs(xhat) * (cd + rd * sum_abs / double(N))) +
                              DBL_MIN;
      note(agreement.check("dx", e, ref.dx.exact[e], dx, scale_dx));
    }
  }
  for (int64_t j = 0; j < N; ++j) {
    if (dw_undecided[j]) {
      ++coverage.skipped_dw;
      continue;
    }
    // Llama: every partial sum is a multiple of 2^dw_low below 2 dw_scale
    // (its rounding in double, 2^-53, is far inside the factor 2), so with
    // 2 dw_scale < 2^(dw_low + 256) the 256-bit sum is exact and so is its
    // round-to-odd double: compared bit for bit even where it is a double
    // (dy q of 16-bit values are short, and so are their sums).
    if (llama && (dw_scale[j] == 0.0 || std::ilogb(dw_scale[j]) + 1 < dw_low[j] + 256)) {
      ++coverage.llama_dw_exact;
      note(agreement.checkExact("dw", j, ref.dw.exact[j], roundToOddExact(dw[j])));
      continue;
    }
    note(agreement.check("dw", j, ref.dw.exact[j], dw[j], dw_scale[j]));
  }
  if (in.b)
    for (int64_t j = 0; j < N; ++j) {
      Big db = 0;
      double scale = 0;
      for (int64_t i = 0; i < M; ++i) {
        db += Big(in.dy.value(i, j));
        scale += std::fabs(in.dy.value(i, j));
      }
      note(agreement.check("db", j, ref.db.exact[j], db, scale));
    }
  return failures;
}

/// Runs the cross-check over `cases`; records and returns the counts (of
/// the cases without stats=T: those are held to their own share below).
std::pair<Agreement, SpecCoverage> crossCheckAll(const std::vector<CaseSpec>& cases) {
  // Two spec variants are made largely of doubles, held to their own share:
  // stats=T's backward of T values (the saved rstd among them), often exactly
  // a double at power-of-two N; a bias's y = x r v + b, which is b itself
  // where x is zero and b plus a speck where x is subnormal, and db, sums of
  // 16-bit dy. Such values are compared by agreement only, and the rest must
  // be decided as everywhere else.
  Agreement agreement, saved_stats, biased;
  SpecCoverage coverage;
  ThreadPool pool(2);
  for (const CaseSpec& c : cases) {
    const Inputs in = makeInputs(c);
    const RmsNormReference ref = oracleOf(c, in, pool);
    Agreement& share = statsInActivationDtype(c.spec) ? saved_stats : kRmsBias(c.spec) ? biased : agreement;
    for (const auto& f : crossCheck(c, in, ref, share, coverage)) ADD_FAILURE() << toCaseString(c) << "\n  " << f;
  }
  // The bitwise comparison must really have been made, not skipped as
  // undecidable: besides exact zeros, only values within ~2^-87 relative of a
  // double are undecided.
  ::testing::Test::RecordProperty("cases", std::to_string(cases.size()));
  ::testing::Test::RecordProperty("nonzero_elements", std::to_string(agreement.nonzero));
  ::testing::Test::RecordProperty("bitwise_elements", std::to_string(agreement.bitwise));
  ::testing::Test::RecordProperty("near_double_elements", std::to_string(agreement.near_double));
  ::testing::Test::RecordProperty("undecided_elements", std::to_string(agreement.undecided));
  ::testing::Test::RecordProperty("exact_elements", std::to_string(agreement.exact));
  EXPECT_GT(agreement.bitwise, agreement.nonzero * 99 / 100)
      << agreement.bitwise << " of " << agreement.nonzero << " nonzero elements compared bitwise";
  for (const auto& [name, share] : {std::pair{"saved_stats", &saved_stats}, std::pair{"bias", &biased}}) {
    if (share->nonzero == 0) continue;
    ::testing::Test::RecordProperty(std::string(name) + "_nonzero", std::to_string(share->nonzero));
    ::testing::Test::RecordProperty(std::string(name) + "_near_double", std::to_string(share->near_double));
    EXPECT_GT(share->bitwiseShare(), 0.99) << share->undecided << " of " << share->nonzero - share->near_double << " "
                                           << name << " elements not near a double were left undecided";
  }
  return {agreement, coverage};
}

TEST(OracleCrossCheck, MatchesBoostForEveryDTypeAndDistribution) {
  crossCheckAll(coverageCases(0x0aac1e5eedULL, 4, [](CaseSpec&) {}));
}

TEST(OracleCrossCheck, MatchesBoostForEverySpec) {
  const SpecCoverage coverage = crossCheckAll(coverageCases(
                                                  0x5bec5eedULL, 2, [](CaseSpec&) {}, everySpec))
                                    .second;
  RecordProperty("llama_y_exact", std::to_string(coverage.llama_y));
  RecordProperty("llama_y_rounded", std::to_string(coverage.llama_rounded));
  RecordProperty("undecided_round_T", std::to_string(coverage.undecided_q));
  RecordProperty("skipped_dw_columns", std::to_string(coverage.skipped_dw));
  RecordProperty("llama_dw_exact", std::to_string(coverage.llama_dw_exact));
  RecordProperty("offset_elements", std::to_string(coverage.offset_elements));
  RecordProperty("fp32_only_weights", std::to_string(coverage.fp32_weights));
  RecordProperty("saved_rstd_rows", std::to_string(coverage.saved_rstd_rows));
  RecordProperty("undecided_saved_rstd", std::to_string(coverage.undecided_rstd));
  RecordProperty("overflowing_saved_rstd", std::to_string(coverage.overflowing_rstd));
  RecordProperty("bias_y", std::to_string(coverage.bias_y));
  RecordProperty("bias_y_cancelled", std::to_string(coverage.bias_cancelled));
  // Each variant really ran: Llama y compared exactly (and x r was not
  // already a T value, so the rounding point did something), offset cases,
  // and fp32 weights with bits the activation dtype has not.
  EXPECT_GT(coverage.llama_y, 10000);
  EXPECT_GT(coverage.llama_rounded, coverage.llama_y / 2);
  EXPECT_GT(coverage.offset_elements, 10000);
  EXPECT_GT(coverage.fp32_weights, 1000);
  EXPECT_GT(coverage.llama_dw_exact, 1000);
  // stats=T rows had their backward checked at the saved round_T(r).
  EXPECT_GT(coverage.saved_rstd_rows, 1000);
  // Bias cases ran, some with y cancelling.
  EXPECT_GT(coverage.bias_y, 10000);
  EXPECT_GT(coverage.bias_cancelled, 100);
  // Boost knows x r to 2^-140 relative: a generic x r lies that close to a
  // rounding boundary of T with probability ~2^-130, so an undecided element
  // means structured data (or a wrong r) worth a look.
  EXPECT_EQ(coverage.undecided_q, 0);
}

// A hand-made case with results known in closed form: a constant row x = 2
// of N = 4, dy = 1 and eps = 2^-60 has rstd ~ 1/2, y ~ w, dx ~ (w - mean w)/2
// and dw = 1. This pins the cross-check itself: Boost and the oracle could
// share a misreading of the spec, the closed form cannot.
TEST(OracleCrossCheck, ClosedFormConstantRow) {
  CaseSpec c;
  c.kernel = "host_separate";
  c.M = 1;
  c.N = 4;
  c.ld = 4;
  c.eps = 0x1p-60f;
  Inputs in{HostMatrix{DType::F32, 1, 4, 4, {}}, HostMatrix{DType::F32, 1, 4, 4, {}},
            HostMatrix{DType::F32, 1, 4, 4, {}}};
  const double w[4] = {1.0, -0.5, 3.0, 0.25}, dy[4] = {1.0, 1.0, 1.0, 1.0};
  for (int j = 0; j < 4; ++j) {
    in.x.bits.push_back(doubleToBits(DType::F32, 2.0));
    in.w.bits.push_back(doubleToBits(DType::F32, w[j]));
    in.dy.bits.push_back(doubleToBits(DType::F32, dy[j]));
  }
  ThreadPool pool(1);
  const RmsNormReference ref = oracleOf(c, in, pool);
  // ms = 4 + 2^-60, so 2r = (1 + 2^-62)^-1/2 lies in (1 - 2^-63, 1). rstd = r,
  // y = w (2r) and dw = dy x r = 2r are then strictly inside (v - 2^-63 v, v) for
  // v = 1/2, w_j, 1: values with short significands, whose predecessor (the
  // truncation) is odd. Their round-to-odd doubles are exactly the predecessors.
  EXPECT_EQ(ref.rstd.exact[0], std::nextafter(0.5, 0.0));
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(ref.y.exact[j], std::nextafter(w[j], 0.0)) << j;
    EXPECT_EQ(ref.dw.exact[j], std::nextafter(1.0, 0.0)) << j;
    // dx_j = r (w_j - xhat c) with xhat = 2r ~ 1, c = 2r mean(w) ~ 0.9375: the
    // closed form to within ~2^-62 absolute (2^-57 relative at the smallest
    // |w_j - mean w| = 1/16), so within one ulp of double.
    const double expected = 0.5 * (w[j] - 0.9375);
    EXPECT_NEAR(ref.dx.exact[j], expected, 0x1p-52 * std::fabs(expected)) << j;
  }
}

/// A one-row case of N = 4 with hand-made values: x and dy in T, w in the spec's weight dtype.
std::pair<CaseSpec, Inputs> handMadeRow(DType t, const Spec& spec, const double (&x)[4], const double (&w)[4],
                                        const double (&dy)[4]) {
  CaseSpec c;
  c.kernel = "host_separate";
  c.dtype = t;
  c.M = 1;
  c.N = 4;
  c.ld = 4;
  c.eps = 0x1p-60f;
  c.spec = spec;
  const DType W = weightDtype(t, spec);
  Inputs in{HostMatrix{t, 1, 4, 4, {}}, HostMatrix{W, 1, 4, 4, {}}, HostMatrix{t, 1, 4, 4, {}}};
  for (int j = 0; j < 4; ++j) {
    // The values must be exact in their dtypes (else the closed forms below are of other inputs).
    EXPECT_EQ(roundToFormat(t, x[j]), x[j]);
    EXPECT_EQ(roundToFormat(W, w[j]), w[j]);
    EXPECT_EQ(roundToFormat(t, dy[j]), dy[j]);
    in.x.bits.push_back(doubleToBits(t, x[j]));
    in.w.bits.push_back(doubleToBits(W, w[j]));
    in.dy.bits.push_back(doubleToBits(t, dy[j]));
  }
  return {c, in};
}

// Gemma's offset in closed form: the constant row of ClosedFormConstantRow
// (x = 2, dy = 1, eps = 2^-60, so 2r = (1 + 2^-62)^-1/2 in (1 - 2^-63, 1))
// with bf16 activations, fp32 weights w = v - 1 and offset 1: the effective
// weight v = (1 + 2^-20, -0.5, 3, 0.25), whose first entry only fp32 holds.
// y = v (2r) lies strictly inside (v - 2^-63 |v|, v): v has at most 21
// significant bits, so its predecessor double (the truncation) is odd and is
// y's round-to-odd double. dw = dy x r = 2r does not see the offset;
// dx = r (v - xhat c) with xhat = 2r, c = 2r mean(v): 0.5 (v - mean v) to
// within ~2^-62 absolute (|v_j - mean v| >= 1/16: 2^-58 relative), plus the
// round-to-odd conversion's one ulp (<= 2^-52 relative): within 2^-51.
// An oracle that ignored the offset would give y ~ w, one that rounded
// v to bf16 would lose the 2^-20.
TEST(OracleCrossCheck, ClosedFormGemmaOffset) {
  const double v[4] = {1.0 + 0x1p-20, -0.5, 3.0, 0.25};
  const double w[4] = {v[0] - 1.0, v[1] - 1.0, v[2] - 1.0, v[3] - 1.0};  // exact: fp32 values
  const double x[4] = {2.0, 2.0, 2.0, 2.0}, dy[4] = {1.0, 1.0, 1.0, 1.0};
  auto [c, in] = handMadeRow(DType::BF16, withSpec(kWeightDtype, DType::F32, kWeightOffset, 1.f), x, w, dy);
  ThreadPool pool(1);
  const RmsNormReference ref = oracleOf(c, in, pool);
  EXPECT_EQ(ref.y.dtype, DType::BF16);
  EXPECT_EQ(ref.dw.dtype, DType::F32);  // dw in the weight dtype
  EXPECT_EQ(ref.rstd.exact[0], std::nextafter(0.5, 0.0));
  const double mean_v = (v[0] + v[1] + v[2] + v[3]) / 4.0;  // 0.9375 + 2^-22, exact
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(ref.y.exact[j], std::nextafter(v[j], 0.0)) << j;
    EXPECT_EQ(ref.dw.exact[j], std::nextafter(1.0, 0.0)) << j;
    const double expected = 0.5 * (v[j] - mean_v);  // exact in double
    EXPECT_NEAR(ref.dx.exact[j], expected, 0x1p-51 * std::fabs(expected)) << j;
  }
}

// Llama's rounding point in closed form. x = (1, -1.5, 0.75, 3) in bf16 has
// mean(x^2) = S = 205/64 (exact), eps = 2^-60: r = (S + eps)^-1/2 is within
// 2^-62 relative of S^-1/2 (eps / 2S < 2^-62), and the double x / sqrt(S)
// within 2^-52 more of that (sqrt and the division, 2^-53 each): xhat in
// double is within 2^-51 of x r. Where xhat (1 -+ 2^-48) rounds to one bf16 q
// (the +-2^-48 itself computed within 2^-52), no rounding boundary lies
// within 2^-49 of x r, so q = round_bf16(x r) exactly. Then:
//   y = q v exactly (8 + at most 24 significant bits: a double, its own
//   round-to-odd double), dw = round_bf16(dy q) (one row; Llama's dw terms
//   are products in bf16), dx the plain spec's
//   r (v dy - xhat c), c = (1/N) sum v dy xhat, to ~2^-48 of its terms
//   (double arithmetic on values within 2^-51 of exact).
// The weights are chosen so that round_bf16(q v) != round_bf16(x r v): the
// plain spec's result differs visibly, and must lie outside the Llama budget
// (the vLLM PR #42379 mutant). Both weight dtypes: bf16 without offset, and
// fp32 with offset 1, v = 1 + w = (the bf16 weights) + 2^-20: bits that only
// an fp32 w holds, and that q v keeps.
TEST(OracleCrossCheck, ClosedFormLlamaRounding) {
  const double x[4] = {1.0, -1.5, 0.75, 3.0}, dy[4] = {1.0, -2.0, 0.5, 1.5};
  const double S = (1.0 + 2.25 + 0.5625 + 9.0) / 4.0;  // 205/64, exact
  const double v_bf16[4] = {33.0 / 32, 13.0 / 16, 29.0 / 32, 33.0 / 32};
  for (const bool gemma_fp32 : {false, true}) {
    SCOPED_TRACE(gemma_fp32 ? "fp32 weights, offset 1" : "bf16 weights, no offset");
    double v[4], w[4];
    for (int j = 0; j < 4; ++j) {
      v[j] = gemma_fp32 ? v_bf16[j] + 0x1p-20 : v_bf16[j];
      w[j] = gemma_fp32 ? v[j] - 1.0 : v[j];  // exact
    }
    const Spec spec = gemma_fp32 ? withSpec(kWeightDtype, DType::F32, kRounding, Rounding::Llama, kWeightOffset, 1.f)
                                 : withSpec(kRounding, Rounding::Llama);
    auto [c, in] = handMadeRow(DType::BF16, spec, x, w, dy);
    ThreadPool pool(1);
    const RmsNormReference ref = oracleOf(c, in, pool);
    const double r = 1.0 / std::sqrt(S);
    EXPECT_NEAR(ref.rstd.exact[0], r, 0x1p-51 * r);
    double c_row = 0;
    for (int j = 0; j < 4; ++j) c_row += v[j] * dy[j] * (x[j] * r) / 4.0;
    for (int j = 0; j < 4; ++j) {
      const double xhat = x[j] / std::sqrt(S);
      const double q = roundToFormat(DType::BF16, xhat);
      ASSERT_EQ(roundToFormat(DType::BF16, xhat * (1 - 0x1p-48)), q) << j << ": x r too close to a rounding boundary";
      ASSERT_EQ(roundToFormat(DType::BF16, xhat * (1 + 0x1p-48)), q) << j << ": x r too close to a rounding boundary";
      ASSERT_NE(q, xhat) << j;  // the rounding point moves x r
      // The plain spec's correctly rounded y: x r v in double is within 2^-50 of exact.
      const double plain = roundToFormat(DType::BF16, xhat * v[j]);
      ASSERT_EQ(roundToFormat(DType::BF16, xhat * v[j] * (1 - 0x1p-48)), plain) << j;
      ASSERT_EQ(roundToFormat(DType::BF16, xhat * v[j] * (1 + 0x1p-48)), plain) << j;
      ASSERT_NE(plain, roundToFormat(DType::BF16, q * v[j])) << j << ": the weights must make Llama visible";

      EXPECT_EQ(ref.y.exact[j], q * v[j]) << j;
      EXPECT_EQ(ref.y.correctlyRounded(j), roundToFormat(DType::BF16, q * v[j])) << j;
      EXPECT_GT(std::fabs(plain - ref.y.exact[j]), ref.y.budget[j])
          << j << ": the plain spec's y is within the Llama budget";
      EXPECT_EQ(ref.dw.exact[j], roundToFormat(DType::BF16, dy[j] * q)) << j;  // a product in bf16
      const double a = v[j] * dy[j], dx = r * (a - xhat * c_row);
      EXPECT_NEAR(ref.dx.exact[j], dx, 0x1p-48 * r * (std::fabs(a) + std::fabs(xhat * c_row))) << j;
    }
  }
}

// ---------------------------------------------------------------------------
// OracleFiniteDifference

/// Row loss L_i = sum_j dy_j y_j = (sum_j dy_j x_j (offset + w_j)) / sqrt(sum_j x_j^2 / N + eps)
/// + sum_j dy_j b_j at kFdBits, in plain sums (not the oracle's mpfr_sum /
/// rec_sqrt). offset + w_j is exact at kFdBits (|offset| <= 16, w_j +- h
/// spans < 300 bits); b is 0 without a bias.
void rowLoss(mpfr_ptr out, mp::RealArray& x, mp::RealArray& w, double offset, mp::RealArray& b,
             const std::vector<double>& dy, double eps, mp::Real& s, mp::Real& t) {
  const long N = static_cast<long>(dy.size());
  mpfr_set_zero(s, 1);
  for (long j = 0; j < N; ++j) {
    mpfr_sqr(t, x[j], MPFR_RNDN);
    mpfr_add(s, s, t, MPFR_RNDN);
  }
  mpfr_div_si(s, s, N, MPFR_RNDN);
  mpfr_add_d(s, s, eps, MPFR_RNDN);
  mpfr_sqrt(s, s, MPFR_RNDN);
  mpfr_set_zero(out, 1);
  for (long j = 0; j < N; ++j) {
    mpfr_add_d(t, w[j], offset, MPFR_RNDN);
    mpfr_mul(t, t, x[j], MPFR_RNDN);
    mpfr_mul_d(t, t, dy[j], MPFR_RNDN);
    mpfr_add(out, out, t, MPFR_RNDN);
  }
  mpfr_div(out, out, s, MPFR_RNDN);
  for (long j = 0; j < N; ++j) {
    mpfr_mul_d(t, b[j], dy[j], MPFR_RNDN);
    mpfr_add(out, out, t, MPFR_RNDN);
  }
}

struct FdCounts {
  int64_t compared = 0;       // gradient elements compared with a central difference
  int64_t offset = 0;         // of those, in cases with an offset
  int64_t fp32_weights = 0;   // of those, in cases with fp32 weights beside 16-bit x
  int64_t llama_dx = 0;       // of those, Llama dx (against the unrounded forward's loss)
  int64_t llama_bitwise = 0;  // Llama dx and rstd elements compared bitwise with the plain spec's
  int64_t db = 0;             // db elements (cases with a bias)
};

/// dx and dw of every case against central differences of its loss
/// L = sum dy y, y = x r (offset + w). For Llama (y = round_T(x r) (offset + w))
/// the loss is piecewise constant in x, so its central difference means
/// nothing; the spec defines dx as the plain forward's (autograd through the
/// rounding as the identity), so Llama's dx is compared with the plain loss's
/// central difference and, bit for bit, with the oracle's dx of the same
/// inputs under the plain spec (rstd too). Llama's dw = sum_i dy round_T(x r)
/// is linear in w with the rounded x r as coefficient: OracleCrossCheck
/// compares it bitwise with a Boost sum of dy round_T(x r), round_T decided
/// from the exact x r (MatchesBoostForEverySpec, ClosedFormLlamaRounding).
FdCounts finiteDifferenceCheck(const std::vector<CaseSpec>& cases) {
  ThreadPool pool(1);
  FdCounts counts;
  for (const CaseSpec& c : cases) {
    const Inputs in = makeInputs(c);
    const RmsNormReference ref = oracleOf(c, in, pool);
    const int64_t M = c.M, N = c.N;
    const double eps = c.eps, offset = kWeightOffset(c.spec);
    const bool llama = kRounding(c.spec) == Rounding::Llama;
    std::vector<std::string> failures;
    int64_t compared = 0;
    auto note = [&](std::string f) {
      ++compared;
      if (!f.empty() && failures.size() < 5) failures.push_back(std::move(f));
    };
    if (llama) {
      CaseSpec plain_case = c;
      kRounding.set(plain_case.spec, Rounding::Plain);
      const RmsNormReference plain = oracleOf(plain_case, in, pool);
      for (size_t e = 0; e < ref.dx.exact.size(); ++e) {
        ++counts.llama_bitwise;
        if (bitsOf(ref.dx.exact[e]) != bitsOf(plain.dx.exact[e]) && failures.size() < 5)
          failures.push_back(fmt::format("dx[{}]: Llama {} but the plain spec's dx of the same inputs is {}", e,
                                         hexFloat(ref.dx.exact[e]), hexFloat(plain.dx.exact[e])));
      }
      for (int64_t i = 0; i < M; ++i) {
        ++counts.llama_bitwise;
        if (bitsOf(ref.rstd.exact[i]) != bitsOf(plain.rstd.exact[i]) && failures.size() < 5)
          failures.push_back(fmt::format("rstd[{}]: Llama {} but the plain spec's rstd is {}", i,
                                         hexFloat(ref.rstd.exact[i]), hexFloat(plain.rstd.exact[i])));
      }
    }
    std::vector<std::unique_ptr<mp::RealArray>> x;  // the whole input at kFdBits, perturbed in place
    std::vector<std::vector<double>> dy(M, std::vector<double>(N));
    mp::RealArray w(N, kFdBits), b(N, kFdBits);
    std::vector<double> v(N);  // offset + w_j (within 2^-53: for the scales)
    for (int64_t j = 0; j < N; ++j) {
      mpfr_set_d(w[j], in.w.value(0, j), MPFR_RNDN);
      mpfr_set_d(b[j], in.b ? in.b->value(0, j) : 0.0, MPFR_RNDN);
      v[j] = offset + in.w.value(0, j);
    }
    for (int64_t i = 0; i < M; ++i) {
      x.push_back(std::make_unique<mp::RealArray>(N, kFdBits));
      for (int64_t j = 0; j < N; ++j) {
        mpfr_set_d((*x[i])[j], in.x.value(i, j), MPFR_RNDN);
        dy[i][j] = in.dy.value(i, j);
      }
    }
    mp::Real s(kFdBits), t(kFdBits), lp(kFdBits), lm(kFdBits), fd(kFdBits), row_scale(kFdBits), row_loss(kFdBits);
    std::vector<double> dw_scale(N, 0.0);
    for (int64_t i = 0; i < M; ++i) {
      // sqrt(mean x^2 + eps) of the unperturbed row: the step is 2^-100 of it.
      rowLoss(row_loss, *x[i], w, offset, b, dy[i], eps, row_scale, t);
      const mpfr_exp_t h_exp = mpfr_get_exp(row_scale) + kFdStepLog2;
      const double r = 1.0 / mpfr_get_d(row_scale, MPFR_RNDN);
      double m = 0;  // (1/N) sum_j |v_j dy_j xhat_j|
      for (int64_t j = 0; j < N; ++j) m += std::fabs(v[j] * dy[i][j] * in.x.value(i, j) * r) / double(N);
      for (int64_t j = 0; j < N; ++j) {
        const double xv = in.x.value(i, j), a = v[j] * dy[i][j];
        centralDifference(
            fd, (*x[i])[j], xv, h_exp, [&](mp::Real& out) { rowLoss(out, *x[i], w, offset, b, dy[i], eps, s, t); }, lp,
            lm);
        // dx = r (a - xhat c) with |c| <= m: its terms bound the scale. The
        // extra r m covers the 400-bit rounding of L (~N^2 2^-301 r m) where
        // x_j = a_j = 0 makes the derivative exactly 0 but L is not.
        const double scale = r * (std::fabs(a) + 2.0 * std::fabs(xv * r) * m + m);
        note(compareFd("dx", i, j, fd, ref.dx.exact[i * N + j], scale));
        counts.llama_dx += llama;
        dw_scale[j] += std::fabs(dy[i][j] * xv * r);
      }
    }
    auto total_loss = [&](mp::Real& out) {
      mpfr_set_zero(out, 1);
      for (int64_t i = 0; i < M; ++i) {
        rowLoss(row_loss, *x[i], w, offset, b, dy[i], eps, s, t);
        mpfr_add(out, out, row_loss, MPFR_RNDN);
      }
    };
    if (!llama)
      for (int64_t j = 0; j < N; ++j) {
        // L is linear in w_j (the offset only shifts it): the central
        // difference is exact up to rounding for any h, and is sum_i dy x r.
        const double wv = in.w.value(0, j);
        const mpfr_exp_t h_exp = (wv == 0.0 ? 0 : std::ilogb(wv) + 1) + kFdStepLog2;
        mp::Real g(kFdBits);
        centralDifference(g, w[j], wv, h_exp, total_loss, lp, lm);
        note(compareFd("dw", 0, j, g, ref.dw.exact[j], dw_scale[j]));
      }
    if (in.b)
      for (int64_t j = 0; j < N; ++j) {
        // L is linear in b_j with coefficient sum_i dy_ij.
        const double bv = in.b->value(0, j);
        const mpfr_exp_t h_exp = (bv == 0.0 ? 0 : std::ilogb(bv) + 1) + kFdStepLog2;
        double scale = 0;
        for (int64_t i = 0; i < M; ++i) scale += std::fabs(dy[i][j]);
        mp::Real g(kFdBits);
        centralDifference(g, b[j], bv, h_exp, total_loss, lp, lm);
        note(compareFd("db", 0, j, g, ref.db.exact[j], scale));
        ++counts.db;
      }
    for (const auto& f : failures) ADD_FAILURE() << toCaseString(c) << "\n  " << f;
    counts.compared += compared;
    if (offset != 0.0) counts.offset += compared;
    if (in.w.dtype != c.dtype) counts.fp32_weights += compared;
  }
  return counts;
}

TEST(OracleFiniteDifference, GradientsMatchCentralDifferencesOfTheLoss) {
  const FdCounts counts = finiteDifferenceCheck(coverageCases(0xfd0f10551ULL, 10, [](CaseSpec& c) {
    const int64_t pad = c.ld - c.N;
    c.M = 1 + (c.M - 1) % 4;
    c.N = 1 + (c.N - 1) % 17;
    c.ld = c.N + pad;
  }));
  RecordProperty("compared", std::to_string(counts.compared));
  EXPECT_GT(counts.compared, 1000);
}

TEST(OracleFiniteDifference, GradientsMatchCentralDifferencesForEverySpec) {
  const FdCounts counts = finiteDifferenceCheck(coverageCases(
      0xfd5bec5ULL, 3,
      [](CaseSpec& c) {
        const int64_t pad = c.ld - c.N;
        c.M = 1 + (c.M - 1) % 4;
        c.N = 1 + (c.N - 1) % 17;
        c.ld = c.N + pad;
      },
      everyDerivativeSpec));
  RecordProperty("compared", std::to_string(counts.compared));
  RecordProperty("offset", std::to_string(counts.offset));
  RecordProperty("fp32_weights", std::to_string(counts.fp32_weights));
  RecordProperty("llama_dx", std::to_string(counts.llama_dx));
  RecordProperty("llama_bitwise", std::to_string(counts.llama_bitwise));
  RecordProperty("db", std::to_string(counts.db));
  // Every variant was really compared (the shapes average ~2.5 x 9 elements).
  EXPECT_GT(counts.compared, 2000);
  EXPECT_GT(counts.offset, 500);
  EXPECT_GT(counts.fp32_weights, 500);
  EXPECT_GT(counts.llama_dx, 500);
  EXPECT_GT(counts.llama_bitwise, 500);
  EXPECT_GT(counts.db, 100);
}

// ---------------------------------------------------------------------------
// OracleThreads

TEST(OracleThreads, ResultDoesNotDependOnTheThreadCount) {
  // M >= 70 spreads rows over the oracle's 64 fixed dW chunks unevenly (1 to
  // 5 rows each); the thread counts then split those chunks differently.
  // The spec variants take other paths (offset products, Llama's rounded
  // x-hat in dW): each runs threaded too.
  const struct {
    DType t;
    int64_t M, N, ld;
    DistParams x;
    Spec spec;
  } shapes[] = {
      {DType::F32, 70, 37, 41, {Dist::Normal, 1.0, 0.0}, {}},
      {DType::BF16, 133, 65, 65, {Dist::OutlierChannels, 0.5, 0.0}, {}},
      {DType::F16, 257, 19, 24, {Dist::LargeMean, 4.0, 1024.0}, {}},
      {DType::BF16,
       133,
       65,
       65,
       {Dist::Normal, 1.0, 0.0},
       withSpec(kWeightDtype, DType::F32, kRounding, Rounding::Llama, kWeightOffset, 1.f)},
      {DType::F16, 70, 37, 41, {Dist::Normal, 1.0, 0.0}, withSpec(kRounding, Rounding::Llama)},
      {DType::F32, 257, 19, 24, {Dist::LargeMean, 4.0, 1024.0}, withSpec(kWeightOffset, 1.f)},
      {DType::BF16,
       133,
       65,
       65,
       {Dist::Normal, 1.0, 0.0},
       withSpec(kWeightDtype, DType::F32, kWeightOffset, 1.f, kSavedStats, SavedStats::Activation)},
  };
  for (const auto& s : shapes) {
    CaseSpec c;
    c.kernel = "host_separate";
    c.dtype = s.t;
    c.M = s.M;
    c.N = s.N;
    c.ld = s.ld;
    c.x = s.x;
    c.eps = 1e-5f;
    c.seed = 0x7117ead5ULL + s.M;
    c.spec = s.spec;
    validateCase(c);
    const Inputs in = makeInputs(c);
    EXPECT_EQ(threadDependence([&](ThreadPool& pool) { return oracleOf(c, in, pool); },
                               [](const RmsNormReference& r) {
                                 return std::vector<const ReferenceTensor*>{&r.y, &r.rstd, &r.dx, &r.dw};
                               }),
              "")
        << toCaseString(c);
  }
}

// ---------------------------------------------------------------------------
// OracleRoundToOdd

/// Sets MPFR's exponent range for the life of the guard (it is global state of
/// the thread: every other MPFR user expects the default back).
class ExponentRange {
 public:
  ExponentRange(mpfr_exp_t emin, mpfr_exp_t emax) : emin_(mpfr_get_emin()), emax_(mpfr_get_emax()) {
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
  }
  ~ExponentRange() {
    mpfr_set_emin(emin_);
    mpfr_set_emax(emax_);
  }

 private:
  mpfr_exp_t emin_, emax_;
};

/// The IEEE round-to-nearest-even of v in format t, by MPFR itself: precision
/// p, the format's exponent range (MPFR significands are in [1/2, 1), so its
/// exponents are one above IEEE's) and mpfr_subnormalize for the subnormals.
double mpfrRoundTo(DType t, mpfr_srcptr v) {
  const FloatFormat f = formatOf(t);
  mp::Real r(f.precision);
  // Round to p bits in the default range (v itself may lie outside the
  // format's range, where MPFR inputs are not allowed), then let
  // mpfr_check_range (overflow, underflow) and mpfr_subnormalize use the
  // ternary value to round correctly once more, without double rounding.
  int inexact = mpfr_set(r, v, MPFR_RNDN);
  {
    ExponentRange range(f.emin - f.precision + 2, f.emax + 1);
    inexact = mpfr_check_range(r, inexact, MPFR_RNDN);
    mpfr_subnormalize(r, inexact, MPFR_RNDN);
  }
  return mpfr_get_d(r, MPFR_RNDN);  // exact: at most 24 bits, within double's range
}

TEST(OracleRoundToOdd, ThenRoundToFormatEqualsDirectRounding) {
  const mpfr_exp_t default_emin = mpfr_get_emin(), default_emax = mpfr_get_emax();
  std::mt19937_64 rng(0x0dd0dd);
  constexpr int kSamples = 100000;  // per format
  mp::Real v(tolerance::kOraclePrecisionBits), offset(tolerance::kOraclePrecisionBits);
  int64_t ties = 0, overflows = 0, subnormals = 0;
  for (DType t : kAllDTypes) {
    const FloatFormat f = formatOf(t);
    const int p = f.precision;
    int failures = 0;
    for (int n = 0; n < kSamples && failures < 5; ++n) {
      // A representable value k 2^q of the format (k < 2^p), by region.
      uint64_t k;
      int q;
      const int region = static_cast<int>(rng() % 8);
      if (region <= 3) {  // normal, any binade
        k = (uint64_t{1} << (p - 1)) + rng() % (uint64_t{1} << (p - 1));
        q = f.emin + static_cast<int>(rng() % (f.emax - f.emin + 1)) - (p - 1);
      } else if (region == 4) {  // subnormal (and 0), quantum of the smallest subnormal
        k = rng() % (uint64_t{1} << (p - 1));
        q = f.emin - (p - 1);
      } else if (region == 5) {  // top of the range: max finite and the values below it
        k = (uint64_t{1} << p) - 1 - rng() % 4;
        q = f.emax - (p - 1);
      } else if (region == 6) {  // a binade's last value (rounding up changes the exponent)
        k = (uint64_t{1} << p) - 1;
        q = f.emin - 1 + static_cast<int>(rng() % (f.emax - f.emin + 1)) - (p - 1);
        if (q < f.emin - (p - 1)) {  // below the normal range: the largest subnormal
          k >>= 1;
          q = f.emin - (p - 1);
        }
      } else {  // the smallest values: 0, min subnormal, min normal
        k = rng() % 3 == 0 ? 0 : rng() % 2 ? 1 : (uint64_t{1} << (p - 1));
        q = f.emin - (p - 1);
      }
      // The midpoint (2k + 1) 2^(q-1) above it, moved by a tiny offset of
      // either sign (down to 2^-130 of an ulp, below double's resolution) or not at all.
      mpfr_set_ui_2exp(v, 2 * k + 1, q - 1, MPFR_RNDN);
      const int how = static_cast<int>(rng() % 4);
      if (how == 0) {
        ++ties;
      } else {
        const int shift = 1 + static_cast<int>(rng() % 130);
        const uint64_t frac = how == 1 ? 1 : (rng() >> 12) | 1;  // a single bit or 52 random bits
        mpfr_set_d(offset, static_cast<double>(frac), MPFR_RNDN);
        mpfr_mul_2si(offset, offset, q - 1 - shift - (how == 1 ? 0 : 52), MPFR_RNDN);
        if (rng() & 1) mpfr_neg(offset, offset, MPFR_RNDN);
        mpfr_add(v, v, offset, MPFR_RNDN);
      }
      if (rng() & 1) mpfr_neg(v, v, MPFR_RNDN);

      const double direct = mpfrRoundTo(t, v);
      const double via_odd = roundToFormat(t, mp::toDoubleRoundToOdd(v));
      overflows += std::isinf(direct);
      subnormals += direct != 0.0 && std::fabs(direct) < std::ldexp(1.0, f.emin);
      if (bitsOf(direct) != bitsOf(via_odd)) {
        ++failures;
        ADD_FAILURE() << dtypeName(t) << ": value " << mpfr_get_d(v, MPFR_RNDN) << " ("
                      << hexFloat(mpfr_get_d(v, MPFR_RNDZ)) << " truncated): MPFR rounds to " << hexFloat(direct)
                      << ", round-to-odd path gives " << hexFloat(via_odd);
      }
      if (t == DType::F32) {  // a second, independent reference: MPFR's own float conversion
        const float flt = mpfr_get_flt(v, MPFR_RNDN);
        EXPECT_EQ(bitsOf(static_cast<double>(flt)), bitsOf(direct)) << "mpfr_get_flt disagrees at " << hexFloat(direct);
      }
    }
  }
  EXPECT_EQ(mpfr_get_emin(), default_emin);
  EXPECT_EQ(mpfr_get_emax(), default_emax);
  // The regions named in the contract were really reached.
  RecordProperty("ties", std::to_string(ties));
  RecordProperty("overflows", std::to_string(overflows));
  RecordProperty("subnormals", std::to_string(subnormals));
  EXPECT_GT(ties, 1000);
  EXPECT_GT(overflows, 100);
  EXPECT_GT(subnormals, 1000);
}

TEST(OracleRoundToOdd, OverflowBoundaryAndExtremes) {
  mp::Real v(tolerance::kOraclePrecisionBits);
  for (DType t : kAllDTypes) {
    const FloatFormat f = formatOf(t);
    const double max = maxFinite(t), half_ulp = 0.5 * ulpOf(t, max);
    // max + ulp/2 is a tie between max (odd) and 2^(emax+1) (even): Inf.
    mpfr_set_d(v, max, MPFR_RNDN);
    mpfr_add_d(v, v, half_ulp, MPFR_RNDN);
    EXPECT_TRUE(std::isinf(roundToFormat(t, mp::toDoubleRoundToOdd(v)))) << dtypeName(t);
    // Just below it: max, even though the double nearest to it is the midpoint itself.
    mpfr_set_ui_2exp(v, 1, f.emax - f.precision - 100, MPFR_RNDN);  // within 160 bits of max
    mpfr_sub_d(v, v, max + half_ulp, MPFR_RNDN);
    mpfr_neg(v, v, MPFR_RNDN);
    EXPECT_EQ(roundToFormat(t, mp::toDoubleRoundToOdd(v)), max) << dtypeName(t);
    mpfr_neg(v, v, MPFR_RNDN);
    EXPECT_EQ(roundToFormat(t, mp::toDoubleRoundToOdd(v)), -max) << dtypeName(t);
    // Far beyond double's range: still Inf (truncation gives DBL_MAX, not Inf).
    mpfr_set_ui_2exp(v, 3, 5000, MPFR_RNDN);
    EXPECT_EQ(roundToFormat(t, mp::toDoubleRoundToOdd(v)), INFINITY) << dtypeName(t);
    // Far below: a signed zero, as direct rounding gives.
    mpfr_set_si_2exp(v, -3, -5000, MPFR_RNDN);
    const double tiny = roundToFormat(t, mp::toDoubleRoundToOdd(v));
    EXPECT_EQ(tiny, 0.0) << dtypeName(t);
    EXPECT_TRUE(std::signbit(tiny)) << dtypeName(t);
    EXPECT_EQ(bitsOf(tiny), bitsOf(mpfrRoundTo(t, v))) << dtypeName(t);
    // Half the smallest subnormal ties to 0; a hair above it rounds up.
    mpfr_set_d(v, 0.5 * minSubnormal(t), MPFR_RNDN);
    EXPECT_EQ(roundToFormat(t, mp::toDoubleRoundToOdd(v)), 0.0) << dtypeName(t);
    mpfr_nextabove(v);
    EXPECT_EQ(roundToFormat(t, mp::toDoubleRoundToOdd(v)), minSubnormal(t)) << dtypeName(t);
  }
}

// ---------------------------------------------------------------------------
// OracleBudget

/// N <= 64: depth D_row = N keeps the relative budget tiny.
void smallN(CaseSpec& c) {
  const int64_t pad = c.ld - c.N;
  c.N = 1 + (c.N - 1) % 64;
  c.ld = c.N + pad;
}

TEST(OracleBudget, FinitePositiveAndNotAbsurdlyLoose) {
  const std::vector<CaseSpec> cases = coverageCases(0xb0d9e7ULL, 3, smallN, everySpec);
  ThreadPool pool(2);
  const double eta = tolerance::kBudgetSafety * tolerance::kUnderflowHalfUlps * minSubnormal(DType::F32);
  int64_t overflowing = 0;     // exact values whose correctly rounded result is Inf (fp16 dx of tiny rows)
  int64_t saved_overflow = 0;  // stats=T backward elements of a saved rstd that overflowed T
  for (const CaseSpec& c : cases) {
    const Inputs in = makeInputs(c);
    const RmsNormReference ref = oracleOf(c, in, pool);
    const bool llama = kRounding(c.spec) == Rounding::Llama;
    int failures = 0;
    std::vector<const ReferenceTensor*> tensors{&ref.y, &ref.rstd, &ref.dx, &ref.dw};
    if (kRmsBias(c.spec)) tensors.push_back(&ref.db);
    for (const ReferenceTensor* r : tensors) {
      ASSERT_EQ(r->budget.size(), size_t(r->rows * r->cols));
      for (size_t e = 0; e < r->budget.size() && failures < 5; ++e) {
        // stats=T in fp16 with rstd beyond 65504 (a zero row, a tiny eps): the
        // saved rstd is inf and the backward non-finite, in oracle and kernel alike.
        if (statsInActivationDtype(c.spec) && !std::isfinite(r->exact[e]) && (r == &ref.dx || r == &ref.dw)) {
          ++saved_overflow;
          continue;
        }
        bool ok = budgetAdmitsCorrectlyRounded(*r, e, overflowing);
        if (r == &ref.y || r == &ref.rstd) {
          // Upper bound: 0.5 ulp of a possibly twice larger binade, a loose
          // relative term, and twice the underflow term K eta (1 + |v| + r)
          // (G_rstd = 0), v = offset + w the effective weight.
          const bool y = r == &ref.y;
          const int64_t i = int64_t(e) / c.N, j = int64_t(e) % c.N;
          const double v = y ? std::fabs(double(kWeightOffset(c.spec)) + in.w.value(0, j)) : 0.0;
          const double rstd = y ? ref.rstd.exact[size_t(i)] : 0.0;
          // The size of the element's terms: |exact|, or |xhat v| + |b| where a bias may cancel y.
          const double size = r->magnitudeAt(int64_t(e));
          double limit = ulpOf(r->dtype, size) + kBudgetLooseRelative * size + 2.0 * eta * (1.0 + v + rstd);
          // Llama near a rounding boundary of x r adds spread |v|, spread =
          // round_T(xr + e) - round_T(xr - e) <= 2 e + ulp_T(|xr| + e): with
          // e ~ 77 u |xr| (D_row <= 64, see LlamaYTightAwayFromRoundingBoundaries)
          // 2 e |v| is in the loose relative term, and ulp_T(|xr| + e) is at
          // most the ulp of the binade above |xhat|.
          if (y && llama) limit += ulpOf(r->dtype, 2.0 * std::fabs(in.x.value(i, j) * rstd)) * v;
          ok = ok && r->budget[e] <= limit;
        }
        if (!ok) {
          ++failures;
          ADD_FAILURE() << toCaseString(c) << "\n  " << budgetElement(*r, e);
        }
      }
    }
  }
  RecordProperty("cases", std::to_string(cases.size()));
  RecordProperty("overflowing_elements", std::to_string(overflowing));
  RecordProperty("nonfinite_backward_of_an_overflowing_saved_rstd", std::to_string(saved_overflow));
}

/// The Llama specs beside bf16 activations (none for the other dtypes).
std::vector<Spec> llamaBf16Specs(DType t) {
  std::vector<Spec> specs;
  if (t == DType::BF16)
    for (const Spec& s : everySpec(t))
      if (kRounding(s) == Rounding::Llama) specs.push_back(s);
  return specs;
}

// Llama's y budget is tight away from the rounding boundaries of x r, and
// that is what catches a kernel implementing the plain spec instead (vLLM
// PR #42379: the weight multiplied the unrounded x-hat).
//
// Tight: with no boundary of T within the kernel's error e_q of x r the
// oracle's spread is 0 and the budget is err + 0.5 ulp_T(|y| + err), err =
// K (u (1 + w_units) |q v| + eta G) <= 2 * 2^-24 * 2 |y| + g = 2^-22 |y| + g,
// g = K eta (1 + |v| + r) (the underflow term, not the rounding point's).
// So a budget above 0.5 ulp_T(|y| + 2^-20 |y| + g) + 2^-20 |y| + g (4x the
// relative term) has a nonzero spread. The share of those: with D_row = N
// <= 64, delta_r = (N + 3) / 2 + 4 <= 37.5 and the rstd budget B_r <=
// (2 delta_r + 1) u r = 76 u r, so e_q = |x| B_r + u |x| (r + B_r) <= 77 u |x r|
// (plus 2^-50 in the oracle's interval). A boundary falls in the 2 e_q wide
// interval with probability <= 154 u / 2^-8 = 154 * 2^-16 ~ 0.24% for x r
// uniformly placed between bf16's boundaries (spaced >= 2^-8 |x r|);
// the test allows 4x that, 1%.
//
// Caught: the plain spec's y is round_T(x r v); Llama's exact value is
// q v = x r v + d v, d = q - x r uniform on +-ulp_T(q)/2. With rho =
// round_T(x r v) - x r v uniform on +-ulp_T(y)/2 and a = ulp_T(q) |v| /
// ulp_T(y) in (1/2, 2], |rho - d v| exceeds the budget (0.5 ulp_T(y) + ~2^-22
// |y| off the boundaries) with probability a/4 in (1/8, 1/2]. ConstantRows and
// LargeMean put every x r of a row at (or near) one value, and x = 0 gives y
// = 0 in both specs, so they are left out of that share; it must exceed
// 1/16, half its smallest expectation, for each of the four Llama specs.
TEST(OracleBudget, LlamaYTightAwayFromRoundingBoundaries) {
  const std::vector<CaseSpec> cases = coverageCases(0x11a3a7ULL, 6, smallN, llamaBf16Specs);
  ThreadPool pool(2);
  const double K = tolerance::kBudgetSafety, eta = tolerance::kUnderflowHalfUlps * minSubnormal(DType::F32);
  constexpr double kRelative = 0x1p-20;  // 4x the budget's 2^-22 |y|
  int64_t elements = 0, loose = 0;
  std::map<std::string, std::pair<int64_t, int64_t>> caught;  // spec -> (caught, generic elements)
  for (const CaseSpec& c : cases) {
    ASSERT_EQ(kRounding(c.spec), Rounding::Llama);
    ASSERT_EQ(c.dtype, DType::BF16);
    const Inputs in = makeInputs(c);
    const RmsNormReference ref = oracleOf(c, in, pool);
    CaseSpec plain_case = c;
    kRounding.set(plain_case.spec, Rounding::Plain);
    const RmsNormReference plain = oracleOf(plain_case, in, pool);
    const bool generic = c.x.kind != Dist::ConstantRows && c.x.kind != Dist::LargeMean;
    auto& [caught_n, generic_n] = caught[specLabel(c.op, c.dtype, c.spec)];
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) {
        const size_t e = size_t(i * c.N + j);
        const double exact = std::fabs(ref.y.exact[e]);
        const double v = std::fabs(double(kWeightOffset(c.spec)) + in.w.value(0, j));
        const double g = K * eta * (1.0 + v + ref.rstd.exact[size_t(i)]);
        const double tight = 0.5 * ulpOf(DType::BF16, exact + kRelative * exact + g) + kRelative * exact + g;
        ++elements;
        loose += ref.y.budget[e] > tight;
        if (generic && in.x.value(i, j) != 0.0) {
          ++generic_n;
          caught_n += std::fabs(plain.y.correctlyRounded(int64_t(e)) - ref.y.exact[e]) > ref.y.budget[e];
        }
      }
  }
  RecordProperty("elements", std::to_string(elements));
  RecordProperty("loose", std::to_string(loose));
  EXPECT_GT(elements, 10000);
  EXPECT_LT(double(loose), 0.01 * double(elements))
      << loose << " of " << elements << " y budgets above the tight bound";
  ASSERT_EQ(caught.size(), 4u);
  for (const auto& [label, counts] : caught) {
    RecordProperty("caught " + label, fmt::format("{} of {}", counts.first, counts.second));
    // >= 1000 elements: the share's standard deviation is then <= 0.5 /
    // sqrt(1000) ~ 0.016, a quarter of the gap between 1/8 and 1/16.
    EXPECT_GT(counts.second, 1000) << label;
    EXPECT_GT(double(counts.first), double(counts.second) / 16.0)
        << label << ": the plain spec's y is outside the Llama budget at " << counts.first << " of " << counts.second
        << " elements";
  }
}

// stats=T: rstd saved rounded to T. A correct kernel's fp32 r~ lies within
// a few fp32 ulps of r, so where r is that close to a rounding boundary of T
// the saved value may be either neighbour, and the backward taken at it
// differs from the spec's (taken at round_T(r)) by up to ~3 r |x c| ulp_T(r):
// far more than its own rounding. The kernel that rounds r~ = r +- 2 fp32
// ulps to T, takes the backward exactly at that and rounds each output once
// must be within every budget; rows where it saves the other neighbour must
// occur (they are the ones the spread term exists for).
TEST(OracleBudget, StatsInTAdmitsEitherRoundingOfTheSavedRstd) {
  ThreadPool pool(2);
  int64_t alt_rows = 0, checked = 0;
  int seed = 0;
  for (DType t : {DType::F16, DType::BF16})
    for (int64_t N : {3, 8, 33})
      for (const Spec& spec :
           {withSpec(kSavedStats, SavedStats::Activation),
            withSpec(kWeightDtype, DType::F32, kWeightOffset, 1.f, kSavedStats, SavedStats::Activation)}) {
        const CaseSpec c = parseCaseString(
            fmt::format("op=rmsnorm kernel=host_separate dtype={} M=8192 N={} seed={}", dtypeName(t), N, ++seed));
        CaseSpec cs = c;
        cs.spec = spec;
        validateCase(cs);
        const Inputs in = makeInputs(cs);
        const RmsNormReference ref = oracleOf(cs, in, pool);
        const DType W = weightDtype(t, spec);
        std::vector<Big> dw(size_t(N), Big(0));
        int failures = 0;
        auto admit = [&](const ReferenceTensor& r, int64_t e, const Big& v) {
          const double got = roundToFormat(r.dtype, roundToOddExact(v));
          ++checked;
          if (!(std::fabs(got - r.exact[size_t(e)]) <= r.budget[size_t(e)]) && failures++ < 5)
            ADD_FAILURE() << toCaseString(cs) << "\n  " << budgetElement(r, size_t(e)) << ": a kernel saving the other "
                          << "rounding of rstd gives " << hexFloat(got);
        };
        for (int64_t i = 0; i < cs.M; ++i) {
          // The saved value farthest from round_T(r) among r~ = r +- 2 fp32 ulps.
          const double r = ref.rstd.exact[size_t(i)], rb = roundToFormat(t, r);
          float r32 = float(roundToFormat(DType::F32, r));
          for (int k = 0; k < 2; ++k) r32 = std::nextafter(r32, -INFINITY);
          double saved = rb;
          for (int k = 0; k < 5; ++k, r32 = std::nextafter(r32, INFINITY))
            if (std::fabs(roundToFormat(t, r32) - rb) > std::fabs(saved - rb)) saved = roundToFormat(t, r32);
          alt_rows += saved != rb;
          Big C = 0;
          for (int64_t j = 0; j < N; ++j)
            C += (Big(double(kWeightOffset(spec))) + Big(in.w.value(0, j))) * Big(in.dy.value(i, j)) *
                 Big(in.x.value(i, j));
          C /= Big(N);
          const Big R(saved);
          for (int64_t j = 0; j < N; ++j) {
            const Big v = Big(double(kWeightOffset(spec))) + Big(in.w.value(0, j)), x = in.x.value(i, j);
            admit(ref.dx, i * N + j, R * v * Big(in.dy.value(i, j)) - R * R * R * x * C);
            dw[size_t(j)] += Big(in.dy.value(i, j)) * x * R;
          }
        }
        for (int64_t j = 0; j < N; ++j) admit(ref.dw, j, dw[size_t(j)]);
        EXPECT_EQ(ref.dw.dtype, W);
      }
  RecordProperty("rows_saving_the_other_neighbour", std::to_string(alt_rows));
  RecordProperty("checked", std::to_string(checked));
  EXPECT_GE(alt_rows, 5);
}

// ---------------------------------------------------------------------------
// AllreduceOracle: the residual dtype of its own (res=fp32, quack's
// residual_dtype=torch.float32), at R = 1, the fused residual add + RMSNorm
// of one GPU.

TEST(AllreduceOracle, AnFp32ResidualIsOneFp32AddAndYNormalisesThatSum) {
  ThreadPool pool(2);
  for (const char* shape :
       {"M=4 N=33", "M=3 N=1000 dist=large_mean sigma=0x1p-4 mean=0x1p+3", "M=2 N=64 wdtype=fp32 offset=1"}) {
    const CaseSpec c = parseCaseString(
        fmt::format("op=allreduce_rmsnorm kernel=host_fused_oneshot dtype=bf16 ranks=1 res=fp32 seed=0x5e5 {}", shape));
    const AllreduceRmsNormInputData in = generateAllreduceRmsNormInputs(c, identityRows(c.M));
    ASSERT_EQ(in.residual.dtype, DType::F32);
    const AccuracyContract contract{DType::F32, ReductionDepths{c.N, c.M}};
    const AllreduceRmsNormReference ref = allreduceRmsNormReference(
        AllreduceRmsNormInputs{in.x, in.residual, in.w, c.eps, c.spec}, contract, pool, OracleMode::Fast);
    ASSERT_EQ(ref.residual_out.dtype, DType::F32);
    ASSERT_EQ(ref.y.dtype, DType::BF16);
    // The same inputs under the activation-dtype residual spec, for contrast.
    CaseSpec in_t = c;
    kResidualDtype.set(in_t.spec, std::nullopt);
    HostMatrix residual_t = in.residual;  // the fp32 residual rounded to bf16, as a bf16 residual
    residual_t.dtype = DType::BF16;
    for (size_t e = 0; e < residual_t.bits.size(); ++e)
      residual_t.bits[e] = doubleToBits(DType::BF16, roundToFormat(DType::BF16, in.residual.value(0, int64_t(e))));
    const AllreduceRmsNormReference ref_t = allreduceRmsNormReference(
        AllreduceRmsNormInputs{in.x, residual_t, in.w, c.eps, in_t.spec}, contract, pool, OracleMode::Fast);
    int64_t not_bf16 = 0, y_differs = 0;
    for (int64_t i = 0; i < c.M; ++i) {
      // residual_out = float(x) + float(residual): one fp32 add (IEEE: the
      // correctly rounded sum), determined exactly, budget 0.
      std::vector<double> h(size_t(c.N));
      double ms = 0;
      for (int64_t j = 0; j < c.N; ++j) {
        const float sum = float(in.x[0].value(i, j)) + float(in.residual.value(i, j));
        const int64_t e = i * c.N + j;
        EXPECT_EQ(ref.residual_out.exact[size_t(e)], double(sum)) << toCaseString(c) << " residual_out[" << e << "]";
        EXPECT_EQ(ref.residual_out.budget[size_t(e)], 0.0);
        not_bf16 += roundToFormat(DType::BF16, sum) != double(sum);
        h[size_t(j)] = sum;
        ms += double(sum) * sum;
      }
      // y normalises the fp32 sum, not its bf16 rounding: within 2^-40 of
      // the double evaluation of h r (offset + w).
      const double r = 1.0 / std::sqrt(ms / double(c.N) + double(c.eps));
      for (int64_t j = 0; j < c.N; ++j) {
        const int64_t e = i * c.N + j;
        const double y = h[size_t(j)] * r * (double(kWeightOffset(c.spec)) + in.w.value(0, j));
        EXPECT_NEAR(ref.y.exact[size_t(e)], y, 0x1p-40 * (std::fabs(y) + 1e-30))
            << toCaseString(c) << " y[" << e << "]";
        y_differs += roundToFormat(DType::BF16, ref.y.exact[size_t(e)]) !=
                     roundToFormat(DType::BF16, ref_t.y.exact[size_t(e)]);
      }
    }
    // The fp32 residual stream keeps bits bf16 drops, and y sees them.
    EXPECT_GT(not_bf16 * 2, c.M * c.N) << toCaseString(c);
    EXPECT_GT(y_differs, 0) << toCaseString(c);
  }
}

// acc=T (kRankSum, FlashInfer's fp32_acc=False): the partials added in T one
// rank at a time, in rank order, each add rounded.
TEST(AllreduceOracle, ASumInTheActivationDtypeIsRoundedAfterEachRankInRankOrder) {
  ThreadPool pool(2);
  for (const char* dt : {"bf16", "fp16"})
    for (const char* shape :
         {"M=4 N=257", "M=3 N=1000 dist=large_mean sigma=0x1p-4 mean=0x1p+3", "M=16 N=64 dist=zero_rows"}) {
      const CaseSpec c = parseCaseString(fmt::format(
          "op=allreduce_rmsnorm kernel=host_fused_oneshot dtype={} ranks=4 acc={} seed=0xacc {}", dt, dt, shape));
      const AllreduceRmsNormInputData in = generateAllreduceRmsNormInputs(c, identityRows(c.M));
      const DType T = c.dtype;
      const AccuracyContract contract{DType::F32, ReductionDepths{c.N, c.M}};
      // Audit: the fast path and MPFR compared element by element.
      const AllreduceRmsNormReference ref = allreduceRmsNormReference(
          AllreduceRmsNormInputs{.x = in.x,
                                 .residual = in.residual,
                                 .w = in.w,
                                 .eps = c.eps,
                                 .spec = c.spec,
                                 .sum_in_activation_dtype = true},
          contract, pool, OracleMode::Audit);
      const AllreduceRmsNormReference once = allreduceRmsNormReference(
          AllreduceRmsNormInputs{in.x, in.residual, in.w, c.eps, c.spec}, contract, pool, OracleMode::Fast);
      int64_t differs_from_one_rounding = 0, order_free = 0, budgeted = 0;
      for (int64_t i = 0; i < c.M; ++i)
        for (int64_t j = 0; j < c.N; ++j) {
          // Two values of T add exactly in double but for one rounding, which
          // rounding to T then cannot double (53 >= 2 p_T + 2 bits).
          double s = in.x[0].value(i, j), abs_sum = std::fabs(s), q = INFINITY;
          for (size_t r = 0; r < in.x.size(); ++r) {
            const double v = in.x[r].value(i, j);
            if (r > 0) s = roundToFormat(T, s + v), abs_sum += std::fabs(v);
            if (v != 0.0) q = std::min(q, ulpOf(T, std::fabs(v)));
          }
          const int64_t e = i * c.N + j;
          const double out = roundToFormat(T, s + in.residual.value(i, j));
          ASSERT_EQ(ref.residual_out.exact[size_t(e)], out) << toCaseString(c) << " residual_out[" << e << "]";
          differs_from_one_rounding += once.residual_out.exact[size_t(e)] != out;
          // Bitwise where every order of adds in T is exact; elsewhere a
          // budget that holds the one rounding of the exact sum as well.
          const double budget = ref.residual_out.budget[size_t(e)];
          if (abs_sum == 0.0 || abs_sum / q < 1.0 / unitRoundoff(T)) {
            EXPECT_EQ(budget, 0.0) << toCaseString(c) << " residual_out[" << e << "]";
            ++order_free;
          } else {
            EXPECT_GT(budget, 0.0);
            EXPECT_LE(std::fabs(once.residual_out.exact[size_t(e)] - out), budget);
            ++budgeted;
          }
        }
      EXPECT_GT(differs_from_one_rounding, 0) << toCaseString(c) << ": acc=T is another spec from 3 ranks on";
      // Every order is exact only where A < 2^p_T q: zero rows, seldom random ones.
      EXPECT_GT(budgeted, 0) << toCaseString(c);
      if (std::string(shape).find("zero_rows") != std::string::npos) {
        EXPECT_GT(order_free, 0) << toCaseString(c);
      }
      // Two ranks: one add, the one rounding of the exact sum; the same
      // references as the default spec, budgets included.
      CaseSpec two = c;
      two.ranks = 2;
      const AllreduceRmsNormInputData in2 = generateAllreduceRmsNormInputs(two, identityRows(two.M));
      const AllreduceRmsNormReference t2 = allreduceRmsNormReference(
          AllreduceRmsNormInputs{.x = in2.x,
                                 .residual = in2.residual,
                                 .w = in2.w,
                                 .eps = two.eps,
                                 .spec = two.spec,
                                 .sum_in_activation_dtype = true},
          contract, pool, OracleMode::Fast);
      const AllreduceRmsNormReference f2 = allreduceRmsNormReference(
          AllreduceRmsNormInputs{in2.x, in2.residual, in2.w, two.eps, two.spec}, contract, pool, OracleMode::Fast);
      for (int64_t i = 0; i < two.M; ++i)
        for (int64_t j = 0; j < two.N; ++j) {
          const double s2 = roundToFormat(T, in2.x[0].value(i, j) + in2.x[1].value(i, j));
          ASSERT_EQ(t2.residual_out.exact[size_t(i * two.N + j)], roundToFormat(T, s2 + in2.residual.value(i, j)))
              << toCaseString(two) << " residual_out[" << i << "," << j << "]";
        }
      EXPECT_EQ(t2.residual_out.exact, f2.residual_out.exact);
      EXPECT_EQ(t2.residual_out.budget, f2.residual_out.budget);
      EXPECT_EQ(t2.y.exact, f2.y.exact);
      EXPECT_EQ(t2.y.budget, f2.y.budget);
    }
}

TEST(AllreduceOracle, ARankOrderSumInTheActivationDtypeThatOverflowsIsTheSpecsOwnInfinity) {
  // fp16: 60000 + 10000 overflows in rank order, and -20000 after it leaves
  // +inf; the exact sum is 50000. Column 1 (1 + 0 + 0) is exact in any order.
  ThreadPool pool(1);
  auto row = [](std::vector<double> v) {
    HostMatrix m{DType::F16, 1, int64_t(v.size()), int64_t(v.size()), {}};
    for (double d : v) m.bits.push_back(doubleToBits(DType::F16, d));
    return m;
  };
  const std::vector<HostMatrix> x{row({60000, 1}), row({10000, 0}), row({-20000, 0})};
  const HostMatrix residual = row({1, 2}), w = row({1, 1});
  const CaseSpec c =
      parseCaseString("op=allreduce_rmsnorm kernel=host_fused_oneshot dtype=fp16 M=1 N=2 ranks=3 acc=fp16");
  const AccuracyContract contract{DType::F32, ReductionDepths{c.N, c.M}};
  for (OracleMode mode : {OracleMode::Fast, OracleMode::Mpfr, OracleMode::Audit}) {
    const AllreduceRmsNormReference ref = allreduceRmsNormReference(
        AllreduceRmsNormInputs{
            .x = x, .residual = residual, .w = w, .eps = 1e-6f, .spec = c.spec, .sum_in_activation_dtype = true},
        contract, pool, mode);
    EXPECT_EQ(ref.residual_out.exact[0], INFINITY);
    EXPECT_EQ(ref.residual_out.budget[0], INFINITY) << "any non-finite result, no finite one";
    EXPECT_EQ(ref.residual_out.exact[1], 3.0);
    EXPECT_EQ(ref.residual_out.budget[1], 0.0) << "1 + 0 + 0: a nonzero sum exact in every order";
    // The row's norm: rstd = 1/sqrt(inf) = 0, so y is NaN at the infinity
    // and 0 beside it, and the infinite budget reaches no budget of y.
    EXPECT_TRUE(std::isnan(ref.y.exact[0]));
    EXPECT_EQ(ref.y.exact[1], 0.0);
    EXPECT_FALSE(std::isnan(ref.y.budget[1]));
  }
  const AllreduceRmsNormReference once = allreduceRmsNormReference(
      AllreduceRmsNormInputs{x, residual, w, 1e-6f, c.spec}, contract, pool, OracleMode::Fast);
  EXPECT_TRUE(std::isfinite(once.residual_out.exact[0])) << "one rounding of the exact sum does not overflow";
}

}  // namespace
}  // namespace ulpcheck
