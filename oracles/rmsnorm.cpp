// MPFR oracle of RMSNorm, and the derivation of its error budget.
//
// ---------------------------------------------------------------------------
// The exact values
//
// Inputs are values of the storage format T, so x_j^2, w_j dy_j and x_j w_j are
// exact doubles (at most 2 x 24 significand bits). Row sums are correctly
// rounded mpfr_sum's of exact terms; everything after is 160-bit arithmetic,
// so every result is within a few 2^-160 of its exact value relative to the
// magnitudes it is made of. dW is accumulated at 256 bits over rows in a fixed
// chunking (independent of the thread count, so the oracle is reproducible).
// Each result is rounded to double with round-to-odd, which makes rounding
// that double to T the correctly rounded T value.
//
// ---------------------------------------------------------------------------
// The budget: a first-order forward error analysis of the algorithm every
// conforming kernel runs, with u = unit roundoff of the declared accumulation
// precision, D_row / D_col the declared reduction depths (ReductionDepths:
// a sum of depth D has error <= D u sum|terms|), eta = 2^-150 the absolute error
// of an fp32 product that underflows. Per row:
//
//   ms~   = (sum_j x_j^2 (1 rounding each, depth D_row)) / N + eps
//           relative error (D_row + 3) u                   [square, sum, divide, add]
//   r~    = rsqrt(ms~): half the relative error of ms~, plus rsqrtf's 4 u
//           delta_r := (D_row + 3) / 2 + 4                 [in units of u]
//
//   y     = (x r) w          S_y  = (delta_r + 2) |y|              G_y  = 1 + |w| + r
//   rstd  = r~               S_r  = delta_r r                      G_r  = 0 (eps >= 2^-60 keeps ms normal)
//
// Backward with a = w dy, xhat = x r, c = (1/N) sum_j a_j xhat_j,
// m = (1/N) sum_j |a_j xhat_j|:
//   xhat~ carries delta_r + 1, a~ one rounding, each product a xhat another,
//   so c~ has absolute error (D_row + delta_r + 4) u m  [terms, sum, divide];
//   t = xhat_i c: (delta_r + 2) u |t| + |xhat_i| |dc|;
//   dx = r (a - t): delta_r from r~, one rounding for the subtraction and one
//   for the product:
//   S_dx = r [ (delta_r + 3) |a_i| + (2 delta_r + 4) |xhat_i c| + (D_row + delta_r + 4) |xhat_i| m ]
//   G_dx = r (2 + |c| + |xhat_i|) + 1
//   dw_j = sum_i dy_ij xhat_ij: each term delta_r + 2, summed with depth D_col:
//   S_dw = (D_col + delta_r + 2) sum_i |dy_ij xhat_ij|,   G_dw = 1 + sum_i (1 + |dy_ij| + r_i)
//   (G: a product of three factors may underflow in any association; one
//   that rounds x w or dy x first, as PyTorch's (dy x) r does, has its
//   underflow error amplified by r: the H100 run of torch's RMSNorm on
//   subnormal x showed dW 1.6x over a budget without it)
//   and if the dW reduction flushes subnormals (fp32 atomics), each of its
//   D_col adds may lose up to the smallest normal 2^-126 = 2^24 eta:
//   G_dw += D_col 2^24.
//   Where the variant fixes the order of its dW sum (ColumnOrder: per-CTA
//   chains over rows, chains over the partials), the error is bounded
//   instead by the exact partial sums of that tree (oracles/column_sum.h):
//   with tau = (delta_r + 2) u sum_i |dy_ij xhat_ij| the leaves' error and
//   F = u (1 + u)^D,
//   S_dw = min(the depth bound above, [F (sum_v |s_v| + D tau) + tau] / u),
//   G_dw += adds (each add of the tree may underflow); the largest over the
//   orders a launch may take (pointer alignment picks one).
//
// ---------------------------------------------------------------------------
// Specs (harness/core/norm_spec.h): weight dtype, offset, Llama rounding.
//
// Weight dtype: w is read in its own dtype (an fp32 w beside 16-bit x, or
// the same); dw is rounded to it. Every product above stays exact (24 x 24
// bits in a double), so nothing else changes.
//
// Offset: the effective weight is offset + w, exact in the oracle (192
// bits), formed by the kernel in fp32: one more rounding wherever the weight
// enters (w_units = 1): S_y gains |y|, S_dx gains r |a| and r |xhat| m.
// dw does not involve the weight. A kernel that forms offset + w in the
// activation dtype (2^-9 relative in bf16) is far outside.
//
// Bias (quack's rmsnorm(bias=)): y = x r (offset + w) + b, b in the weight
// dtype, added in fp32: one more rounding, of a value no larger than
// |xhat w| + |b|, so S_y gains |xhat w| + |b|. Where y cancels (xhat w near
// -b) the budget stays at the size of its terms, which y's magnitude
// records. db_j = sum_i dy_ij, exact leaves summed like LayerNorm's dbeta
// (mp::biasGradientReference, oracles/column_sum.h); dx and dw do not
// involve b. Not modelled with rounding=llama (no library ships it).
//
// An x of another dtype than y (allreduce_rmsnorm's fp32 residual_out under
// res=fp32, normalised into 16-bit y): x^2 and x w stay exact in a double
// (24 x 24 bits), (w dy) x in 80 bits, so nothing above changes.
//
// Llama: y = round_T(x r) (offset + w), x-hat rounded to the activation dtype
// T before the weight multiplies it. The exact spec rounds the exact x r; a
// kernel rounds its own x r~, which lies within
//   e_q = |x| B_r + u |x| (r + B_r)     (B_r: the rstd budget, then one product)
// of x r. Where [x r - e_q, x r + e_q] holds no rounding boundary of T, every
// correct kernel gets the very q = round_T(x r) the oracle uses; where it
// does, the two roundings differ by `spread` (one ulp of T), which the
// budget adds as it is (RoundingPoint). Then q (offset + w) is one fp32
// product (and one rounding of offset + w):
//   budget_y = K (u (1 + w_units) |q w| + eta G_y) + spread |w| + 0.5 ulp_T.
// So a kernel that multiplies the unrounded x-hat (vLLM PR #42379's bug, the
// plain spec) is off by up to half an ulp of T in q, which the budget does
// not allow away from the boundaries.
// The backward is the derivative of that forward as autograd takes it
// through the rounding (the identity), as Liger's llama mode computes it:
//   dx = the plain dx with x-hat unrounded and a = (offset + w) dy exact
//        (Liger: m = (dY * W_row).to(fp32) with W_row = W + offset, offset
//        a runtime fp32 argument, so the product is fp32 even at offset 0;
//        HF's LlamaRMSNorm under autograd rounds a to T when w is T, half an
//        ulp of T more, which this spec does not allow)
//   dw_j = sum_i round_T(dy_ij q_ij) in 16 bits: a product of two
//        activation-dtype values is formed in T (Liger: dW_row += dY *
//        (X rstd).to(X dtype); HF: the gradient of w * hidden.to(T); Triton
//        3.6 on the H100 rounds (a * b).to(fp32) of two fp16 or bf16 tensors
//        to 16 bits, measured)
// In fp32 the term's rounding is fp32's own. The leaves are exact T values
// (leaf units 1 instead of delta_r + 2 covers a kernel's fp32 product) plus,
// where q may round either way, its spread |dy| and one ulp of the term.
// The spread sums enter the column bounds in units of u (with K).
//
// Saved statistics in the activation dtype (stats=T, plain rounding only):
// the forward computes y with its fp32 r~ as above but saves rb~ =
// round_T(r~), judged against the exact r with that rounding on top; the
// backward's spec is the plain backward taken at the saved rb = round_T(r)
// instead of r (x-hat rebuilt as x rb). As with Llama's x-hat, a correct
// kernel's r~ may round to a neighbour of rb where [r - B_r, r + B_r] holds
// a rounding boundary of T; `spread` s is the distance. The backward then
// uses its rb~ exactly (delta_r = 0 in the terms above) and the spread
// enters as it is: dx = rb a - rb^3 x C with C = (1/N) sum_k a_k x_k (xhat c =
// x rb rb C) moves by at most s |a| + |x C| ((rb + s)^3 - rb^3)
// = s (|a| + |x c| (3 rb + 3 s + s^2 / rb)) (c = rb C), and each leaf
// dy x rb of dw by s |dy x|.
//
// where S carries the cancellation: at an element where dx ~ 0, |a_i| and
// |xhat_i c| stay large, so the budget stays at the size of the terms, not of
// the result. That is why a correct fp32-accumulating kernel may be hundreds
// of ulps from the correctly rounded dx there and still pass, while a bf16
// accumulator (u = 2^-8 instead of 2^-24) exceeds the budget by orders of
// magnitude. The budget of an element is then
//   budget = K (u S + eta G) + 0.5 ulp_T(|exact| + K (u S + eta G))   (oracles/reference.h)
#include "oracles/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "oracles/column_sum.h"
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
// offset + w is exact in 192 bits (|offset| <= 16 = 2^4, an fp32 w's last bit
// >= 2^-149: 154 bits); (offset + w) dy x then in 240.
constexpr mpfr_prec_t kWeightPrec = 192, kOffsetProductPrec = 256;

/// Scratch of one worker, reused across its rows.
struct RowScratch {
  RowScratch(int64_t N, bool offset)
      : squares(N, 53),
        products(N, offset ? kOffsetProductPrec : 80),
        r(kPrec),
        c(kPrec),
        t(kPrec),
        s(kPrec),
        out(kPrec),
        rb(kPrec),
        acc_term(kAccPrec) {}
  RealArray squares;   // x_j^2, exact in 53 bits
  RealArray products;  // (w_j dy_j) x_j, exact in 80 bits (with an offset: ((offset + w_j) dy_j) x_j in 256)
  Real r, c, t, s, out, rb, acc_term;  // rb: the rstd the backward consumes
};

}  // namespace

RmsNormReference rmsnormReference(const RmsNormInputs& in, const AccuracyContract& contract, ThreadPool& pool) {
  const HostMatrix& x = in.x;
  const int64_t M = x.rows, N = x.cols;
  // T: the activations' dtype (y, dx; x's unless y_dtype says otherwise, when x is an fp32 residual_out).
  const DType T = in.y_dtype.value_or(x.dtype), W = in.w.dtype;
  if (T != x.dtype && (in.spec.rounding != Rounding::Plain || in.spec.stats))
    throw std::invalid_argument("rmsnorm oracle: an x in another dtype than y is modelled for rounding=plain only");
  if (in.spec.bias != (in.b != nullptr)) throw std::invalid_argument("rmsnorm oracle: spec.bias and the b given disagree");
  const DType acc = contract.accumulation;
  const double d_row = double(contract.depths.row), d_col = double(contract.depths.col);
  const double delta_r = (d_row + 3.0) / 2.0 + tolerance::kRsqrtUnits;
  const bool llama = in.spec.rounding == Rounding::Llama;
  const double offset = in.spec.weight_offset;
  // Llama's dw terms dy round_T(x r), products of two activation-dtype
  // values, are formed in T (see the derivation).
  const bool llama_terms_in_T = llama && T != DType::F32;
  // offset + w is one more fp32 rounding wherever the weight enters.
  const double w_units = offset != 0.0 ? 1.0 : 0.0;
  const double u = unitRoundoff(acc);
  // stats=T: rstd saved in T, and the backward taken at the saved value.
  const bool stats_in_T = in.spec.stats && T != DType::F32;
  if (stats_in_T && llama) throw std::invalid_argument("rmsnorm oracle: stats=T with rounding=llama is not modelled");
  if (in.b && llama) throw std::invalid_argument("rmsnorm oracle: a bias with rounding=llama is not modelled");
  // rstd's relative error in the backward, in units of u: none where it consumes a saved T value exactly.
  const double delta_b = stats_in_T ? 0.0 : delta_r;

  RmsNormReference ref{ReferenceTensor::zeros("y", T, M, N, true),
                       ReferenceTensor::zeros("rstd", statsDtype(in.spec), M, 1, true),
                       ReferenceTensor::zeros("dx", T, M, N, true), ReferenceTensor::zeros("dw", W, 1, N, false)};
  ref.dx.withMagnitudes();  // r (|a| + |xhat c|): dx = r (a - xhat c) cancels
  ref.dw.withMagnitudes();  // sqrt(sum_i (dy xhat)^2)
  if (in.b) {
    ref.y.withMagnitudes();  // |xhat (offset + w)| + |b|: y = xhat w + b cancels
    ref.db = mp::biasGradientReference("db", in.dy, W, contract, pool);
  }

  // The effective weight offset + w: in double for the budgets (rounded),
  // exactly in MPFR for the values.
  std::vector<double> w(N);
  RealArray w_exact(size_t(N), kWeightPrec);
  for (int64_t j = 0; j < N; ++j) {
    mpfr_set_d(w_exact[j], in.w.value(0, j), MPFR_RNDN);
    mpfr_add_d(w_exact[j], w_exact[j], offset, MPFR_RNDN);  // exact at 192 bits
    w[j] = mpfr_get_d(w_exact[j], MPFR_RNDN);
  }

  // Fixed chunking of rows for dW (sum |dy xhat| and sum (1 + |dy|) beside
  // the exact sum), so the 256-bit sums are reproducible.
  const int64_t chunks = mp::columnChunkCount(M, N);
  mp::ColumnSumChunks dw_chunks(chunks);
  // Llama's dW leaves dy round_T(xhat) (rounded to T once more in 16 bits):
  // from the rounded xhat of the exact rstd, exact in float, for the ordered
  // column bound below.
  const bool ordered_dw = !contract.column_reduction_ftz && !contract.depths.col_orders.empty();
  std::vector<float> llama_leaf(llama && ordered_dw ? size_t(M * N) : 0);
  std::vector<double> rstd_backward(static_cast<size_t>(M));  // as a double (a T value under stats=T), for the ordered bound

  pool.forChunks(chunks, [&](unsigned, int64_t chunk_begin, int64_t chunk_end) {
    RowScratch sc(N, offset != 0.0);
    Real weighted(kOffsetProductPrec);
    for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk) {
      auto dwc = std::make_unique<mp::ColumnSumChunk>(N);
      const int64_t row_begin = M * chunk / chunks, row_end = M * (chunk + 1) / chunks;
      for (int64_t i = row_begin; i < row_end; ++i) {
        // rstd = 1 / sqrt(sum x^2 / N + eps)
        for (int64_t j = 0; j < N; ++j) {
          const double xv = x.value(i, j);
          mpfr_set_d(sc.squares[j], xv * xv, MPFR_RNDN);  // exact: 48-bit product
        }
        sc.squares.sum(sc.s, N);
        mpfr_div_si(sc.s, sc.s, long(N), MPFR_RNDN);
        mpfr_add_d(sc.s, sc.s, double(in.eps), MPFR_RNDN);
        mpfr_rec_sqrt(sc.r, sc.s, MPFR_RNDN);
        const double r = mpfr_get_d(sc.r, MPFR_RNDN);
        ref.rstd.exact[i] = toDoubleRoundToOdd(sc.r);
        // The fp32 r~'s error bound, then saved in fp32 or rounded to T.
        const double rstd_budget = elementBudget(DType::F32, acc, ref.rstd.exact[i], delta_r * r, 0.0);
        ref.rstd.budget[i] = elementBudget(ref.rstd.dtype, acc, ref.rstd.exact[i], delta_r * r, 0.0);
        // The rstd the backward consumes: r, or the saved round_T(r) with its spread.
        double rb = r, spread_r = 0.0;
        if (stats_in_T) {
          const RoundingPoint saved = roundingPoint(T, sc.r, rstd_budget);
          rb = saved.spec;
          spread_r = saved.spread;
          mpfr_set_d(sc.rb, rb, MPFR_RNDN);
        } else {
          mpfr_set(sc.rb, sc.r, MPFR_RNDN);
        }
        rstd_backward[size_t(i)] = stats_in_T ? rb : ref.rstd.exact[size_t(i)];

        // c = r / N * sum_j (w_j dy_j) x_j, and m = r / N * sum_j |w_j dy_j x_j|
        double abs_sum = 0.0;
        for (int64_t j = 0; j < N; ++j) {
          const double dyv = in.dy.value(i, j);
          if (offset == 0.0) {
            mpfr_set_d(sc.products[j], w[j] * dyv, MPFR_RNDN);  // exact: 48 bits
          } else {
            mpfr_mul_d(sc.products[j], w_exact[j], dyv, MPFR_RNDN);  // exact: 216 bits
          }
          mpfr_mul_d(sc.products[j], sc.products[j], x.value(i, j), MPFR_RNDN);  // exact
          abs_sum += std::fabs(w[j] * dyv * x.value(i, j));
        }
        sc.products.sum(sc.c, N);
        mpfr_mul(sc.c, sc.c, sc.rb, MPFR_RNDN);
        mpfr_div_si(sc.c, sc.c, long(N), MPFR_RNDN);
        const double c = mpfr_get_d(sc.c, MPFR_RNDN);
        const double m = abs_sum * rb / double(N);

        for (int64_t j = 0; j < N; ++j) {
          const double xv = x.value(i, j), dyv = in.dy.value(i, j);
          // xhat: the forward's x r; xhat_b: the backward's x rb (the same unless stats=T)
          const double a = w[j] * dyv, xhat = xv * r, xhat_b = xv * rb;
          const int64_t e = i * N + j;

          mpfr_mul_d(sc.t, sc.r, xv, MPFR_RNDN);  // xhat = x r
          if (llama) {
            // y = round_T(x r) (offset + w): the kernel's x r~ is within
            // |x| rstd_budget + one fp32 rounding of x r.
            const RoundingPoint q =
                roundingPoint(T, sc.t, std::fabs(xv) * rstd_budget + u * std::fabs(xv) * (r + rstd_budget));

            mpfr_mul_d(sc.out, w_exact[j], q.spec, MPFR_RNDN);
            ref.y.exact[e] = toDoubleRoundToOdd(sc.out);
            // q (offset + w) in fp32: one rounding, one more for offset + w;
            // the rounding point adds its spread times the weight.
            const double err = tolerance::kBudgetSafety * (u * (1.0 + w_units) * std::fabs(q.spec * w[j]) +
                                                           tolerance::kUnderflowHalfUlps * minSubnormal(acc) *
                                                               (1.0 + std::fabs(w[j]) + r)) +
                               q.spread * std::fabs(w[j]);
            ref.y.budget[e] = budgetFromError(T, ref.y.exact[e], err);
            // The leaf dy q, a product in T in 16 bits; where q may be either
            // neighbour its rounding may move by one more ulp of the term.
            const double term = llama_terms_in_T ? roundToFormat(T, dyv * q.spec) : dyv * q.spec;
            if (!llama_leaf.empty()) llama_leaf[size_t(e)] = float(term);
            dwc->abs_terms[j] += std::fabs(term);
            dwc->sq_terms[j] += term * term;
            if (q.spread > 0.0)
              dwc->spread[j] += q.spread * std::fabs(dyv) +
                                (llama_terms_in_T ? ulpOf(T, std::fabs(dyv) * (std::fabs(q.spec) + q.spread)) : 0.0);
            mpfr_set_d(sc.acc_term, term, MPFR_RNDN);  // exact: 48 bits
          } else {
            if (offset == 0.0) mpfr_mul_d(sc.out, sc.r, xv * w[j], MPFR_RNDN);  // y = (x w) r, x w exact
            else mpfr_mul(sc.out, sc.t, w_exact[j], MPFR_RNDN);             // y = (x r) (offset + w)
            // + b: one more fp32 rounding, of a sum as large as |xhat w| + |b|.
            const double bias = in.b ? in.b->value(0, j) : 0.0;
            if (in.b) mpfr_add_d(sc.out, sc.out, bias, MPFR_RNDN);
            ref.y.exact[e] = toDoubleRoundToOdd(sc.out);
            const double bias_units = in.b ? std::fabs(xhat * w[j]) + std::fabs(bias) : 0.0;
            ref.y.budget[e] = elementBudget(
                T, acc, ref.y.exact[e], (delta_r + 2.0 + w_units) * std::fabs(xhat * w[j]) + bias_units,
                1.0 + std::fabs(w[j]) + r);
            if (in.b) ref.y.magnitude[e] = std::fabs(xhat * w[j]) + std::fabs(bias);
            dwc->abs_terms[j] += std::fabs(dyv * xhat_b);
            dwc->sq_terms[j] += (dyv * xhat_b) * (dyv * xhat_b);
            dwc->spread[j] += spread_r * std::fabs(dyv * xv);
            mpfr_mul_d(sc.acc_term, sc.rb, dyv * xv, MPFR_RNDN);  // exact at 256 bits: 160 + 48
          }
          mpfr_add(dwc->sum[j], dwc->sum[j], sc.acc_term, MPFR_RNDN);
          dwc->gain[j] += 1.0 + std::fabs(dyv) + rb;

          if (stats_in_T) mpfr_mul_d(sc.t, sc.rb, xv, MPFR_RNDN);  // the backward's x rb
          mpfr_mul(sc.t, sc.t, sc.c, MPFR_RNDN);  // t = x rb c
          if (offset == 0.0) {
            mpfr_d_sub(sc.s, a, sc.t, MPFR_RNDN);  // a - t
          } else {
            mpfr_mul_d(weighted, w_exact[j], dyv, MPFR_RNDN);  // a = (offset + w) dy, exact
            mpfr_sub(sc.s, weighted, sc.t, MPFR_RNDN);
          }
          mpfr_mul(sc.out, sc.s, sc.rb, MPFR_RNDN);
          ref.dx.exact[e] = toDoubleRoundToOdd(sc.out);
          const double scale_dx =
              rb * ((delta_b + 3.0 + w_units) * std::fabs(a) + (2.0 * delta_b + 4.0) * std::fabs(xhat_b * c) +
                    (d_row + delta_b + 4.0 + w_units) * std::fabs(xhat_b) * m);
          const double spread_dx =
              spread_r * (std::fabs(a) + std::fabs(xv * c) * (3.0 * rb + 3.0 * spread_r + spread_r * spread_r / rb));
          ref.dx.budget[e] = elementBudget(T, acc, ref.dx.exact[e], scale_dx,
                                           rb * (2.0 + std::fabs(c) + std::fabs(xhat_b)) + 1.0, spread_dx);
          ref.dx.magnitude[e] = rb * (std::fabs(a) + std::fabs(xhat_b * c));
        }
      }
      dw_chunks[chunk] = std::move(dwc);
    }
  });

  // A flushed add loses at most the smallest normal, in units of eta.
  const double eta = tolerance::kUnderflowHalfUlps * minSubnormal(acc);
  const double ftz_gain = contract.column_reduction_ftz ? d_col * std::ldexp(1.0, formatOf(acc).emin) / eta : 0.0;

  // dW in each order the launch may take: sum_v |s_v| of its tree, from
  // dy x rstd in double (rstd's double within 2^-52 of the exact value), or
  // Llama's dy round_T(xhat) (exact in double).
  std::vector<mp::OrderedColumnBound> ordered;
  if (ordered_dw)
    for (const ColumnOrder& order : contract.depths.col_orders)
      ordered.push_back(mp::orderedColumnBound(
          M, N, order,
          [&](int64_t i, int64_t j) {
            if (llama) return mp::Leaf{double(llama_leaf[size_t(i * N + j)]), 0.0};
            const double t = in.dy.value(i, j) * x.value(i, j) * rstd_backward[size_t(i)];
            return mp::Leaf{t, 0x1p-51 * std::fabs(t)};
          },
          pool));
  // A leaf's error in units of u: Llama's dy round_T(xhat) is one product
  // rounding (plus its rounding point's spread, absolute); the plain leaf
  // dy (x r~) carries rstd's delta_r and two products.
  const double leaf_units = llama ? 1.0 : delta_b + 2.0;

  // Combine the dW chunks in chunk order.
  Real total(kAccPrec);
  for (int64_t j = 0; j < N; ++j) {
    const mp::ColumnTotal t = mp::combineColumn(dw_chunks, j, total);
    ref.dw.exact[j] = t.exact;
    const double spread_units = t.spread / u;
    double scale = (d_col + leaf_units) * t.abs_terms + (1.0 + d_col * u) * spread_units,
           gain = 1.0 + t.gain + ftz_gain;
    if (!ordered.empty()) {
      const double tau_units = leaf_units * t.abs_terms + spread_units;  // the leaves' error, in units of u
      double worst = 0, adds = 0;
      for (const mp::OrderedColumnBound& b : ordered) {
        const double D = double(b.depth);
        worst = std::max(worst, b.factor(u) / u * (b.partial_abs[size_t(j)] + D * tau_units * u) + tau_units);
        adds = std::max(adds, double(b.adds));
      }
      if (worst < scale) scale = worst, gain += adds;
    }
    ref.dw.budget[j] = elementBudget(W, acc, t.exact, scale, gain);
    ref.dw.magnitude[j] = t.magnitude();
  }
  if (stats_in_T)
    for (ReferenceTensor* t : {&ref.dx, &ref.dw}) anyNonFiniteWhereNotFinite(*t);
  return ref;
}

}  // namespace ulpcheck
