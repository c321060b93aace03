// MPFR oracle of LayerNorm, and the derivation of its error budget.
//
// ---------------------------------------------------------------------------
// The exact values
//
// Inputs are values of the storage format T (at most 24 significand bits).
// The mean is a correctly rounded mpfr_sum of the inputs divided by N at 160
// bits; deviations d_j = x_j - mean, their squares, rstd, xhat, y, the
// backward's row sums and dx are 160-bit operations on those, so each result
// is within a few 2^-160 of its exact value relative to the magnitudes it is
// made of. dgamma and dbeta are summed over rows at 256 bits in a fixed
// chunking (oracles/column_sum.h). Every result goes to double with
// round-to-odd, so rounding that double to T is the correctly rounded value.
//
// ---------------------------------------------------------------------------
// The budget: a forward error analysis of the algorithm every conforming
// kernel runs (layernorm_cuda.cu: two-pass statistics, fp32 accumulation),
// with u = unit roundoff of the declared accumulation precision, D = D_row and
// D_c = D_col the declared reduction depths (a sum of depth D has error
// <= D u sum|terms|), eta = half the smallest subnormal (error of a rounding
// that lands in the subnormal range), K = kBudgetSafety on every term. Per row,
// with A = mean_j |x_j|:
//
//   mean~ = fl(fl-sum_j x_j / N)            |mean~ - mean| <= Dm := K ((D + 1) u A + eta)
//
// unless the variant declares its mean one correctly rounded fp32 division of
// a plain fp32 sum (ReductionDepths::mean_is_rounded_quotient: ulpcheck's own
// kernels; a black box may round more often) and the row's sum is exact in
// fp32 in any order: every x_j is a multiple
// of q = the smallest ulp (in T) among the row's values, so every partial sum
// is k q with |k| <= A N / q, exact in fp32 while that is below 2^24. Then
// mean~ = fl(S / N) is the exact mean rounded once to fp32 (a correctly
// rounded divide by N, exact in fp32 for N < 2^24), and Dm is that rounding's
// exact size: 0 for a constant row, whose deviations, variance and xhat are
// then exactly 0 (y = beta), and ~ u |mean| for 16-bit rows of large mean,
// which the general bound overstates (D + 1)-fold.
//   d~_j  = fl(x_j - mean~)                 |d~_j - d_j|  <= Dd_j := Dm + K u (|d_j| + Dm)
//
// The variance is where LayerNorm kernels break, and why two passes: with
// d~_j = d_j + e_j, sum_j d~_j^2 = sum d_j^2 + 2 sum d_j e_j + sum e_j^2, and
// the mean's error enters e_j as a common shift whose cross term vanishes
// (sum_j d_j = 0 exactly), leaving 2 u sum d_j^2 + 2 u Dm sum|d_j| for the
// roundings of d~ and the second-order sum e_j^2. So with A_d = mean_j |d_j|:
//
//   |V~ - V| <= DV := K [(D + 4) u V + 2 u Dm A_d + eta] + (1 + K (D + 1) u) mean_j(Dd_j^2)
//
// for V = var + eps (depth-D fma sum of squares, the division, adding eps).
// mean_j(Dd_j^2) ~ (D u |mean|)^2 is what a large mean costs: at
// |mean| / std = 2^20 no fp32 kernel knows rstd to better than a few percent,
// and the budget says so instead of failing it. A one-pass E[x^2] - E[x]^2
// kernel errs by ~ D u mean^2, orders of magnitude beyond DV there.
//
// A variant that does not declare two-pass statistics (ReductionDepths::
// two_pass_statistics: ulpcheck's own kernels and Liger's do; PyTorch's
// CUDA LayerNorm does not) may use running means instead: Welford's m_k = m_{k-1} +
// (x_k - m_{k-1}) / k and M2 += (x_k - m_{k-1})(x_k - m_k), or Chan's merges
// M2 = M2_a + M2_b + delta^2 n_a n_b / n. Each x_k then meets a different
// rounded mean, of error at most Dm_run := K ((D + 1) u max_j |x_j| + eta),
// and every product carries it once per factor: N Dm_run (2 A_d + 2 max|d|)
// over Welford's steps, and sum over merges of 2 |delta| Dm_run n_a n_b / n
// <= Dm_run max|d| N log2 N over a tree of merges (|delta| <= 2 max|d|). So
//   DV += K Dm_run (2 A_d + (2 + ceil(log2 N)) max_j |d_j|).
// That is ~ D u |mean| sigma: a one-pass variance (~ D u mean^2) still
// exceeds it by about |mean| / sigma / log2 N.
//
// rstd~ = rsqrtf(V~) is bounded without linearising (DV/V need not be small):
// V~ lies in [max(V - DV, eps), V + DV] (V~ >= fl(0 + eps) = eps since the
// sum of squares is >= 0), rsqrtf adds kRsqrtUnits u relative, so
//   rstd~ in [r_lo, r_hi] = [(V + DV)^-1/2 (1 - K 4u), max(V - DV, eps)^-1/2 (1 + K 4u)]
//   Dr := max(r_hi - r, r - r_lo)
//
//   xhat~_j = fl(d~_j rstd~)    Dx_j := r_hi Dd_j + |d_j| Dr + K u (|d_j| + Dd_j) r_hi
//   y~_j = fl(xhat~ g_j + b_j)  (one fma)
//       |y~ - y| <= |g_j| Dx_j + K u (|y_j| + |g_j| Dx_j) + K eta (1 + r)
//   (eta r: a kernel that forms d g before the product with r has that
//   product's underflow amplified by r; likewise dgamma's (dy d) r below)
//
// Backward (it uses the mean~ and rstd~ its forward saved), a = g dy:
//   a~_j = fl(dy_j g_j)               Da_j := K (u |a_j| + eta)
//   c1~ = fl(fl-sum a~ / N)           Dc1 := K (D + 1) u P1 + mean_j Da_j,      P1 = mean_j |a_j|
//   c2~ = fl(fl-sum fma(a~, xhat~) / N)
//       Dc2 := mean_j(|a_j| Dx_j + (|xhat_j| + Dx_j) Da_j) + K [(D + 1) u (P2 + mean_j |a_j| Dx_j) + 2 eta]
//                                                                                P2 = mean_j |a_j xhat_j|
//   inner~ = fma(-xhat~, c2~, fl(a~ - c1~)),   inner = a - c1 - xhat c2
//       Di_j := Da_j + Dc1 + (|xhat_j| + Dx_j) Dc2 + |c2| Dx_j + K [u (2 (|a_j| + |c1|) + |xhat_j c2|) + 2 eta]
//   dx~ = fl(rstd~ inner~)
//       |dx~ - dx| <= r_hi Di_j + |inner_j| Dr + K [u r_hi (|inner_j| + Di_j) + eta]
//   dgamma_j = sum_i dy_ij xhat~_ij (fma chain, column depth D_c)
//       error <= sum_i |dy_ij| Dx_ij + K [D_c u sum_i |dy_ij xhat_ij| + (M + D_c) eta + eta sum_i r_i]
//   dbeta_j = sum_i dy_ij             error <= K D_c u sum_i |dy_ij|   (adds of fp32 values: no underflow error)
//   and if the column reduction flushes subnormals (fp32 atomics), each of
//   its D_c adds may lose up to the smallest normal: + K D_c 2^-126 on both.
//   Where the variant fixes the order of the column sums (ColumnOrder), the
//   rounding part is bounded instead by the exact partial sums of that tree
//   (oracles/column_sum.h), F = u (1 + u)^D_c, the smaller bound winning:
//   dgamma error <= K F (sum_v |s_v| + D_c tau) + tau + K adds eta,   tau = sum_i |dy_ij| Dx_ij
//   dbeta error  <= K F sum_v |s_v|                                  (exact leaves, no underflow)
//
// Saved statistics in the activation dtype (stats=T, Liger's LayerNorm up
// to at least 0.8.2): the forward computes y with its fp32 mean~ and rstd~ as above
// but saves round_T of each, judged against the exact mean and rstd with
// that rounding on top. The backward's spec is the one above taken at the
// saved values: mean_b = round_T(mean), r_b = round_T(rstd), x-hat rebuilt as
// (x - mean_b) r_b, dx = r_b (a - c1 - xhat_b c2_b), dgamma = sum dy xhat_b.
// A correct kernel's mean~ (within Dm) and rstd~ (within Dr) may round to a
// neighbour of mean_b or r_b where that interval holds a rounding boundary
// of T; the distances (the rounding points' spreads S_m and S_r) take the
// place of Dm and Dr in the backward's terms, and r_hi becomes r_b + S_r.
// Where neither straddles a boundary (almost every row) the kernel consumes
// mean_b and r_b exactly and only its own backward arithmetic is budgeted.
//
// Each output's budget is then budgetFromError(e) = e + 0.5 ulp_T(|exact| + e)
// (oracles/reference.h): the final rounding to T comes on top (to gamma's
// dtype W for dgamma and dbeta: fp32 beside 16-bit x in mixed precision;
// gamma and beta enter the products above exactly whatever their dtype). The terms in Dx
// that carry Dm (the mean's error) make the budget condition-aware: y, dx and
// dgamma of a row with |mean| >> std may be far from the correctly rounded
// value and still be as right as fp32 statistics allow; a kernel whose mean
// or variance is wrong by more (masked lanes counted, a one-pass variance, a
// bf16 accumulator) exceeds it.
#include "oracles/layernorm.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "oracles/column_sum.h"
#include "oracles/oracle_mode.h"
#include "oracles/mpfr_util.h"

namespace ulpcheck {

namespace {

using mp::Real;
using mp::RealArray;
using mp::roundingPoint;
using mp::RoundingPoint;
using mp::toDoubleRoundToOdd;

constexpr mpfr_prec_t kPrec = tolerance::kOraclePrecisionBits;
constexpr mpfr_prec_t kAccPrec = tolerance::kOracleAccumulatorBits;

/// Scratch of one worker, reused across its rows.
struct RowScratch {
  explicit RowScratch(int64_t N)
      : values(N, 53), dev(N, kPrec), squares(N, kPrec), products(N, kPrec), mean(kPrec), r(kPrec), c1(kPrec),
        c2(kPrec), t(kPrec), out(kPrec), acc_term(kAccPrec) {}
  RealArray values;    // x_j (exact), then a_j = g_j dy_j (exact: 48-bit products)
  RealArray dev;       // d_j = x_j - mean
  RealArray squares;   // d_j^2
  RealArray products;  // xhat_j = d_j r, then a_j xhat_j
  Real mean, r, c1, c2, t, out, acc_term;
  std::vector<double> d, dd, dxh, xhat;  // per column: d_j, Dd_j, Dx_j, xhat_j as doubles
};

}  // namespace

LayerNormReference layernormReference(const LayerNormInputs& in, const AccuracyContract& contract, ThreadPool& pool) {
  oracleCounts().mpfr_only += in.x.rows * (2 * in.x.cols + 2) + 2 * in.x.cols;  // no fast path yet (oracle_mode.h)
  const HostMatrix& x = in.x;
  const int64_t M = x.rows, N = x.cols;
  const DType T = x.dtype;
  const DType W = in.gamma.dtype;  // gamma, beta, dgamma, dbeta: T, or fp32 beside 16-bit x
  const DType acc = contract.accumulation;
  const double u = unitRoundoff(acc), K = tolerance::kBudgetSafety;
  const double eta = tolerance::kUnderflowHalfUlps * minSubnormal(acc);
  const double D = double(contract.depths.row), Dc = double(contract.depths.col);
  const double eps = double(in.eps);

  // stats=T: mean and rstd saved in T, the backward taken at the saved values.
  const DType S = statsDtype(in.spec);
  const bool stats_in_T = S != DType::F32;
  LayerNormReference ref{ReferenceTensor::zeros("y", T, M, N, true),
                         ReferenceTensor::zeros("mean", S, M, 1, true),
                         ReferenceTensor::zeros("rstd", S, M, 1, true),
                         ReferenceTensor::zeros("dx", T, M, N, true),
                         ReferenceTensor::zeros("dgamma", W, 1, N, false),
                         mp::biasGradientReference("dbeta", in.dy, W, contract, pool)};
  // Magnitudes (the sizes of the terms; see ReferenceTensor::magnitude):
  // y = xhat gamma + beta: |xhat gamma| + |beta|; dx = r (a - c1 - xhat c2):
  // r (|a| + |c1| + |xhat c2|); the column sums sqrt(sum of squared terms).
  // The mean: sqrt(sum_j x_j^2) / N.
  for (ReferenceTensor* t : {&ref.y, &ref.mean, &ref.dx, &ref.dgamma}) t->withMagnitudes();

  std::vector<double> gamma(N), beta(N);
  for (int64_t j = 0; j < N; ++j) {
    gamma[j] = in.gamma.value(0, j);
    beta[j] = in.beta.value(0, j);
  }

  // Column sums over rows: dgamma (abs_terms = sum |dy xhat|, gain = the
  // propagated xhat error sum |dy| Dx); dbeta, sum |dy|, is made above.
  const int64_t chunks = mp::columnChunkCount(M, N);
  mp::ColumnSumChunks dgamma_chunks(chunks);
  // The mean and rstd the backward consumes, as doubles (exact ones rounded
  // to odd, or the saved T values), for the ordered column bounds.
  std::vector<double> mean_backward(static_cast<size_t>(M)), rstd_backward(static_cast<size_t>(M));

  pool.forChunks(chunks, [&](unsigned, int64_t chunk_begin, int64_t chunk_end) {
    RowScratch sc(N);
    sc.d.resize(N);
    sc.dd.resize(N);
    sc.dxh.resize(N);
    sc.xhat.resize(N);
    for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk) {
      auto dgc = std::make_unique<mp::ColumnSumChunk>(N);
      const int64_t row_begin = M * chunk / chunks, row_end = M * (chunk + 1) / chunks;
      for (int64_t i = row_begin; i < row_end; ++i) {
        // mean, deviations, variance, rstd.
        double abs_x = 0.0, sq_x = 0.0, max_x = 0.0;
        for (int64_t j = 0; j < N; ++j) {
          mpfr_set_d(sc.values[j], x.value(i, j), MPFR_RNDN);
          abs_x += std::fabs(x.value(i, j));
          max_x = std::max(max_x, std::fabs(x.value(i, j)));
          sq_x += x.value(i, j) * x.value(i, j);
        }
        ref.mean.magnitude[i] = std::sqrt(sq_x) / double(N);
        sc.values.sum(sc.mean, N);
        mpfr_div_si(sc.mean, sc.mean, long(N), MPFR_RNDN);
        double abs_d = 0.0, max_d = 0.0;
        for (int64_t j = 0; j < N; ++j) {
          mpfr_d_sub(sc.dev[j], x.value(i, j), sc.mean, MPFR_RNDN);
          mpfr_sqr(sc.squares[j], sc.dev[j], MPFR_RNDN);
          sc.d[j] = mpfr_get_d(sc.dev[j], MPFR_RNDN);
          abs_d += std::fabs(sc.d[j]);
          max_d = std::max(max_d, std::fabs(sc.d[j]));
        }
        sc.squares.sum(sc.t, N);
        mpfr_div_si(sc.t, sc.t, long(N), MPFR_RNDN);
        mpfr_add_d(sc.t, sc.t, eps, MPFR_RNDN);  // V = var + eps
        const double V = mpfr_get_d(sc.t, MPFR_RNDN);
        mpfr_rec_sqrt(sc.r, sc.t, MPFR_RNDN);
        double r = mpfr_get_d(sc.r, MPFR_RNDN);

        ref.mean.exact[i] = toDoubleRoundToOdd(sc.mean);
        ref.rstd.exact[i] = toDoubleRoundToOdd(sc.r);

        // The statistics' error bounds (see the derivation above).
        const double A = abs_x / double(N), A_d = abs_d / double(N);
        double q = INFINITY;  // the smallest ulp among the row's values
        for (int64_t j = 0; j < N; ++j)
          if (x.value(i, j) != 0.0) q = std::min(q, ulpOf(T, x.value(i, j)));
        const bool exact_sum = contract.depths.mean_is_rounded_quotient && acc == DType::F32 && double(N) < 0x1p24 &&
                               abs_x < 0x1p24 * q;
        // The round-to-odd double rounds to fp32 as the exact mean does, and
        // is within 2^-52 of it.
        const double mean_odd = ref.mean.exact[i];
        const double Dm = !exact_sum ? K * ((D + 1.0) * u * A + eta)
                                     : std::fabs(roundToFormat(DType::F32, mean_odd) - mean_odd) +
                                           0x1p-52 * std::fabs(mean_odd);
        double mean_dd2 = 0.0;
        for (int64_t j = 0; j < N; ++j) {
          sc.dd[j] = Dm + K * u * (std::fabs(sc.d[j]) + Dm);
          mean_dd2 += sc.dd[j] * sc.dd[j];
        }
        mean_dd2 /= double(N);
        double DV = K * ((D + 4.0) * u * V + 2.0 * u * Dm * A_d + eta) + (1.0 + K * (D + 1.0) * u) * mean_dd2;
        if (!contract.depths.two_pass_statistics) {
          // Running means (Welford, Chan's merges: PyTorch's CUDA LayerNorm)
          // subtract a different rounded mean from each x_j, so the mean's
          // error is no common shift and its cross term stays (see above).
          const double Dm_run = K * ((D + 1.0) * u * max_x + eta);
          DV += K * Dm_run * (2.0 * A_d + (2.0 + std::ceil(std::log2(double(N)))) * max_d);
        }
        const double rsqrt_rel = K * tolerance::kRsqrtUnits * u;
        double r_hi = (1.0 + rsqrt_rel) / std::sqrt(std::max(V - DV, eps));
        const double r_lo = (1.0 - rsqrt_rel) / std::sqrt(V + DV);
        double Dr = std::max(r_hi - r, r - r_lo);
        ref.mean.budget[i] = budgetFromError(S, ref.mean.exact[i], Dm);
        ref.rstd.budget[i] = budgetFromError(S, ref.rstd.exact[i], Dr);

        // x-hat_j = d_j r with its error bound Dx_j, and y_j from it.
        auto xhatAndY = [&](int64_t j, bool with_y) {
          const double ad = std::fabs(sc.d[j]);
          sc.dxh[j] = r_hi * sc.dd[j] + ad * Dr + K * u * (ad + sc.dd[j]) * r_hi;
          mpfr_mul(sc.products[j], sc.dev[j], sc.r, MPFR_RNDN);  // xhat
          sc.xhat[j] = mpfr_get_d(sc.products[j], MPFR_RNDN);
          if (!with_y) return;
          const int64_t e = i * N + j;
          mpfr_mul_d(sc.out, sc.products[j], gamma[j], MPFR_RNDN);
          mpfr_add_d(sc.out, sc.out, beta[j], MPFR_RNDN);
          ref.y.exact[e] = toDoubleRoundToOdd(sc.out);
          const double ag = std::fabs(gamma[j]);
          ref.y.budget[e] = budgetFromError(
              T, ref.y.exact[e],
              ag * sc.dxh[j] + K * (u * (std::fabs(ref.y.exact[e]) + ag * sc.dxh[j]) + eta * (1.0 + r)));
          ref.y.magnitude[e] = std::fabs(sc.xhat[j] * gamma[j]) + std::fabs(beta[j]);
        };
        mean_backward[size_t(i)] = ref.mean.exact[i];
        rstd_backward[size_t(i)] = ref.rstd.exact[i];
        if (stats_in_T) {
          // y from the fp32 statistics, then the row rebased on the saved
          // round_T(mean), round_T(rstd) with their spreads (see above).
          for (int64_t j = 0; j < N; ++j) xhatAndY(j, true);
          const RoundingPoint mean_b = roundingPoint(T, sc.mean, Dm), rstd_b = roundingPoint(T, sc.r, Dr);
          mpfr_set_d(sc.mean, mean_b.spec, MPFR_RNDN);
          mpfr_set_d(sc.r, rstd_b.spec, MPFR_RNDN);
          r = rstd_b.spec;
          Dr = rstd_b.spread;
          r_hi = r + Dr;
          for (int64_t j = 0; j < N; ++j) {
            mpfr_d_sub(sc.dev[j], x.value(i, j), sc.mean, MPFR_RNDN);  // exact: two T values
            sc.d[j] = mpfr_get_d(sc.dev[j], MPFR_RNDN);
            sc.dd[j] = mean_b.spread + K * u * (std::fabs(sc.d[j]) + mean_b.spread);
          }
          mean_backward[size_t(i)] = mean_b.spec;
          rstd_backward[size_t(i)] = rstd_b.spec;
        }

        // The backward's xhat (and y, unless done above); a = g dy and the row sums c1, c2.
        double p1 = 0.0, p2 = 0.0, a_dx = 0.0, da_sum = 0.0, dc2_prop = 0.0;
        for (int64_t j = 0; j < N; ++j) {
          xhatAndY(j, !stats_in_T);
          const double a = gamma[j] * in.dy.value(i, j);  // exact
          const double da = K * (u * std::fabs(a) + eta);
          p1 += std::fabs(a);
          p2 += std::fabs(a * sc.xhat[j]);
          a_dx += std::fabs(a) * sc.dxh[j];
          da_sum += da;
          dc2_prop += std::fabs(a) * sc.dxh[j] + (std::fabs(sc.xhat[j]) + sc.dxh[j]) * da;
          mpfr_set_d(sc.values[j], a, MPFR_RNDN);
        }
        sc.values.sum(sc.c1, N);
        mpfr_div_si(sc.c1, sc.c1, long(N), MPFR_RNDN);
        for (int64_t j = 0; j < N; ++j) mpfr_mul(sc.products[j], sc.products[j], sc.values[j], MPFR_RNDN);  // a xhat
        sc.products.sum(sc.c2, N);
        mpfr_div_si(sc.c2, sc.c2, long(N), MPFR_RNDN);
        const double c1 = mpfr_get_d(sc.c1, MPFR_RNDN), c2 = mpfr_get_d(sc.c2, MPFR_RNDN);
        const double n = double(N);
        const double Dc1 = K * (D + 1.0) * u * (p1 / n) + da_sum / n;
        const double Dc2 = dc2_prop / n + K * ((D + 1.0) * u * (p2 / n + a_dx / n) + 2.0 * eta);

        for (int64_t j = 0; j < N; ++j) {
          const double dyv = in.dy.value(i, j), a = gamma[j] * dyv;
          const double xh = sc.xhat[j], Dx = sc.dxh[j];
          const int64_t e = i * N + j;
          // dx = r (a - c1 - xhat c2)
          mpfr_mul(sc.t, sc.dev[j], sc.r, MPFR_RNDN);  // xhat
          mpfr_mul(sc.t, sc.t, sc.c2, MPFR_RNDN);
          mpfr_d_sub(sc.out, a, sc.c1, MPFR_RNDN);
          mpfr_sub(sc.out, sc.out, sc.t, MPFR_RNDN);
          const double inner = mpfr_get_d(sc.out, MPFR_RNDN);
          mpfr_mul(sc.out, sc.out, sc.r, MPFR_RNDN);
          ref.dx.exact[e] = toDoubleRoundToOdd(sc.out);
          const double Da = K * (u * std::fabs(a) + eta);
          const double Di = Da + Dc1 + (std::fabs(xh) + Dx) * Dc2 + std::fabs(c2) * Dx +
                            K * (u * (2.0 * (std::fabs(a) + std::fabs(c1)) + std::fabs(xh * c2)) + 2.0 * eta);
          ref.dx.budget[e] = budgetFromError(
              T, ref.dx.exact[e], r_hi * Di + std::fabs(inner) * Dr + K * (u * r_hi * (std::fabs(inner) + Di) + eta));
          ref.dx.magnitude[e] = r * (std::fabs(a) + std::fabs(c1) + std::fabs(xh * c2));

          // dgamma += dy xhat (exact at 256 bits: 160 + 24).
          mpfr_mul(sc.t, sc.dev[j], sc.r, MPFR_RNDN);
          mpfr_mul_d(sc.acc_term, sc.t, dyv, MPFR_RNDN);
          mpfr_add(dgc->sum[j], dgc->sum[j], sc.acc_term, MPFR_RNDN);
          dgc->abs_terms[j] += std::fabs(dyv * xh);
          dgc->sq_terms[j] += (dyv * xh) * (dyv * xh);
          dgc->gain[j] += std::fabs(dyv) * Dx + K * eta * r;  // (dy d) r: an underflow of dy d times r
        }
      }
      dgamma_chunks[chunk] = std::move(dgc);
    }
  });

  // A column reduction that flushes subnormals (fp32 atomics) may lose up to
  // the smallest normal per add.
  const double ftz = contract.column_reduction_ftz ? K * Dc * std::ldexp(1.0, formatOf(acc).emin) : 0.0;

  // dgamma in each order the launch may take: sum_v |s_v| of its tree, from
  // doubles of the mean and rstd (within 2^-52 of the exact ones).
  std::vector<mp::OrderedColumnBound> dgamma_ordered;
  if (!contract.column_reduction_ftz)
    for (const ColumnOrder& order : contract.depths.col_orders) {
      dgamma_ordered.push_back(mp::orderedColumnBound(
          M, N, order,
          [&](int64_t i, int64_t j) {
            const double xv = x.value(i, j), mu = mean_backward[size_t(i)], dyv = in.dy.value(i, j);
            const double t = dyv * (xv - mu) * rstd_backward[size_t(i)];
            // x - mean in double: the mean's double error and the subtraction's rounding.
            return mp::Leaf{t, std::fabs(dyv) * rstd_backward[size_t(i)] * 0x1p-50 * (std::fabs(xv) + std::fabs(mu)) +
                                   0x1p-51 * std::fabs(t)};
          },
          pool));
    }
  // The smaller of the depth bound and the bounds of every order a launch may take.
  auto orderedError = [&](const std::vector<mp::OrderedColumnBound>& bounds, int64_t j, double tau, double depth_error) {
    if (bounds.empty()) return depth_error;
    double worst = 0;
    for (const mp::OrderedColumnBound& b : bounds)
      worst = std::max(worst, K * b.factor(u) * (b.partial_abs[size_t(j)] + double(b.depth) * tau) + tau +
                                  K * double(b.adds) * eta);
    return std::min(worst, depth_error);
  };

  Real total(kAccPrec);
  for (int64_t j = 0; j < N; ++j) {
    const mp::ColumnTotal g = mp::combineColumn(dgamma_chunks, j, total);
    ref.dgamma.exact[j] = g.exact;
    ref.dgamma.magnitude[j] = g.magnitude();
    ref.dgamma.budget[j] = budgetFromError(
        W, g.exact,
        orderedError(dgamma_ordered, j, g.gain, g.gain + K * (Dc * u * g.abs_terms + (double(M) + Dc) * eta) + ftz));
  }
  if (stats_in_T)
    for (ReferenceTensor* t : {&ref.dx, &ref.dgamma}) anyNonFiniteWhereNotFinite(*t);
  return ref;
}

}  // namespace ulpcheck
