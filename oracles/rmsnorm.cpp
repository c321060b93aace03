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
// Specs (core/norm_spec.h): weight dtype, offset, Llama rounding.
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
// Fused add + RMSNorm's backward (kernels/fused_add_rmsnorm), plain or
// Llama rounding (whose dx is the plain one's): dx + g, g the gradient
// reaching residual_out (a value of the residual's dtype), summed in fp32
// after dx: dx's error, then one rounding of the sum, u |dx + g| (S_dx gains
// |exact|); stored in T as dx and in the residual's dtype as dresidual, each
// with its own final half ulp. Where the sum cancels, its size is that of
// its terms (the magnitude adds |g|). And quack's variant of it: rstd taken
// of other rows (the fp32 sum) than the x whose x-hat the backward forms
// (the rounded residual_out it saved); every bound above holds with r that
// rstd, x this x.
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
#include <atomic>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "oracles/column_sum.h"
#include "oracles/double_word.h"
#include "oracles/mpfr_util.h"
#include "oracles/rmsnorm_budgets.h"

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
        acc_term(kAccPrec),
        weighted(kOffsetProductPrec) {}
  RealArray squares;   // x_j^2, exact in 53 bits
  RealArray products;  // (w_j dy_j) x_j, exact in 80 bits (with an offset: ((offset + w_j) dy_j) x_j in 256)
  Real r, c, t, s, out, rb, acc_term;  // rb: the rstd the backward consumes
  Real weighted;                       // (offset + w_j) dy_j, exact
};

/// The case's constants, shared by the MPFR path and the fast path.
struct Setup {
  Setup(const RmsNormInputs& inputs, const AccuracyContract& contract)
      : in(inputs),
        x(inputs.x),
        rx(inputs.rstd_of ? *inputs.rstd_of : inputs.x),
        addend(inputs.dx_addend),
        M(x.rows),
        N(x.cols),
        // T: the activations' dtype (y, dx; x's unless y_dtype says otherwise, when x is an fp32 residual_out).
        T(inputs.y_dtype.value_or(x.dtype)),
        W(inputs.w.dtype),
        acc(contract.accumulation),
        d_row(double(contract.depths.row)),
        d_col(double(contract.depths.col)),
        delta_r((d_row + 3.0) / 2.0 + tolerance::kRsqrtUnits),
        llama(kRounding(inputs.spec) == Rounding::Llama),
        offset(kWeightOffset(inputs.spec)),
        // Llama's dw terms dy round_T(x r), products of two activation-dtype
        // values, are formed in T (see the derivation).
        llama_terms_in_T(llama && T != DType::F32),
        // offset + w is one more fp32 rounding wherever the weight enters.
        w_units(offset != 0.0 ? 1.0 : 0.0),
        u(unitRoundoff(acc)),
        // stats=T: rstd saved in T, and the backward taken at the saved value.
        stats_in_T(statsInActivationDtype(inputs.spec) && T != DType::F32),
        // rstd's relative error in the backward, in units of u: none where it consumes a saved T value exactly.
        delta_b(stats_in_T ? 0.0 : delta_r),
        // Where the spec's backward itself may not be finite: under stats=T in
        // fp16 a saved rstd past 65504 is inf; in fused add's backward a
        // residual_out that overflowed (fp16 x + residual past 65504) gives an
        // x-hat of inf. There any non-finite result is its value.
        backward_may_overflow(stats_in_T || inputs.dx_addend),
        budget{T, acc, d_row, delta_r, delta_b, w_units, inputs.b != nullptr},
        w(size_t(N)),
        w_exact(size_t(N), kWeightPrec),
        w_words(size_t(N)) {
    if (T != x.dtype && (kRounding(inputs.spec) != Rounding::Plain || statsInActivationDtype(inputs.spec)))
      throw std::invalid_argument("rmsnorm oracle: an x in another dtype than y is modelled for rounding=plain only");
    if (stats_in_T && llama) throw std::invalid_argument("rmsnorm oracle: stats=T with rounding=llama is not modelled");
    if (inputs.b && llama) throw std::invalid_argument("rmsnorm oracle: a bias with rounding=llama is not modelled");
    if ((addend && stats_in_T) || (inputs.rstd_of && (llama || stats_in_T)))
      throw std::invalid_argument(
          "rmsnorm oracle: fused add's backward is modelled with fp32 stats, quack's rstd_of with rounding=plain");
    // The effective weight offset + w: in double for the budgets (rounded),
    // exactly in MPFR and as a double word (exact: a sum of two doubles).
    for (int64_t j = 0; j < N; ++j) {
      mpfr_set_d(w_exact[j], inputs.w.value(0, j), MPFR_RNDN);
      mpfr_add_d(w_exact[j], w_exact[j], offset, MPFR_RNDN);  // exact at 192 bits
      w[j] = mpfr_get_d(w_exact[j], MPFR_RNDN);
      w_words[j] = dw::twoSum(inputs.w.value(0, j), offset);
    }
  }
  const RmsNormInputs& in;
  const HostMatrix& x;
  const HostMatrix& rx;      // the rows rstd is taken of (x's but for quack's fused add backward)
  const HostMatrix* addend;  // added to dx (fused add's backward), or null
  const int64_t M, N;
  const DType T, W, acc;
  const double d_row, d_col, delta_r;
  const bool llama;
  const double offset;
  const bool llama_terms_in_T;
  const double w_units, u;
  const bool stats_in_T;
  const double delta_b;
  const bool backward_may_overflow;
  const rmsnorm_budget::Constants budget;  // what the element budgets read
  std::vector<double> w;
  RealArray w_exact;
  std::vector<dw::DW> w_words;
};

/// The per-row tensors' window `window` holds from row `first` on.
void setFirstRow(RmsNormReference& window, int64_t first) {
  for (ReferenceTensor* t : {&window.y, &window.rstd, &window.dx, &window.dresidual}) t->first_row = first;
}

/// Rows [first, first + rows) of the per-row tensors (y, rstd, dx and, with
/// dresidual_dtype, dresidual), zero; unless `with_elements`, y, dx and
/// dresidual are only their names and shapes (streamed: RmsNormRows makes
/// their rows again for the judge). Magnitudes (the sizes of the terms; see
/// ReferenceTensor::magnitude): dx = r (a - xhat c): r (|a| + |xhat c|);
/// under a bias y = xhat w + b: |xhat (offset + w)| + |b|.
RmsNormReference rowTensors(const Setup& s, int64_t first, int64_t rows, bool with_elements = true) {
  const int64_t element_rows = with_elements ? rows : 0;
  RmsNormReference ref{ReferenceTensor::zeros("y", s.T, element_rows, s.N, true),
                       ReferenceTensor::zeros("rstd", statsDtype(s.T, s.in.spec), rows, 1, true),
                       ReferenceTensor::zeros("dx", s.T, element_rows, s.N, true)};
  ref.dx.withMagnitudes();
  if (s.in.b) ref.y.withMagnitudes();
  if (s.in.dresidual_dtype) {
    ref.dresidual = ReferenceTensor::zeros("dresidual", *s.in.dresidual_dtype, element_rows, s.N, true);
    ref.dresidual.withMagnitudes();
    ref.dresidual.rows = rows;
  }
  ref.y.rows = ref.dx.rows = rows;
  setFirstRow(ref, first);
  return ref;
}

/// The reference's tensors, zero; db made already (by MPFR, or certified where
/// `fast`, counted in `counts`, its intervals times `widen`). Unless
/// `hold_rows`, y, dx and dresidual are only their names and shapes.
RmsNormReference emptyReference(const Setup& s, const AccuracyContract& contract, ThreadPool& pool, bool fast,
                                bool hold_rows, FastOracleCounts* counts = nullptr, double widen = 1.0) {
  RmsNormReference ref = rowTensors(s, 0, s.M, hold_rows);
  ref.dw = ReferenceTensor::zeros("dw", s.W, 1, s.N, false);
  ref.dw.withMagnitudes();  // sqrt(sum_i (dy xhat)^2)
  if (s.in.b) ref.db = mp::biasGradientReference("db", s.in.dy, s.W, contract, pool, fast, counts, widen);
  return ref;
}

/// Row i's rstd from a window that holds it into the whole tensor.
void keepStatistics(const RmsNormReference& window, int64_t i, RmsNormReference& whole) {
  whole.rstd.exact[size_t(i)] = window.rstd.exact[window.rstd.index(i, 0)];
  whole.rstd.budget[size_t(i)] = window.rstd.budget[window.rstd.index(i, 0)];
}

// The budgets, one function each so that both paths compute the same doubles.

/// y = x r (offset + w) (+ b) under plain rounding.
void setPlainY(const Setup& s, RmsNormReference& ref, int64_t e, int64_t j, double exact, double xhat, double bias,
               double r) {
  ref.y.exact[e] = exact;
  ref.y.budget[e] = rmsnorm_budget::plainY(s.budget, exact, xhat, s.w[j], bias, r);
  if (s.in.b) ref.y.magnitude[e] = std::fabs(xhat * s.w[j]) + std::fabs(bias);
}

/// dx, exact (plus s.addend's element g where there is one: fused add's
/// backward, which stores that sum as dresidual too).
void setDx(const Setup& s, RmsNormReference& ref, int64_t e, double exact, double a, double xv, double c, double m,
           double rb, double spread_r, double g = 0.0) {
  ref.dx.exact[e] = exact;
  ref.dx.magnitude[e] = rmsnorm_budget::dxMagnitude(a, xv, c, rb) + std::fabs(g);
  if (!s.addend) {
    ref.dx.budget[e] = rmsnorm_budget::dx(s.budget, exact, a, xv, c, m, rb, spread_r);
    return;
  }
  ref.dx.budget[e] = rmsnorm_budget::dxPlusGradient(s.budget, s.T, exact, a, xv, c, m, rb, spread_r);
  if (!ref.dresidual.exact.empty()) {
    ref.dresidual.exact[e] = exact;
    ref.dresidual.magnitude[e] = ref.dx.magnitude[e];
    ref.dresidual.budget[e] = rmsnorm_budget::dxPlusGradient(s.budget, ref.dresidual.dtype, exact, a, xv, c, m, rb,
                                                             spread_r);
  }
}

/// Element (i, j) of s.addend, or 0.
double addendAt(const Setup& s, int64_t i, int64_t j) { return s.addend ? s.addend->value(i, j) : 0.0; }

/// What the dW column sums need of every row beside the chunks.
struct DwRows {
  DwRows(const Setup& s, bool ordered)
      : llama_leaf(s.llama && ordered ? size_t(s.M * s.N) : 0), rstd_backward(size_t(s.M)) {}
  // Llama's dW leaves dy round_T(xhat) (rounded to T once more in 16 bits):
  // from the rounded xhat of the exact rstd, exact in float, for the ordered
  // column bound.
  std::vector<float> llama_leaf;
  std::vector<double> rstd_backward;  // as a double (a T value under stats=T), for the ordered bound
};

/// The magnitudes of a plain dw leaf dy (x rb).
void addPlainDwMagnitudes(mp::ColumnMagnitudes& dwc, int64_t j, double dyv, double xv, double rb, double spread_r) {
  const double xhat_b = xv * rb;
  dwc.abs_terms[j] += std::fabs(dyv * xhat_b);
  dwc.sq_terms[j] += (dyv * xhat_b) * (dyv * xhat_b);
  dwc.spread[j] += spread_r * std::fabs(dyv * xv);
}

void addDwGain(mp::ColumnMagnitudes& dwc, int64_t j, double dyv, double rb) {
  dwc.gain[j] += 1.0 + std::fabs(dyv) + rb;
}

/// Llama's rounding point q = round_T(x r) from x r's round-to-odd double:
/// the kernel's x r~ is within |x| rstd_budget + one fp32 rounding of x r.
RoundingPoint llamaPoint(const Setup& s, double xr_odd, double xv, double r, double rstd_budget) {
  return mp::roundingPointOfOdd(s.T, xr_odd, std::fabs(xv) * rstd_budget + s.u * std::fabs(xv) * (r + rstd_budget));
}

/// stats=T: the saved rstd round_T(r) as a rounding point, from r's
/// round-to-odd and nearest doubles (the fp32 r~ is within its budget).
RoundingPoint savedRstd(const Setup& s, double r_odd, double r_near) {
  return mp::roundingPointOfOdd(s.T, r_odd, elementBudget(DType::F32, s.acc, r_odd, s.delta_r * r_near, 0.0));
}

/// y = q (offset + w) under Llama rounding, its exact value given.
void setLlamaY(const Setup& s, RmsNormReference& ref, int64_t e, int64_t j, double exact, const RoundingPoint& q,
               double r) {
  ref.y.exact[e] = exact;
  // q (offset + w) in fp32: one rounding, one more for offset + w; the
  // rounding point adds its spread times the weight.
  const double err = tolerance::kBudgetSafety *
                         (s.u * (1.0 + s.w_units) * std::fabs(q.spec * s.w[j]) +
                          tolerance::kUnderflowHalfUlps * minSubnormal(s.acc) * (1.0 + std::fabs(s.w[j]) + r)) +
                     q.spread * std::fabs(s.w[j]);
  ref.y.budget[e] = budgetFromError(s.T, exact, err);
}

/// Llama's dW leaf dy q, a product in T in 16 bits (exact in a double),
/// with its magnitudes; where q may be either neighbour its rounding may
/// move by one more ulp of the term.
double llamaDwLeaf(const Setup& s, mp::ColumnMagnitudes& dwc, DwRows& rows, int64_t e, int64_t j, double dyv,
                   const RoundingPoint& q) {
  const double term = s.llama_terms_in_T ? roundToFormat(s.T, dyv * q.spec) : dyv * q.spec;
  if (!rows.llama_leaf.empty()) rows.llama_leaf[size_t(e)] = float(term);
  dwc.abs_terms[j] += std::fabs(term);
  dwc.sq_terms[j] += term * term;
  if (q.spread > 0.0)
    dwc.spread[j] += q.spread * std::fabs(dyv) +
                     (s.llama_terms_in_T ? ulpOf(s.T, std::fabs(dyv) * (std::fabs(q.spec) + q.spread)) : 0.0);
  return term;
}

/// sum_j |(offset + w_j) dy_j x_j| of row i, in the order the GPU oracle sums it.
double rowAbsSum(const Setup& s, int64_t i) {
  return rmsnorm_budget::chainedAbsSum(s.N, [&](int64_t j) { return s.w[j] * s.in.dy.value(i, j) * s.x.value(i, j); });
}

/// r = 1 / sqrt(sum x^2 / N + eps) of row i into sc.r, at 160 bits.
void mpfrRstd(const Setup& s, int64_t i, RowScratch& sc) {
  for (int64_t j = 0; j < s.N; ++j) {
    const double xv = s.rx.value(i, j);
    mpfr_set_d(sc.squares[j], xv * xv, MPFR_RNDN);  // exact: 48-bit product
  }
  sc.squares.sum(sc.s, s.N);
  mpfr_div_si(sc.s, sc.s, long(s.N), MPFR_RNDN);
  mpfr_add_d(sc.s, sc.s, double(s.in.eps), MPFR_RNDN);
  mpfr_rec_sqrt(sc.r, sc.s, MPFR_RNDN);
}

/// The backward's c = rb / N sum_j (w_j dy_j) x_j of row i into sc.c, at
/// 160 bits (sc.rb: the rstd the backward consumes).
void mpfrBackwardC(const Setup& s, int64_t i, RowScratch& sc) {
  for (int64_t j = 0; j < s.N; ++j) {
    const double dyv = s.in.dy.value(i, j);
    if (s.offset == 0.0) {
      mpfr_set_d(sc.products[j], s.w[j] * dyv, MPFR_RNDN);  // exact: 48 bits
    } else {
      mpfr_mul_d(sc.products[j], s.w_exact[j], dyv, MPFR_RNDN);  // exact: 216 bits
    }
    mpfr_mul_d(sc.products[j], sc.products[j], s.x.value(i, j), MPFR_RNDN);  // exact
  }
  sc.products.sum(sc.c, s.N);
  mpfr_mul(sc.c, sc.c, sc.rb, MPFR_RNDN);
  mpfr_div_si(sc.c, sc.c, long(s.N), MPFR_RNDN);
}

/// dx_ij = (a - (x rb) c) rb [+ g] at 160 bits, its round-to-odd double:
/// sc.t holds the backward's x_ij rb, sc.c and sc.rb the row's c and rb.
double mpfrDxOdd(const Setup& s, int64_t i, int64_t j, RowScratch& sc) {
  const double dyv = s.in.dy.value(i, j);
  mpfr_mul(sc.t, sc.t, sc.c, MPFR_RNDN);  // t = x rb c
  if (s.offset == 0.0) {
    mpfr_d_sub(sc.s, s.w[j] * dyv, sc.t, MPFR_RNDN);  // a - t, a = w dy exact
  } else {
    mpfr_mul_d(sc.weighted, s.w_exact[j], dyv, MPFR_RNDN);  // a = (offset + w) dy, exact
    mpfr_sub(sc.s, sc.weighted, sc.t, MPFR_RNDN);
  }
  mpfr_mul(sc.out, sc.s, sc.rb, MPFR_RNDN);
  if (s.addend) mpfr_add_d(sc.out, sc.out, addendAt(s, i, j), MPFR_RNDN);  // 160 bits: within 2^-160 of the sum
  return toDoubleRoundToOdd(sc.out);
}

/// Row i of y, rstd and dx at 160 bits into `ref` (the whole tensors or a
/// window that holds row i), and its dW terms into `dwc` and `rows` unless
/// null (the judge's rows made again need neither).
void mpfrRow(const Setup& s, RmsNormReference& ref, int64_t i, RowScratch& sc, mp::ColumnSumChunk* dwc, DwRows* rows) {
  const HostMatrix& x = s.x;
  const int64_t N = s.N;
  const std::vector<double>& w = s.w;
  mpfrRstd(s, i, sc);
  const double r = mpfr_get_d(sc.r, MPFR_RNDN), r_odd = toDoubleRoundToOdd(sc.r);
  ref.rstd.exact[ref.rstd.index(i, 0)] = r_odd;
  // The fp32 r~'s error bound, then saved in fp32 or rounded to T.
  const double rstd_budget = elementBudget(DType::F32, s.acc, r_odd, s.delta_r * r, 0.0);
  ref.rstd.budget[ref.rstd.index(i, 0)] = rmsnorm_budget::rstd(s.budget, ref.rstd.dtype, r_odd, r);
  // The rstd the backward consumes: r, or the saved round_T(r) with its spread.
  double rb = r, spread_r = 0.0;
  if (s.stats_in_T) {
    const RoundingPoint saved = savedRstd(s, r_odd, r);
    rb = saved.spec;
    spread_r = saved.spread;
    mpfr_set_d(sc.rb, rb, MPFR_RNDN);
  } else {
    mpfr_set(sc.rb, sc.r, MPFR_RNDN);
  }
  if (rows) rows->rstd_backward[size_t(i)] = s.stats_in_T ? rb : r_odd;

  // c = r / N * sum_j (w_j dy_j) x_j, and m = r / N * sum_j |w_j dy_j x_j|
  mpfrBackwardC(s, i, sc);
  const double abs_sum = rowAbsSum(s, i);
  const double c = mpfr_get_d(sc.c, MPFR_RNDN);
  const double m = abs_sum * rb / double(N);

  for (int64_t j = 0; j < N; ++j) {
    const double xv = x.value(i, j), dyv = s.in.dy.value(i, j);
    // xhat: the forward's x r
    const double a = w[j] * dyv, xhat = xv * r;
    const int64_t e = int64_t(ref.y.index(i, j));

    mpfr_mul_d(sc.t, sc.r, xv, MPFR_RNDN);  // xhat = x r
    if (s.llama) {
      // y = round_T(x r) (offset + w)
      const RoundingPoint q = llamaPoint(s, toDoubleRoundToOdd(sc.t), xv, r, rstd_budget);
      mpfr_mul_d(sc.out, s.w_exact[j], q.spec, MPFR_RNDN);
      setLlamaY(s, ref, e, j, toDoubleRoundToOdd(sc.out), q, r);
      if (dwc) mpfr_set_d(sc.acc_term, llamaDwLeaf(s, *dwc, *rows, i * N + j, j, dyv, q), MPFR_RNDN);  // exact
    } else {
      if (s.offset == 0.0) mpfr_mul_d(sc.out, sc.r, xv * w[j], MPFR_RNDN);  // y = (x w) r, x w exact
      else mpfr_mul(sc.out, sc.t, s.w_exact[j], MPFR_RNDN);                 // y = (x r) (offset + w)
      const double bias = s.in.b ? s.in.b->value(0, j) : 0.0;
      if (s.in.b) mpfr_add_d(sc.out, sc.out, bias, MPFR_RNDN);
      setPlainY(s, ref, e, j, toDoubleRoundToOdd(sc.out), xhat, bias, r);
      if (dwc) {
        addPlainDwMagnitudes(*dwc, j, dyv, xv, rb, spread_r);
        mpfr_mul_d(sc.acc_term, sc.rb, dyv * xv, MPFR_RNDN);  // exact at 256 bits: 160 + 48
      }
    }
    if (dwc) {
      mpfr_add(dwc->sum[j], dwc->sum[j], sc.acc_term, MPFR_RNDN);
      addDwGain(*dwc, j, dyv, rb);
    }

    if (s.stats_in_T) mpfr_mul_d(sc.t, sc.rb, xv, MPFR_RNDN);  // the backward's x rb
    setDx(s, ref, e, mpfrDxOdd(s, i, j, sc), a, xv, c, m, rb, spread_r, addendAt(s, i, j));
  }
}

bool orderedDw(const AccuracyContract& contract) {
  return !contract.column_reduction_ftz && !contract.depths.col_orders.empty();
}

/// dW in each order the launch may take (none unless orderedDw): sum_v |s_v|
/// of its tree, from dy x rstd in double (rstd's double within 2^-52 of the
/// exact value; the GPU oracle forms the same leaves), or Llama's
/// dy round_T(xhat) (exact in double).
std::vector<mp::OrderedColumnBound> orderedBounds(const Setup& s, const AccuracyContract& contract, const DwRows& rows,
                                                  ThreadPool& pool) {
  std::vector<mp::OrderedColumnBound> ordered;
  if (orderedDw(contract))
    for (const ColumnOrder& order : contract.depths.col_orders)
      ordered.push_back(mp::orderedColumnBound(
          s.M, s.N, order,
          [&](int64_t i, int64_t j) {
            if (s.llama) return mp::Leaf{double(rows.llama_leaf[size_t(i * s.N + j)]), 0.0};
            const double t = s.in.dy.value(i, j) * s.x.value(i, j) * rows.rstd_backward[size_t(i)];
            return mp::Leaf{t, 0x1p-51 * std::fabs(t)};
          },
          pool));
  return ordered;
}

/// dW from the combined columns: exact values and magnitudes in `totals`,
/// budgets from the depth bound or the orders a launch may take (`ordered`).
void finishDw(const Setup& s, const AccuracyContract& contract, const std::vector<mp::ColumnTotal>& totals,
              const std::vector<mp::OrderedColumnBound>& ordered, RmsNormReference& ref) {
  const int64_t N = s.N;
  const double u = s.u;
  // A flushed add loses at most the smallest normal, in units of eta.
  const double eta = tolerance::kUnderflowHalfUlps * minSubnormal(s.acc);
  const double ftz_gain = contract.column_reduction_ftz ? s.d_col * std::ldexp(1.0, formatOf(s.acc).emin) / eta : 0.0;
  // A leaf's error in units of u: Llama's dy round_T(xhat) is one product
  // rounding (plus its rounding point's spread, absolute); the plain leaf
  // dy (x r~) carries rstd's delta_r and two products.
  const double leaf_units = s.llama ? 1.0 : s.delta_b + 2.0;

  for (int64_t j = 0; j < N; ++j) {
    const mp::ColumnTotal& t = totals[size_t(j)];
    ref.dw.exact[j] = t.exact;
    const double spread_units = t.spread / u;
    double scale = (s.d_col + leaf_units) * t.abs_terms + (1.0 + s.d_col * u) * spread_units,
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
    ref.dw.budget[j] = elementBudget(s.W, s.acc, t.exact, scale, gain);
    ref.dw.magnitude[j] = t.magnitude();
  }
  if (s.backward_may_overflow)
    for (ReferenceTensor* t : {&ref.dx, &ref.dresidual, &ref.dw}) anyNonFiniteWhereNotFinite(*t);
}

/// The MPFR path over every row: the whole reference, or, unless
/// `hold_rows`, all of it but y's, dx's and dresidual's rows (each row made
/// in a worker's one-row window, its rstd kept).
RmsNormReference mpfrSweep(const Setup& s, const AccuracyContract& contract, ThreadPool& pool, bool hold_rows) {
  RmsNormReference ref = emptyReference(s, contract, pool, false, hold_rows);
  // Fixed chunking of rows for dW (sum |dy xhat| and sum (1 + |dy|) beside
  // the exact sum), so the 256-bit sums are reproducible.
  const int64_t chunks = mp::columnChunkCount(s.M, s.N);
  mp::ColumnSumFold dw_chunks(chunks, s.N);  // combined in chunk order
  DwRows rows(s, orderedDw(contract));
  struct Worker {
    Worker(const Setup& s, bool hold_rows)
        : sc(s.N, s.offset != 0.0), window(hold_rows ? RmsNormReference{} : rowTensors(s, 0, 1)) {}
    RowScratch sc;
    RmsNormReference window;
  };
  PerWorker<Worker> workers(pool, [&] { return std::make_unique<Worker>(s, hold_rows); });
  sweepChunksInOrder(
      pool, chunks,
      [&](unsigned worker, int64_t chunk) {
        Worker& w = workers[worker];
        auto dwc = std::make_unique<mp::ColumnSumChunk>(s.N);
        for (int64_t i = s.M * chunk / chunks; i < s.M * (chunk + 1) / chunks; ++i) {
          if (!hold_rows) setFirstRow(w.window, i);
          mpfrRow(s, hold_rows ? ref : w.window, i, w.sc, dwc.get(), &rows);
          if (!hold_rows) keepStatistics(w.window, i, ref);
        }
        return dwc;
      },
      [&](int64_t, std::unique_ptr<mp::ColumnSumChunk> dwc) { dw_chunks.add(std::move(dwc)); });
  workers.clear();
  std::vector<mp::ColumnTotal> totals(size_t(s.N));
  for (int64_t j = 0; j < s.N; ++j) totals[size_t(j)] = mp::combineColumn(dw_chunks, j);
  finishDw(s, contract, totals, orderedBounds(s, contract, rows, pool), ref);
  return ref;
}

}  // namespace

RmsNormReference rmsnormReferenceMpfr(const RmsNormInputs& in, const AccuracyContract& contract, ThreadPool& pool) {
  const Setup s(in, contract);
  return mpfrSweep(s, contract, pool, /*hold_rows=*/true);
}

// ---------------------------------------------------------------------------
// The certified fast path
//
// The same values in double-word arithmetic (oracles/double_word.h: about
// 106 bits, each operation with a proven relative error bound), each carried
// with a bound e on its distance from the exact value; then every double the
// MPFR path would produce (the round-to-odd exact values, the nearest r and
// c the budgets are made of) is taken from the double word only where the
// interval [v - e, v + e] decides it (dw::roundToOdd, dw::roundToNearest).
// The interval is widened by kMpfrSlack times the magnitude of the value's
// terms, which covers the MPFR path's own distance from the exact value
// (160-bit operations, 256-bit sums: below 2^-150 of the magnitudes); so a
// decided double is the one the MPFR path computes, and every budget made
// from such doubles is the same double too. A row with anything undecided
// is computed by the MPFR path (mpfrRow); a dW column whose sum is
// undecided is summed by it. The references are then bitwise those of
// rmsnormReferenceMpfr: the verdicts cannot differ (the audit checks it).
//
// Error propagation, first order, u2 = 2^-106 (dw::kU2), rel(.) relative:
//   sum x^2: exact terms, DWPlusFP each: e_sq = 2 u2 sum_k |partial_k|
//   ms = sq / N + eps:  e_ms = e_sq / N + 9.8 u2 |sq / N| + 2 u2 |ms|
//   r = 1 / sqrt(ms):   rel(r) = rel(ms) / 2 + (25/8 + 9.8) u2
//   P = sum_j (w_j dy_j) x_j: exact terms (twoProd; w dy has 48 bits) or,
//     with an offset, (offset + w_j) dy_j x_j with 4 u2 each; AccurateDWPlusDW
//     each: e_P = sum_k (4 u2 |p_k| +) 3.01 u2 |P_k|
//   c = P r / N:        e_c = (e_P r + |P| e_r + 4 u2 |P r|) / N + 9.8 u2 |c|
//   y = r (x w) [+ b]:  e_y = (rel(r) + 2 u2) |y| [+ the add's own error,
//     known exactly (dw::plus's `dropped`); an exact b where x w = 0]
//     (with an offset: (r x)(offset + w): rel(r) + 6 u2)
//   dx = (a - (r x) c) r: e = e_t + (2 u2 | 3.01 u2 with an offset's a) |a - t|,
//     e_t = e_xr |c| + |xr| e_c + 4 u2 |t|; then e r + |a - t| e_r + 4 u2 |dx|
//     (fused add's backward: + g, the add's own error, known exactly)
//   dw_j = sum_i r_i (dy x)_ij: (rel(r_i) + 2 u2) |term| + 3.01 u2 |partial|
//   Llama: q = round_T(x r) from x r's round-to-odd double, decided within
//     (rel(r) + 2 u2) |x r| + slack (mp::roundingPointOfOdd then gives the
//     MPFR path's q and spread, from doubles); y = q (offset + w) exact
//     (twoProd) where offset + w is a double, else DWTimesFP's 2 u2; dx
//     as above (x-hat unrounded); dW's leaves dy q are exact doubles, summed
//     exactly below dw::kExactSumQuanta times their quantum
//     (mp::decideExactLeafColumns), else decided from the words' bound. A row or
//     column neither decides sends the whole case to MPFR (its other rows'
//     leaves would need MPFR's rounding points).
//   stats=T: the backward takes rb = round_T(r), decided as MPFR's
//     roundingPoint from r's round-to-odd and nearest doubles (savedRstd):
//     an exact double, so c = P rb / N, x rb (one exact twoProd), dx and
//     dW's leaves rb dy x carry no error of rb's own (rel 0), its spread
//     entering the budgets as in the MPFR path. A dx that is itself a
//     double (exact arithmetic: tiny rows, large means) is not decided by a
//     nonzero bound: such a row goes to MPFR, unless x = 0 there (then t is
//     an exact zero and dx = a rb one exact product, in MPFR too: bound 0).
// Second-order terms (products of two bounds, each below 2^-90 relative,
// and |computed| for |exact|, 2^-52 apart) are covered by dw::up's 2^-48.
// The double words stay in [2^-900, 2^900] for fp32 inputs (|x|, |w|, |dy|
// >= 2^-149, r <= 2^30), so no bound meets underflow; a non-finite input
// sends its row to the MPFR path.

namespace {

using dw::kU2;
using rmsnorm_budget::kMpfrSlack;

/// The rstd a row's backward consumes, for its dW leaves: r as a double word
/// with its relative error bound and nearest double, or under stats=T the
/// saved round_T(r) (exact) with its spread.
struct BackwardRstd {
  dw::DW words;
  double rel = 0, near = 0, spread = 0;
};

/// A worker's MPFR row scratch, made on first use (only rows or elements the
/// double words do not decide need it).
RowScratch& scratchOf(const Setup& s, std::unique_ptr<RowScratch>& sc) {
  if (!sc) sc = std::make_unique<RowScratch>(s.N, s.offset != 0.0);
  return *sc;
}

/// stats=T: a row's dx elements the double words leave undecided, made by
/// MPFR as mpfrRow makes them (the row's c once, then the element) instead
/// of the whole row. At a T-valued rb the backward is often exact
/// arithmetic (16-bit inputs, N a power of two: c a double of ~45 bits, x rb
/// of 16), so a dx can be exactly a double, which no nonzero bound decides:
/// 27% of the rows of a bf16 stats=bf16 512 x 4096 case went to MPFR whole
/// for one such element among 4096.
struct MpfrDxElements {
  std::unique_ptr<RowScratch>& sc;  // made on first use
  int64_t made = 0;                 // elements made so far
};

/// Row i's rstd, y and dx certified from double words into `ref` (the whole
/// tensors or a window that holds row i); the rstd
/// its backward consumes into `b`. False where something is not decided
/// (what was written is then overwritten). `widen` multiplies every
/// interval (1; the audit's forced fallback sets more). Under Llama
/// rounding each element's rounding point goes to llama_q. `mpfr_dx`
/// (stats=T; null: none) makes undecided dx elements by MPFR.
bool fastRow(const Setup& s, RmsNormReference& ref, int64_t i, double widen, BackwardRstd& b,
             std::vector<RoundingPoint>& llama_q, MpfrDxElements* mpfr_dx = nullptr) {
  const HostMatrix& x = s.x;
  const int64_t N = s.N;
  dw::DW sq;
  double partials = 0;
  for (int64_t j = 0; j < N; ++j) {
    const double xv = x.value(i, j), dyv = s.in.dy.value(i, j), rxv = s.rx.value(i, j);
    if (!std::isfinite(xv) || !std::isfinite(dyv) || !std::isfinite(rxv) || !std::isfinite(addendAt(s, i, j)))
      return false;
    sq = dw::plus(sq, rxv * rxv);  // x^2 exact: 48 bits
    partials += sq.h;
  }
  const dw::DW n{double(N), 0.0};
  dw::DW ms = dw::divide(sq, n);
  double e_ms = 2.0 * kU2 * partials / double(N) + 9.8 * kU2 * ms.h;
  ms = dw::plus(ms, double(s.in.eps));
  e_ms = dw::up(e_ms + 2.0 * kU2 * ms.h);
  if (!(ms.h > 0.0) || !dw::inRange(ms)) return false;
  const dw::DW r = dw::divide(dw::DW{1.0, 0.0}, dw::sqrt(ms));
  const double rel_r = dw::up(0.5 * e_ms / ms.h + (3.125 + 9.8) * kU2);
  const double e_r = rel_r * r.h;
  double r_odd, r_near;
  if (!dw::inRange(r) || !dw::roundToNearest(r, widen * (e_r + kMpfrSlack * r.h), r_near) ||
      !dw::roundToOdd(r, widen * (e_r + kMpfrSlack * r.h), r_odd))
    return false;
  ref.rstd.exact[ref.rstd.index(i, 0)] = r_odd;
  ref.rstd.budget[ref.rstd.index(i, 0)] = rmsnorm_budget::rstd(s.budget, ref.rstd.dtype, r_odd, r_near);
  // The fp32 r~'s error bound (mpfrRow's), which Llama's rounding points read.
  const double rstd_budget = s.llama ? elementBudget(DType::F32, s.acc, r_odd, s.delta_r * r_near, 0.0) : 0.0;
  // The backward's rstd: r, or the saved T value (exact: no error of its own).
  b = BackwardRstd{r, rel_r, r_near, 0.0};
  if (s.stats_in_T) {
    const RoundingPoint saved = savedRstd(s, r_odd, r_near);
    b = BackwardRstd{dw::DW{saved.spec, 0.0}, 0.0, saved.spec, saved.spread};
  }
  const double e_b = b.rel * b.words.h, rb = b.near;

  // c = r / N sum_j (offset + w_j) dy_j x_j, and m as the MPFR path has it.
  dw::DW P;
  double e_P = 0;
  for (int64_t j = 0; j < N; ++j) {
    const double dyv = s.in.dy.value(i, j), xv = x.value(i, j);
    dw::DW p;
    if (s.offset == 0.0) {
      p = dw::twoProd(s.w[j] * dyv, xv);  // exact: w dy has 48 bits
    } else {
      p = dw::times(dw::times(s.w_words[j], dyv), xv);
      e_P += 4.0 * kU2 * std::fabs(p.h);
    }
    P = dw::plus(P, p);
    e_P += 3.01 * kU2 * std::fabs(P.h);
  }
  const double abs_sum = rowAbsSum(s, i);
  const dw::DW Pr = dw::times(P, b.words);
  const dw::DW c = dw::divide(Pr, n);
  const double e_c = dw::up((e_P * b.words.h + std::fabs(P.h) * e_b + 4.0 * kU2 * std::fabs(Pr.h)) / double(N) +
                            9.8 * kU2 * std::fabs(c.h));
  const double m = abs_sum * rb / double(N);
  double c_near;
  if (!dw::roundToNearest(c, widen * (e_c + kMpfrSlack * m), c_near)) return false;
  bool c_by_mpfr = false;  // mpfr_dx's scratch holds this row's c

  for (int64_t j = 0; j < N; ++j) {
    const double xv = x.value(i, j), dyv = s.in.dy.value(i, j);
    const double a = s.w[j] * dyv, xhat = xv * r_near;
    const int64_t e = int64_t(ref.y.index(i, j));
    const dw::DW xr = dw::times(r, xv);
    const double e_xr = (rel_r + 2.0 * kU2) * std::fabs(xr.h);
    if (s.llama) {
      // y = q (offset + w), q = round_T(x r) from x r's round-to-odd double
      // (MPFR's x r at 160 bits is within kMpfrSlack of it).
      double xr_odd;
      if (!dw::inRange(xr) || !dw::roundToOdd(xr, widen * dw::up(e_xr + kMpfrSlack * std::fabs(xr.h)), xr_odd))
        return false;
      const RoundingPoint q = llamaPoint(s, xr_odd, xv, r_near, rstd_budget);
      llama_q[size_t(j)] = q;
      // q (offset + w): exact in a double word where offset + w is a double
      // (twoProd; MPFR's 160 bits hold it too), else DWTimesFP's 2 u2.
      const bool exact = s.w_words[j].l == 0.0;
      const dw::DW y = exact ? dw::twoProd(s.w_words[j].h, q.spec) : dw::times(s.w_words[j], q.spec);
      double y_odd;
      if (!dw::roundToOdd(y, exact ? 0.0 : widen * dw::up((2.0 * kU2 + kMpfrSlack) * std::fabs(y.h)), y_odd))
        return false;
      setLlamaY(s, ref, e, j, y_odd, q, r_near);
    } else {
      // y
      dw::DW y;
      double e_y;
      if (s.offset == 0.0) {
        y = dw::times(r, xv * s.w[j]);  // x w exact
        e_y = (rel_r + 2.0 * kU2) * std::fabs(y.h);
      } else {
        y = dw::times(dw::times(r, xv), s.w_words[j]);
        e_y = (rel_r + 6.0 * kU2) * std::fabs(y.h);
      }
      double bias = 0.0, y_terms = std::fabs(y.h);
      if (s.in.b) {
        bias = s.in.b->value(0, j);
        if (xv * s.w[j] == 0.0) {
          // y = (+-0) + b: exact here and in MPFR (its r (x w) is an exact zero).
          y = dw::DW{y.h + bias, 0.0};
          e_y = y_terms = 0.0;
        } else {
          // The add's own error, exactly (tight where b dominates a tiny x r w).
          double dropped = 0.0;
          y_terms += std::fabs(bias);
          y = dw::plus(y, bias, dropped);
          e_y += dropped;
        }
      }
      double y_odd;
      if (!dw::inRange(y) || !dw::roundToOdd(y, widen * dw::up(e_y + kMpfrSlack * y_terms), y_odd)) return false;
      setPlainY(s, ref, e, j, y_odd, xhat, bias, r_near);
    }

    // dx = (a - (x rb) c) rb, rb the backward's rstd (Llama's too: x-hat
    // unrounded; under stats=T x rb is one exact twoProd of a T value).
    const dw::DW xb = s.stats_in_T ? dw::twoProd(rb, xv) : xr;
    const double e_xb = s.stats_in_T ? 0.0 : e_xr, xhat_b = xv * rb;
    const dw::DW t = dw::times(xb, c);
    double e_diff = e_xb * std::fabs(c.h) + std::fabs(xb.h) * e_c + 4.0 * kU2 * std::fabs(t.h);
    dw::DW diff;
    if (s.offset == 0.0) {
      diff = dw::plus(dw::DW{-t.h, -t.l}, a);  // a = w dy exact
      e_diff += 2.0 * kU2 * std::fabs(diff.h);
    } else {
      const dw::DW a_words = dw::times(s.w_words[j], dyv);
      diff = dw::plus(dw::DW{-t.h, -t.l}, a_words);
      e_diff += 2.0 * kU2 * std::fabs(a_words.h) + 3.01 * kU2 * std::fabs(diff.h);
    }
    dw::DW dx = dw::times(diff, b.words);
    double e_dx = e_diff * b.words.h + std::fabs(diff.h) * e_b + 4.0 * kU2 * std::fabs(dx.h);
    double dx_terms = rb * (std::fabs(a) + std::fabs(xhat_b * c_near) + std::fabs(xhat_b) * m);
    if (s.stats_in_T && xv == 0.0 && a != 0.0 && s.offset == 0.0) {
      // t = (x rb) c is an exact zero, so dx = a rb: one product of an
      // exact double and a T value, exact here (twoProd) and in MPFR's 160
      // bits. (Such rows, zero rows above all, had dx on a double, which no
      // nonzero bound decides: they went to MPFR whole.)
      dx = dw::twoProd(a, rb);
      e_dx = dx_terms = 0.0;
    }
    const double g = addendAt(s, i, j);
    if (s.addend) {  // + g: DWPlusFP, its own error known exactly
      double dropped = 0.0;
      dx = dw::plus(dx, g, dropped);
      e_dx += dropped;
      dx_terms += std::fabs(g);
    }
    double dx_odd;
    if (!dw::inRange(dx) || !dw::roundToOdd(dx, widen * dw::up(e_dx + kMpfrSlack * dx_terms), dx_odd)) {
      if (!s.stats_in_T || !mpfr_dx) return false;
      RowScratch& sc = scratchOf(s, mpfr_dx->sc);
      if (!c_by_mpfr) {
        mpfr_set_d(sc.rb, rb, MPFR_RNDN);  // the saved round_T(r): exact
        mpfrBackwardC(s, i, sc);
        c_by_mpfr = true;
      }
      mpfr_mul_d(sc.t, sc.rb, xv, MPFR_RNDN);  // the backward's x rb
      dx_odd = mpfrDxOdd(s, i, j, sc);
      ++mpfr_dx->made;
    }
    setDx(s, ref, e, dx_odd, a, xv, c_near, m, rb, b.spread, g);
  }
  return true;
}

/// Row i's dW terms rb (dy x) into the chunk's double words, and the
/// magnitudes. `quantum` (stats=T, else null) keeps, per column, the largest
/// power of two every term so far is a multiple of, 0 once a term is not a
/// double: rb a T value, 16-bit inputs make terms of at most 33 bits, whose
/// column sums are often exactly doubles themselves, which no nonzero bound
/// decides (mp::decideExactLeafColumn sums them exactly instead of MPFR).
void addFastDwRow(const Setup& s, int64_t i, const BackwardRstd& b, mp::WordColumnChunk& chunk,
                  std::vector<double>* quantum) {
  for (int64_t j = 0; j < s.N; ++j) {
    const double xv = s.x.value(i, j), dyv = s.in.dy.value(i, j);
    const dw::DW term = dw::times(b.words, dyv * xv);  // dy x exact: 48 bits
    if (quantum) {
      double& q = (*quantum)[size_t(j)];
      q = std::min(q, term.l == 0.0 ? dw::quantum(term.h) : 0.0);
    }
    chunk.sum[j] = dw::plus(chunk.sum[j], term);
    chunk.err[j] += (b.rel + 2.0 * kU2) * std::fabs(term.h) + 3.01 * kU2 * std::fabs(chunk.sum[j].h);
    addPlainDwMagnitudes(chunk, j, dyv, xv, b.near, b.spread);
    addDwGain(chunk, j, dyv, b.near);
  }
}

/// Row i's Llama dW leaves (exact doubles) into the chunk's double words,
/// with the magnitudes; `quantum` keeps, per column, the largest power of
/// two every leaf so far is a multiple of.
void addFastLlamaDwRow(const Setup& s, int64_t i, double r_near, const std::vector<RoundingPoint>& q,
                       mp::WordColumnChunk& chunk, std::vector<double>& quantum, DwRows& rows) {
  for (int64_t j = 0; j < s.N; ++j) {
    const double dyv = s.in.dy.value(i, j);
    const double term = llamaDwLeaf(s, chunk, rows, i * s.N + j, j, dyv, q[size_t(j)]);
    chunk.sum[j] = dw::plus(chunk.sum[j], term);
    chunk.err[j] += 3.01 * kU2 * std::fabs(chunk.sum[j].h);
    quantum[size_t(j)] = std::min(quantum[size_t(j)], dw::quantum(term));
    addDwGain(chunk, j, dyv, r_near);
  }
}

/// dW from the fast path's chunk sums: the columns in chunk order, summed
/// exactly where their terms are exact doubles (`leaf_quantum`, per column,
/// addFastDwRow's; null: not known), those the double words do not decide
/// summed by MPFR over `whole()`'s inputs; then the budgets. Returns the
/// undecided columns.
template <typename Whole>
std::vector<int64_t> finishFastDw(const Setup& s, const AccuracyContract& contract, const mp::WordColumnFold& dw_chunks,
                                  const std::vector<mp::OrderedColumnBound>& ordered, double widen, Whole whole,
                                  RmsNormReference& ref, const std::vector<double>* leaf_quantum = nullptr) {
  std::vector<mp::ColumnTotal> totals(size_t(s.N));
  std::vector<int64_t> undecided;
  for (int64_t j = 0; j < s.N; ++j) {
    mp::ColumnTotal& t = totals[size_t(j)];
    if (leaf_quantum && mp::decideExactLeafColumn(dw_chunks, j, (*leaf_quantum)[size_t(j)], t)) continue;
    if (!mp::decideWordColumn(dw_chunks, j, kMpfrSlack, widen, t)) undecided.push_back(j);
  }
  if (!undecided.empty()) {
    const Setup& w = *whole();
    RowScratch sc(w.N, false);
    const std::vector<double> exact = mp::mpfrColumnSums(
        w.M, dw_chunks.chunks(), undecided,
        [&](int64_t i) {
          mpfrRstd(w, i, sc);
          if (w.stats_in_T)  // the saved round_T(r), as mpfrRow's backward takes it
            mpfr_set_d(sc.r, savedRstd(w, toDoubleRoundToOdd(sc.r), mpfr_get_d(sc.r, MPFR_RNDN)).spec, MPFR_RNDN);
        },
        [&](mpfr_ptr out, int64_t i, int64_t j) {
          mpfr_mul_d(out, sc.r, w.in.dy.value(i, j) * w.x.value(i, j), MPFR_RNDN);  // as mpfrRow's dW terms
        });
    for (size_t k = 0; k < undecided.size(); ++k) totals[size_t(undecided[k])].exact = exact[k];
  }
  finishDw(s, contract, totals, ordered, ref);
  return undecided;
}

/// Row i by the fast path, or by MPFR where the double words do not decide
/// it (`fell_back`); `b` is the rstd its backward consumes (for dW's
/// leaves). `sc` is made on the first fallback. `mpfr_dx`: the row's dx
/// elements made by MPFR in a row otherwise decided (stats=T).
void fastOrMpfrRow(const Setup& s, RmsNormReference& ref, int64_t i, double widen, BackwardRstd& b,
                   std::vector<RoundingPoint>& llama_q, std::unique_ptr<RowScratch>& sc, DwRows* rows, bool& fell_back,
                   int64_t& mpfr_dx) {
  MpfrDxElements elements{sc};
  fell_back = !fastRow(s, ref, i, widen, b, llama_q, &elements);
  mpfr_dx = fell_back ? 0 : elements.made;
  if (!fell_back) return;
  mpfrRow(s, ref, i, scratchOf(s, sc), nullptr, rows);
  // r from its 160-bit value: the double word within 2^-105 of the exact r.
  const double r_near = mpfr_get_d(sc->r, MPFR_RNDN);
  mpfr_sub_d(sc->t, sc->r, r_near, MPFR_RNDN);
  b = BackwardRstd{dw::DW{r_near, mpfr_get_d(sc->t, MPFR_RNDN)}, 0x1p-104, r_near, 0.0};
  if (s.stats_in_T) {
    const RoundingPoint saved = savedRstd(s, ref.rstd.exact[ref.rstd.index(i, 0)], r_near);
    b = BackwardRstd{dw::DW{saved.spec, 0.0}, 0.0, saved.spec, saved.spread};
  }
}

/// The fast path over every row: the whole reference, or, unless
/// `hold_rows`, all of it but y's, dx's and dresidual's rows (as
/// mpfrSweep). Under Llama rounding a row or dW column the double words do
/// not decide sends the whole case to mpfrSweep (`*by_mpfr` says so).
RmsNormReference fastSweep(const Setup& s, const AccuracyContract& contract, ThreadPool& pool, FastOracleCounts* counts,
                           double widen, bool hold_rows, bool* by_mpfr = nullptr) {
  const int64_t elements = s.M * (2 * s.N + 1) + s.N;
  RmsNormReference ref = emptyReference(s, contract, pool, true, hold_rows, counts, widen);
  const int64_t chunks = mp::columnChunkCount(s.M, s.N);
  mp::WordColumnFold dw_chunks(chunks, s.N);  // combined in chunk order
  DwRows rows(s, orderedDw(contract));
  std::vector<int64_t> fallback_rows(size_t(chunks), 0), fallback_dx(size_t(chunks), 0);
  // Llama: the per-column quantum of the leaves (exact doubles), over every
  // chunk; a row the words do not decide sends the whole case to MPFR
  // (rare: its leaves would need MPFR's rounding points). stats=T: of the
  // terms, 0 in a column where one is not a double (addFastDwRow).
  const bool leaf_quanta = s.llama || s.stats_in_T;
  std::vector<double> q(leaf_quanta ? size_t(s.N) : 0, INFINITY);
  std::atomic<bool> llama_fell_back{false};
  struct Worker {
    Worker(const Setup& s, bool hold_rows)
        : llama_q(s.llama ? size_t(s.N) : 0), window(hold_rows ? RmsNormReference{} : rowTensors(s, 0, 1)) {}
    std::unique_ptr<RowScratch> sc;  // only for rows the double words do not decide
    std::vector<RoundingPoint> llama_q;
    RmsNormReference window;
  };
  struct Chunk {
    std::unique_ptr<mp::WordColumnChunk> words;
    std::vector<double> quantum;
  };
  PerWorker<Worker> workers(pool, [&] { return std::make_unique<Worker>(s, hold_rows); });
  sweepChunksInOrder(
      pool, chunks,
      [&](unsigned worker, int64_t chunk) {
        Worker& w = workers[worker];
        Chunk out{std::make_unique<mp::WordColumnChunk>(s.N),
                  std::vector<double>(leaf_quanta ? size_t(s.N) : 0, INFINITY)};
        for (int64_t i = s.M * chunk / chunks; i < s.M * (chunk + 1) / chunks && !llama_fell_back; ++i) {
          if (!hold_rows) setFirstRow(w.window, i);
          BackwardRstd b;
          bool fell_back = false;
          int64_t mpfr_dx = 0;
          if (s.llama) {
            if (!fastRow(s, hold_rows ? ref : w.window, i, widen, b, w.llama_q)) {
              llama_fell_back = true;
              break;
            }
          } else {
            fastOrMpfrRow(s, hold_rows ? ref : w.window, i, widen, b, w.llama_q, w.sc, &rows, fell_back, mpfr_dx);
          }
          if (!hold_rows) keepStatistics(w.window, i, ref);
          fallback_rows[size_t(chunk)] += fell_back;
          fallback_dx[size_t(chunk)] += mpfr_dx;
          rows.rstd_backward[size_t(i)] = s.stats_in_T ? b.near : ref.rstd.exact[size_t(i)];
          if (s.llama) addFastLlamaDwRow(s, i, b.near, w.llama_q, *out.words, out.quantum, rows);
          else addFastDwRow(s, i, b, *out.words, s.stats_in_T ? &out.quantum : nullptr);
        }
        return out;
      },
      [&](int64_t, Chunk chunk) {
        dw_chunks.add(std::move(chunk.words));
        for (size_t j = 0; j < chunk.quantum.size(); ++j) q[j] = std::min(q[j], chunk.quantum[j]);
      });
  workers.clear();

  if (s.llama) {
    // The leaves are exact doubles: a column whose sum of magnitudes stays
    // below dw::kExactSumQuanta times its quantum is summed exactly
    // (mp::decideExactLeafColumns, as a bias gradient's), else decided from the
    // words' bound; a column neither decides sends the case to MPFR.
    std::vector<mp::ColumnTotal> totals(size_t(s.N));
    if (llama_fell_back || !mp::decideExactLeafColumns(dw_chunks, q, widen, totals).empty()) {
      if (counts) counts->fell_back += elements;
      if (by_mpfr) *by_mpfr = true;
      return mpfrSweep(s, contract, pool, hold_rows);
    }
    finishDw(s, contract, totals, orderedBounds(s, contract, rows, pool), ref);
    if (counts) counts->fast += elements;
    return ref;
  }
  const std::vector<int64_t> undecided = finishFastDw(
      s, contract, dw_chunks, orderedBounds(s, contract, rows, pool), widen, [&] { return &s; }, ref,
      s.stats_in_T ? &q : nullptr);
  if (counts) {
    int64_t rows_back = 0, dx_back = 0;
    for (int64_t n : fallback_rows) rows_back += n;
    for (int64_t n : fallback_dx) dx_back += n;
    const int64_t fell_back = rows_back * (2 * s.N + 1) + dx_back + int64_t(undecided.size());
    counts->fast += elements - fell_back;
    counts->fell_back += fell_back;
    counts->mpfr_rows += rows_back;
  }
  return ref;
}

/// y's, dx's and dresidual's rows made again, a block at a time, for the
/// judge: each row by the very arithmetic of the sweep that made the rest
/// (fastSweep's row, with its fallback, or mpfrSweep's), so the same
/// doubles as a held reference's. The inputs are the case's, kept by the op
/// (ExecContext::inputs) for as long as the reference lives; `owned` keeps
/// matrices an oracle derived from them (fused add's residual_out).
class RmsNormRows final : public ReferenceRows {
 public:
  RmsNormRows(const RmsNormInputs& in, const AccuracyContract& contract, bool fast,
              std::vector<std::shared_ptr<const HostMatrix>> owned)
      : owned_(std::move(owned)), in_(in), contract_(contract), s_(in_, contract_), fast_(fast) {}

  std::vector<ReferenceTensor> rows(int64_t begin, int64_t end) const override {
    RmsNormReference block = rowTensors(s_, begin, end - begin);
    std::unique_ptr<RowScratch> sc;
    std::vector<RoundingPoint> llama_q(s_.llama ? size_t(s_.N) : 0);
    for (int64_t i = begin; i < end; ++i) {
      if (fast_) {
        BackwardRstd b;
        bool fell_back = false;
        int64_t mpfr_dx = 0;
        fastOrMpfrRow(s_, block, i, 1.0, b, llama_q, sc, nullptr, fell_back, mpfr_dx);
      } else {
        mpfrRow(s_, block, i, scratchOf(s_, sc), nullptr, nullptr);
      }
    }
    if (s_.backward_may_overflow)  // as finishDw does for a held dx
      for (ReferenceTensor* t : {&block.dx, &block.dresidual}) anyNonFiniteWhereNotFinite(*t);
    if (in_.dresidual_dtype) return movedTensors(block.y, block.dx, block.dresidual);
    return movedTensors(block.y, block.dx);
  }

 private:
  const std::vector<std::shared_ptr<const HostMatrix>> owned_;
  const RmsNormInputs in_;
  const AccuracyContract contract_;
  const Setup s_;
  const bool fast_;
};

}  // namespace

RmsNormReference rmsnormReferenceFast(const RmsNormInputs& in, const AccuracyContract& contract, ThreadPool& pool,
                                      FastOracleCounts* counts, double widen) {
  const Setup s(in, contract);
  return fastSweep(s, contract, pool, counts, widen, /*hold_rows=*/true);
}

RmsNormReference rmsnormReferenceStreamed(const RmsNormInputs& in, const AccuracyContract& contract, ThreadPool& pool,
                                          OracleMode mode, std::vector<std::shared_ptr<const HostMatrix>> owned) {
  if (mode == OracleMode::Audit) return rmsnormReference(in, contract, pool, mode);
  const Setup s(in, contract);
  const int64_t per_row_elements = s.M * s.N * (in.dresidual_dtype ? 3 : 2);
  bool by_mpfr = mode != OracleMode::Fast;
  RmsNormReference ref;
  if (by_mpfr) {
    oracleCounts().mpfr_only += s.M * (2 * s.N + 1) + s.N;
    ref = mpfrSweep(s, contract, pool, /*hold_rows=*/false);
  } else {
    ref = fastSweep(s, contract, pool, &oracleCounts(), 1.0, /*hold_rows=*/false, &by_mpfr);
  }
  auto rows = std::make_shared<const RmsNormRows>(in, contract, !by_mpfr, std::move(owned));
  for (ReferenceTensor* t : {&ref.y, &ref.dx, &ref.dresidual})
    if (!t->name.empty()) t->rows_from = rows;
  oracleCounts().streamed += per_row_elements;
  return ref;
}

RmsNormReference rmsnormReference(const RmsNormInputs& in, const AccuracyContract& contract, ThreadPool& pool,
                                  OracleMode mode) {
  switch (mode) {
    case OracleMode::Mpfr:
      oracleCounts().mpfr_only += in.x.rows * (2 * in.x.cols + 1) + in.x.cols;
      return rmsnormReferenceMpfr(in, contract, pool);
    case OracleMode::Audit: {
      RmsNormReference exact = rmsnormReferenceMpfr(in, contract, pool);
      const RmsNormReference fast = rmsnormReferenceFast(in, contract, pool, &oracleCounts(), 1.0);
      std::vector<const ReferenceTensor*> mpfr{&exact.y, &exact.rstd, &exact.dx, &exact.dw},
          certified{&fast.y, &fast.rstd, &fast.dx, &fast.dw};
      if (in.dresidual_dtype) mpfr.push_back(&exact.dresidual), certified.push_back(&fast.dresidual);
      auditReferences("rmsnorm", mpfr, certified);
      return exact;
    }
    case OracleMode::Fast:
    default: return rmsnormReferenceFast(in, contract, pool, &oracleCounts(), 1.0);
  }
}

std::vector<dw::DW> rmsnormRstdWords(const RmsNormInputs& in, const AccuracyContract& contract,
                                     const std::vector<int64_t>& rows) {
  const Setup s(in, contract);
  RowScratch sc(s.N, false);
  std::vector<dw::DW> out;
  for (const int64_t i : rows) {
    // As the fast path takes the r of a row it falls back on: from 160 bits,
    // within 2^-105 of the exact r.
    mpfrRstd(s, i, sc);
    const double r_near = mpfr_get_d(sc.r, MPFR_RNDN);
    mpfr_sub_d(sc.t, sc.r, r_near, MPFR_RNDN);
    out.push_back(dw::DW{r_near, mpfr_get_d(sc.t, MPFR_RNDN)});
  }
  return out;
}

ReferenceTensor rmsnormDwFromPass(const RmsNormInputs& in, const AccuracyContract& contract,
                                  const mp::WordColumnFold& chunks, const std::vector<mp::OrderedColumnBound>& ordered,
                                  double widen, const std::function<const RmsNormInputs&()>& whole,
                                  FastOracleCounts* counts) {
  const Setup s(in, contract);
  RmsNormReference ref;
  ref.dw = ReferenceTensor::zeros("dw", s.W, 1, s.N, false);
  ref.dw.withMagnitudes();
  std::unique_ptr<Setup> whole_setup;
  const std::vector<int64_t> undecided = finishFastDw(
      s, contract, chunks, ordered, widen,
      [&] {
        if (!whole_setup) whole_setup = std::make_unique<Setup>(whole(), contract);
        return whole_setup.get();
      },
      ref);
  if (counts) {
    counts->fast += s.N - int64_t(undecided.size());
    counts->fell_back += int64_t(undecided.size());
  }
  return std::move(ref.dw);
}

}  // namespace ulpcheck
