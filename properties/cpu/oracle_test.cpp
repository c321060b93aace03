// Self-checks of the RMSNorm MPFR oracle (oracles/rmsnorm.cpp). Every check
// compares it with something computed another way, so a wrong formula, a lost
// bit in the round-to-odd conversion or a thread-dependent sum shows up here
// before it silently passes or fails kernels:
//   OracleCrossCheck        an independent Boost.Multiprecision RMSNorm
//   OracleFiniteDifference  dx, dw against central differences of the loss
//   OracleThreads           bitwise the same result on 1, 3 and 4 threads
//   OracleRoundToOdd        round-to-odd then roundToFormat == direct rounding
//   OracleBudget            budgets finite, positive and not absurdly loose
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness/core/buffer.h"
#include "harness/core/case_spec.h"
#include "harness/core/datagen.h"
#include "harness/core/parallel.h"
#include "oracles/mpfr_util.h"
#include "oracles/rmsnorm.h"
#include "oracles/tolerances.h"
#include "properties/cpu/oracle_test_support.h"
#include "properties/generators.h"
#include "properties/rmsnorm_inputs.h"

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
  return rmsnormReference(RmsNormInputs{in.x, in.w, in.dy, c.eps}, contract, pool);
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

/// `per_combination` cases for every dtype x every distribution: the coverage
/// is guaranteed rather than left to chance. A fixed seed keeps the suite
/// reproducible; `shape` may shrink the shape (keeping the padding).
template <typename Shape>
std::vector<CaseSpec> coverageCases(uint64_t seed, int per_combination, Shape shape) {
  rc::Random random(seed);
  std::vector<CaseSpec> cases;
  for (DType t : kAllDTypes)
    for (int d = 0; d < static_cast<int>(Dist::kCount); ++d)
      for (int k = 0; k < per_combination; ++k) {
        CaseSpec c = drawCase(random, t, static_cast<Dist>(d));
        shape(c);
        validateCase(c);  // throws (failing the test) if the forced combination is not a valid case
        cases.push_back(c);
      }
  return cases;
}

// ---------------------------------------------------------------------------
// OracleCrossCheck

/// RMSNorm forward and backward written the textbook way in Boost (plain
/// left-to-right sums, 1/sqrt, the r^3 form of dx), independent of the
/// oracle's mpfr_sum / rec_sqrt / r (a - xhat c) formulation. Returns failures.
std::vector<std::string> crossCheck(const CaseSpec& c, const Inputs& in, const RmsNormReference& ref,
                                    Agreement& agreement) {
  const int64_t M = c.M, N = c.N;
  std::vector<std::string> failures;
  auto note = [&](std::string s) {
    if (!s.empty() && failures.size() < 5) failures.push_back(std::move(s));
  };
  std::vector<Big> dw(N, Big(0));
  std::vector<double> dw_scale(N, 0.0);
  for (int64_t i = 0; i < M; ++i) {
    Big sum_sq = 0, sum_wdyx = 0;
    double sum_abs = 0;
    for (int64_t j = 0; j < N; ++j) {
      const Big x = in.x.value(i, j), w = in.w.value(0, j), dy = in.dy.value(i, j);
      sum_sq += x * x;
      sum_wdyx += w * dy * x;
      sum_abs += std::fabs(in.w.value(0, j) * in.dy.value(i, j) * in.x.value(i, j));
    }
    const Big r = 1 / bmp::sqrt(sum_sq / N + Big(double(c.eps)));
    const Big c_row = r * sum_wdyx / N;  // c = (1/N) sum_j w_j dy_j xhat_j
    const Big r3_mean = r * r * c_row;   // r^3 (1/N) sum_j w_j dy_j x_j
    const double rd = r.convert_to<double>(), cd = bmp::abs(c_row).convert_to<double>();
    note(agreement.check("rstd", i, ref.rstd.exact[i], r, rd));
    for (int64_t j = 0; j < N; ++j) {
      const double xv = in.x.value(i, j), wv = in.w.value(0, j), dyv = in.dy.value(i, j);
      const Big x = xv, w = wv, dy = dyv;
      const int64_t e = i * N + j;
      const Big y = x * r * w;
      note(agreement.check("y", e, ref.y.exact[e], y, bmp::abs(y).convert_to<double>()));
      const Big dx = r * w * dy - r3_mean * x;
      // dx cancels: the scale is its terms, r (|w dy| + |xhat| (|c| + m)) with
      // c = r/N sum w dy x and m = r/N sum |w dy x| (a bound on c's error).
      const double xhat = xv * rd;
      const double scale_dx = rd * (std::fabs(wv * dyv) + std::fabs(xhat) * (cd + rd * sum_abs / double(N))) + DBL_MIN;
      note(agreement.check("dx", e, ref.dx.exact[e], dx, scale_dx));
      dw[j] += dy * x * r;
      dw_scale[j] += std::fabs(dyv * xhat);
    }
  }
  for (int64_t j = 0; j < N; ++j) note(agreement.check("dw", j, ref.dw.exact[j], dw[j], dw_scale[j]));
  return failures;
}

TEST(OracleCrossCheck, MatchesBoostForEveryDTypeAndDistribution) {
  const std::vector<CaseSpec> cases = coverageCases(0x0aac1e5eedULL, 4, [](CaseSpec&) {});
  Agreement agreement;
  ThreadPool pool(2);
  for (const CaseSpec& c : cases) {
    const Inputs in = makeInputs(c);
    const RmsNormReference ref = oracleOf(c, in, pool);
    const auto failures = crossCheck(c, in, ref, agreement);
    for (const auto& f : failures) ADD_FAILURE() << toCaseString(c) << "\n  " << f;
  }
  // The bitwise comparison must really have been made, not skipped as
  // undecidable: besides exact zeros, only values within ~2^-87 relative of a
  // double are undecided.
  RecordProperty("nonzero_elements", std::to_string(agreement.nonzero));
  RecordProperty("bitwise_elements", std::to_string(agreement.bitwise));
  EXPECT_GT(agreement.bitwise, agreement.nonzero * 99 / 100)
      << agreement.bitwise << " of " << agreement.nonzero << " nonzero elements compared bitwise";
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

// ---------------------------------------------------------------------------
// OracleFiniteDifference

/// Row loss L_i = sum_j dy_j y_j = (sum_j dy_j x_j w_j) / sqrt(sum_j x_j^2 / N + eps)
/// at kFdBits, in plain sums (not the oracle's mpfr_sum / rec_sqrt).
void rowLoss(mpfr_ptr out, mp::RealArray& x, mp::RealArray& w, const std::vector<double>& dy, double eps,
             mp::Real& s, mp::Real& t) {
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
    mpfr_mul(t, x[j], w[j], MPFR_RNDN);
    mpfr_mul_d(t, t, dy[j], MPFR_RNDN);
    mpfr_add(out, out, t, MPFR_RNDN);
  }
  mpfr_div(out, out, s, MPFR_RNDN);
}

TEST(OracleFiniteDifference, GradientsMatchCentralDifferencesOfTheLoss) {
  const std::vector<CaseSpec> cases = coverageCases(0xfd0f10551ULL, 10, [](CaseSpec& c) {
    const int64_t pad = c.ld - c.N;
    c.M = 1 + (c.M - 1) % 4;
    c.N = 1 + (c.N - 1) % 17;
    c.ld = c.N + pad;
  });
  ThreadPool pool(1);
  int64_t compared = 0;
  for (const CaseSpec& c : cases) {
    const Inputs in = makeInputs(c);
    const RmsNormReference ref = oracleOf(c, in, pool);
    const int64_t M = c.M, N = c.N;
    const double eps = c.eps;
    std::vector<std::unique_ptr<mp::RealArray>> x;  // the whole input at kFdBits, perturbed in place
    std::vector<std::vector<double>> dy(M, std::vector<double>(N));
    mp::RealArray w(N, kFdBits);
    for (int64_t j = 0; j < N; ++j) mpfr_set_d(w[j], in.w.value(0, j), MPFR_RNDN);
    for (int64_t i = 0; i < M; ++i) {
      x.push_back(std::make_unique<mp::RealArray>(N, kFdBits));
      for (int64_t j = 0; j < N; ++j) {
        mpfr_set_d((*x[i])[j], in.x.value(i, j), MPFR_RNDN);
        dy[i][j] = in.dy.value(i, j);
      }
    }
    mp::Real s(kFdBits), t(kFdBits), lp(kFdBits), lm(kFdBits), fd(kFdBits), row_scale(kFdBits), row_loss(kFdBits);
    std::vector<std::string> failures;
    auto note = [&](std::string f) {
      ++compared;
      if (!f.empty() && failures.size() < 5) failures.push_back(std::move(f));
    };
    std::vector<double> dw_scale(N, 0.0);
    for (int64_t i = 0; i < M; ++i) {
      // sqrt(mean x^2 + eps) of the unperturbed row: the step is 2^-100 of it.
      rowLoss(row_loss, *x[i], w, dy[i], eps, row_scale, t);
      const mpfr_exp_t h_exp = mpfr_get_exp(row_scale) + kFdStepLog2;
      const double r = 1.0 / mpfr_get_d(row_scale, MPFR_RNDN);
      double m = 0;  // (1/N) sum_j |w_j dy_j xhat_j|
      for (int64_t j = 0; j < N; ++j) m += std::fabs(in.w.value(0, j) * dy[i][j] * in.x.value(i, j) * r) / double(N);
      for (int64_t j = 0; j < N; ++j) {
        const double xv = in.x.value(i, j), a = in.w.value(0, j) * dy[i][j];
        centralDifference(
            fd, (*x[i])[j], xv, h_exp, [&](mp::Real& out) { rowLoss(out, *x[i], w, dy[i], eps, s, t); }, lp, lm);
        // dx = r (a - xhat c) with |c| <= m: its terms bound the scale. The
        // extra r m covers the 400-bit rounding of L (~N^2 2^-301 r m) where
        // x_j = a_j = 0 makes the derivative exactly 0 but L is not.
        const double scale = r * (std::fabs(a) + 2.0 * std::fabs(xv * r) * m + m);
        note(compareFd("dx", i, j, fd, ref.dx.exact[i * N + j], scale));
        dw_scale[j] += std::fabs(dy[i][j] * xv * r);
      }
    }
    auto total_loss = [&](mp::Real& out) {
      mpfr_set_zero(out, 1);
      for (int64_t i = 0; i < M; ++i) {
        rowLoss(row_loss, *x[i], w, dy[i], eps, s, t);
        mpfr_add(out, out, row_loss, MPFR_RNDN);
      }
    };
    for (int64_t j = 0; j < N; ++j) {
      // L is linear in w_j: the central difference is exact up to rounding for any h.
      const double wv = in.w.value(0, j);
      const mpfr_exp_t h_exp = (wv == 0.0 ? 0 : std::ilogb(wv) + 1) + kFdStepLog2;
      mp::Real g(kFdBits);
      centralDifference(g, w[j], wv, h_exp, total_loss, lp, lm);
      note(compareFd("dw", 0, j, g, ref.dw.exact[j], dw_scale[j]));
    }
    for (const auto& f : failures) ADD_FAILURE() << toCaseString(c) << "\n  " << f;
  }
  RecordProperty("compared", std::to_string(compared));
  EXPECT_GT(compared, 1000);
}

// ---------------------------------------------------------------------------
// OracleThreads

TEST(OracleThreads, ResultDoesNotDependOnTheThreadCount) {
  // M >= 70 spreads rows over the oracle's 64 fixed dW chunks unevenly (1 to
  // 5 rows each); the thread counts then split those chunks differently.
  const struct {
    DType t;
    int64_t M, N, ld;
    DistParams x;
  } shapes[] = {
      {DType::F32, 70, 37, 41, {Dist::Normal, 1.0, 0.0}},
      {DType::BF16, 133, 65, 65, {Dist::OutlierChannels, 0.5, 0.0}},
      {DType::F16, 257, 19, 24, {Dist::LargeMean, 4.0, 1024.0}},
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

TEST(OracleBudget, FinitePositiveAndNotAbsurdlyLoose) {
  const std::vector<CaseSpec> cases = coverageCases(0xb0d9e7ULL, 3, [](CaseSpec& c) {
    const int64_t pad = c.ld - c.N;
    c.N = 1 + (c.N - 1) % 64;  // small N: depth D_row = N keeps the relative budget tiny
    c.ld = c.N + pad;
  });
  ThreadPool pool(2);
  const double eta = tolerance::kBudgetSafety * tolerance::kUnderflowHalfUlps * minSubnormal(DType::F32);
  int64_t overflowing = 0;  // exact values whose correctly rounded result is Inf (fp16 dx of tiny rows)
  for (const CaseSpec& c : cases) {
    const Inputs in = makeInputs(c);
    const RmsNormReference ref = oracleOf(c, in, pool);
    int failures = 0;
    for (const ReferenceTensor* r : {&ref.y, &ref.rstd, &ref.dx, &ref.dw}) {
      ASSERT_EQ(r->budget.size(), size_t(r->rows * r->cols));
      for (size_t e = 0; e < r->budget.size() && failures < 5; ++e) {
        bool ok = budgetAdmitsCorrectlyRounded(*r, e, overflowing);
        if (r == &ref.y || r == &ref.rstd) {
          // Upper bound: 0.5 ulp of a possibly twice larger binade, a loose
          // relative term, and twice the underflow term K eta (1 + |w| + r) (G_rstd = 0).
          const bool y = r == &ref.y;
          const double w = y ? std::fabs(in.w.value(0, int64_t(e) % c.N)) : 0.0, exact = r->exact[e];
          const double rstd = y ? ref.rstd.exact[e / size_t(c.N)] : 0.0;
          const double limit = ulpOf(r->dtype, std::fabs(exact)) + kBudgetLooseRelative * std::fabs(exact) +
                               2.0 * eta * (1.0 + w + rstd);
          ok = ok && r->budget[e] <= limit;
        }
        if (!ok) {
          ++failures;
          ADD_FAILURE() << toCaseString(c) << "\n  " << budgetElement(*r, e);
        }
      }
    }
  }
  RecordProperty("overflowing_elements", std::to_string(overflowing));
}

}  // namespace
}  // namespace ulpcheck
