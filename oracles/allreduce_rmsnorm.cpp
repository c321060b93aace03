// MPFR oracle of allreduce + residual add + RMSNorm, and its error budget.
//
// ---------------------------------------------------------------------------
// The exact values
//
// The spec rounds twice to T before the norm (s = round_T(sum_r x_r), then
// residual_out = round_T(s + residual)), so residual_out is a value of T,
// determined exactly: the rank sum and the residual add are done at 320 bits,
// which holds any sum of up to 8 fp32 values exactly (their exponents span
// 277 bits), then rounded to double with round-to-odd and from there to T.
// y is RMSNorm(residual_out) * w, taken from the RMSNorm oracle
// (oracles/rmsnorm.cpp) on the exact residual_out.
//
// ---------------------------------------------------------------------------
// The budget
//
// A conforming kernel sums the R partials in fp32 in some order (any order:
// NCCL's ring order is not rank order). Every x_r is a multiple of its own
// ulp q_r, so every partial sum of any order is a multiple of q = min_r q_r
// bounded by A = sum_r |x_r|: when A / q < 2^24 every partial sum is an fp32
// value, the fp32 sum is exact in every order, and s_kernel = s. Then the
// kernel's residual_out must equal the spec's bit for bit: budget 0. (For
// 16-bit T and inputs of similar size this is nearly every element; for fp32
// T it is only sums like x + 0.)
//
// Otherwise the fp32 sum errs by at most e_s = K (R - 1) u A (a serial chain
// of R - 1 adds in any order), and s_kernel, s are roundings to T of values
// e_s apart: |s_kernel - s| <= d_s := e_s + ulp_T(|s| + e_s). The residual add
// is one rounding of values d_s apart: |residual_out_kernel - residual_out|
// <= d_ro := d_s + ulp_T(|residual_out| + d_s), the budget of residual_out.
//
// Under acc=T (sum_in_activation_dtype; FlashInfer's fp32_acc=False) the
// partials are added one rank at a time in rank order, each add rounded to
// T: s = round_T(...round_T(round_T(x_0 + x_1) + x_2)... + x_{R-1}), exact
// (each step is one correctly rounded add of two values, as below). With
// R <= 2 that is the one rounding above, and the budget above is kept. From
// R = 3 on, the budget is 0 where every partial sum of every order is a
// value of T (A / q < 2^p_T, p_T the precision of T, and A <= max_T), so
// that residual_out is bitwise there as well as in NCCL's fp32 pipeline, and
// fused_vs_unfused compares those rows only. Elsewhere it also admits
// another serial order of adds in T (its s is within 2 e_s of rank order's,
// e_s = K (R - 1) u_T A), as long as no order overflows: near overflow
// (A > max_T) the spec is rank order's own, and another order's infinity
// (or rank order's infinity missed) fails. Where rank order's s overflows
// T, the spec's residual_out is infinite: any non-finite result and no
// finite one (budget +inf, oracles/reference.h).
//
// Under res=fp32 the residual and residual_out are fp32 and the residual add
// rounds to fp32 (ulp_fp32 in d_ro); s stays a T value (the allreduce's
// result in the activation dtype), so with R = 1 residual_out = round_fp32(x
// + residual) is the kernel's one fp32 add, exact in the spec: budget 0.
// The RMSNorm oracle then normalises an fp32 x into a T y.
//
// Under norm_of_fp32_sum the norm reads v = round_fp32(s + residual) instead
// of residual_out (FlashInfer and quack normalise the fp32 sum and store its
// rounding): one rounding of values d_s apart, so |v_kernel - v| <= d_v :=
// d_s + ulp_fp32(|v| + d_s), and d_v takes d_ro's place below.
//
// y: the RMSNorm oracle's budget for the kernel's declared row depth, on the
// spec's residual_out (or v), plus what an error d_ro in it can move y by.
// RMSNorm's Jacobian dy_j/dro_k = g_j r (delta_jk - xhat_j xhat_k / N), with
// g_j = offset + w_j the effective weight (w in its own dtype, fp32 beside
// 16-bit activations in the AMP setup), gives, to first order (safety K),
//   |dy_j| <= K |g_j| r (d_ro_j + |xhat_j| mean_k(|xhat_k| d_ro_k)).
// The spec's weight dtype and offset reach y through the RMSNorm oracle. Its
// rounding=llama point is modelled only where what the norm reads is exact
// (d_ro = 0 everywhere: one rank, fused_add_rmsnorm's, or sums exact in any
// order) and in T: a residual_out off by d_ro moves x-hat across T's
// rounding boundaries by more than that oracle's spreads allow for, so the
// fused allreduce variants do not declare it.
#include "oracles/allreduce_rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "oracles/double_word.h"
#include "oracles/mpfr_util.h"
#include "oracles/oracle_mode.h"
#include "oracles/rmsnorm.h"

namespace ulpcheck {

namespace {

// 277 bits span the fp32 exponents; 8 ranks add 3 bits of carries.
constexpr mpfr_prec_t kExactSumBits = 320;

/// Round-to-odd double of an MPFR value, then rounded to T: the correctly
/// rounded T value.
double roundToT(DType t, mpfr_srcptr v) { return roundToFormat(t, mp::toDoubleRoundToOdd(v)); }

// The certified fast path of residual_out (--oracle fast; the MPFR path
// beside it for --oracle mpfr and the audit).
//
// s = round_T(sum_r x_r): the partials summed in a double word, x_0 first.
// Each step is error-free but for one addition: twoSum(h, x_r) = (a, b)
// exactly, the low words l + b = c + d by twoSum (exact), and
// twoSum(a, c) the new (h, l), exact; only d, the part of l + b a double
// word cannot hold, is dropped, and it is known: the sum is within
// sum |d| of the exact one (0 for the usual partials, whose sums fit in
// 106 bits). The round-to-odd double of the exact sum is taken where that
// decides it (dw::roundToOdd), and rounding it to T is then round_T of the
// exact sum, as the MPFR path's toDoubleRoundToOdd is. A zero sum (IEEE's
// sign is the MPFR path's to keep), a sum not finite and an undecided one
// are computed by MPFR.
// residual_out = round_Rd(s + residual): twoSum of two doubles is exact, so
// its round-to-odd double is decided, IEEE's x + (-x) = +0 and
// (-0) + (-0) = -0 included (twoSum's high word holds them).

/// round_T of the exact sum of x[0..R)(i, j) into `s`; false where undecided.
bool fastRankSum(const std::vector<HostMatrix>& x, int64_t i, int64_t j, DType T, double& s) {
  dw::DW sum{x[0].value(i, j), 0.0};
  double dropped = 0.0;
  if (!std::isfinite(sum.h)) return false;
  for (size_t r = 1; r < x.size(); ++r) {
    const double v = x[r].value(i, j);
    if (!std::isfinite(v)) return false;
    const dw::DW high = dw::twoSum(sum.h, v), low = dw::twoSum(sum.l, high.l);
    dropped += std::fabs(low.l);
    sum = dw::twoSum(high.h, low.h);
  }
  double odd;
  if (sum.h == 0.0 || !std::isfinite(sum.h) || !dw::roundToOdd(sum, dw::up(dropped), odd)) return false;
  s = roundToFormat(T, odd);
  return true;
}

/// round_D(a + b), exact in a double word: the residual add, and under
/// acc=T each rank's add.
double fastRoundedAdd(double a, double b, DType D) {
  double odd;
  const dw::DW t = dw::twoSum(a, b);
  // An exact double word always decides: |t.l| <= half an ulp of t.h, and a
  // t.h that is a power of two with t.l = -(the gap below it) cannot come
  // out of twoSum (that sum is the double below t.h, which RN returns).
  if (!dw::roundToOdd(t, 0.0, odd)) throw std::logic_error("allreduce_rmsnorm oracle: an exact sum left undecided");
  return roundToFormat(D, odd);
}

/// acc=T's s: the partials added in rank order, each add rounded to T (an
/// infinite running sum stays so: the partials are finite); false where a
/// partial is not finite (MPFR's to compute).
bool fastRankOrderSumInT(const std::vector<HostMatrix>& x, int64_t i, int64_t j, DType T, double& s) {
  s = x[0].value(i, j);
  if (!std::isfinite(s)) return false;
  for (size_t r = 1; r < x.size(); ++r) {
    const double v = x[r].value(i, j);
    if (!std::isfinite(v)) return false;
    if (!std::isinf(s)) s = fastRoundedAdd(s, v, T);
  }
  return true;
}

}  // namespace

AllreduceRmsNormReference allreduceRmsNormReference(const AllreduceRmsNormInputs& in, const AccuracyContract& contract,
                                                    ThreadPool& pool, OracleMode mode) {
  const HostMatrix& r0 = in.x.at(0);
  const int64_t M = r0.rows, N = r0.cols;
  const DType T = r0.dtype;
  const DType Rd = in.residual.dtype;  // residual and residual_out: T, or fp32 (res=fp32)
  const int R = static_cast<int>(in.x.size());
  const double K = tolerance::kBudgetSafety;
  // acc=T differs from one rounding of the exact sum from three ranks on.
  const bool rank_order_in_t = in.sum_in_activation_dtype && R > 2;

  AllreduceRmsNormReference ref{ReferenceTensor::zeros("residual_out", Rd, M, N, true),
                                ReferenceTensor::zeros("y", T, M, N, true)};
  // What the norm reads, as a matrix of its dtype for the RMSNorm oracle:
  // the spec's residual_out, or round_fp32(s + residual); and its budgets.
  const DType Vd = in.norm_of_fp32_sum ? DType::F32 : Rd;
  const bool v_is_residual_out = Vd == Rd;
  HostMatrix v{Vd, M, N, N, PackedBits(storageBytes(Vd), size_t(M * N))};
  std::vector<double> v_budget(size_t(M * N));

  std::vector<int64_t> fell_back(size_t(M), 0);  // per row: elements the double words did not decide
  pool.forChunks(M, [&](unsigned, int64_t row_begin, int64_t row_end) {
    mp::Real sum(kExactSumBits);
    for (int64_t i = row_begin; i < row_end; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double abs_sum = 0.0, q = INFINITY;
        for (int r = 0; r < R; ++r) {
          const double v = in.x[size_t(r)].value(i, j);
          abs_sum += std::fabs(v);
          if (v != 0.0) q = std::min(q, ulpOf(T, std::fabs(v)));
        }
        double s = 0.0, fast_out = 0.0, fast_v = 0.0;
        const bool fast = mode != OracleMode::Mpfr &&
                          (rank_order_in_t ? fastRankOrderSumInT(in.x, i, j, T, s) : fastRankSum(in.x, i, j, T, s));
        if (fast) {
          fast_out = std::isinf(s) ? s : fastRoundedAdd(s, in.residual.value(i, j), Rd);
          fast_v = v_is_residual_out || std::isinf(s) ? fast_out : fastRoundedAdd(s, in.residual.value(i, j), Vd);
        }
        if (!fast || mode == OracleMode::Audit) {
          for (int r = 0; r < R; ++r) {
            const double v = in.x[size_t(r)].value(i, j);
            // Exact. Starting from x_0 keeps IEEE's sign of a zero sum (-0 only
            // when every partial is -0), which a start from +0 would lose.
            if (r == 0) mpfr_set_d(sum, v, MPFR_RNDN);
            else mpfr_add_d(sum, sum, v, MPFR_RNDN);
            // acc=T: each add rounded to T (exact in T, so set back exactly).
            if (rank_order_in_t && r > 0) mpfr_set_d(sum, roundToT(T, sum), MPFR_RNDN);
          }
          const double exact_s = roundToT(T, sum);
          mpfr_set_d(sum, exact_s, MPFR_RNDN);
          mpfr_add_d(sum, sum, in.residual.value(i, j), MPFR_RNDN);  // exact
          const double exact_out = std::isinf(exact_s) ? exact_s : roundToT(Rd, sum);
          const double exact_v = v_is_residual_out || std::isinf(exact_s) ? exact_out : roundToT(Vd, sum);
          if (fast && !(dw::bitsOf(exact_s) == dw::bitsOf(s) && dw::bitsOf(exact_out) == dw::bitsOf(fast_out) &&
                        dw::bitsOf(exact_v) == dw::bitsOf(fast_v)))
            throw OracleDisagreement(fmt::format(
                "oracle audit, allreduce_rmsnorm: residual_out[{},{}]: MPFR s {:a} out {:a} normed {:a}, fast s {:a} "
                "out {:a} normed {:a}",
                i, j, exact_s, exact_out, exact_v, s, fast_out, fast_v));
          if (!fast) ++fell_back[size_t(i)];
          s = exact_s, fast_out = exact_out, fast_v = exact_v;
        }
        // Every partial sum exact in every order, in fp32 (in T under acc=T):
        // A / q < 2^24 (2^p_T), with a margin for abs_sum's own rounding in
        // double (and no partial sum that could overflow in some order).
        const DType acc = rank_order_in_t ? T : DType::F32;
        const bool exact_any_order = abs_sum == 0.0 || (abs_sum * (1.0 + 0x1p-40) / q < 1.0 / unitRoundoff(acc) &&
                                                        abs_sum <= maxFinite(acc));
        // A serial order's error; under acc=T, between two orders' (rank order's s and another).
        const double e_s = exact_any_order ? 0.0 : K * double(R - 1) * unitRoundoff(acc) * abs_sum;
        const double d_s = exact_any_order   ? 0.0
                           : rank_order_in_t ? 2.0 * e_s + ulpOf(T, std::fabs(s) + 2.0 * e_s)
                                             : e_s + ulpOf(T, std::fabs(s) + e_s);
        // acc=T's rank order overflowed T: the spec's own result is infinite.
        const bool spec_overflowed = rank_order_in_t && std::isinf(s);
        const double out = fast_out;
        const int64_t e = i * N + j;
        ref.residual_out.exact[size_t(e)] = out;
        ref.residual_out.budget[size_t(e)] = spec_overflowed ? INFINITY
                                             : d_s == 0.0    ? 0.0
                                                             : d_s + ulpOf(Rd, std::fabs(out) + d_s);
        v.bits.set(size_t(e), doubleToBits(Vd, fast_v));
        v_budget[size_t(e)] = spec_overflowed ? INFINITY : d_s == 0.0 ? 0.0 : d_s + ulpOf(Vd, std::fabs(fast_v) + d_s);
      }
  });

  int64_t undecided = 0;
  for (int64_t n : fell_back) undecided += n;
  if (mode == OracleMode::Mpfr) {
    oracleCounts().mpfr_only += M * N;
  } else {
    oracleCounts().fast += M * N - undecided;
    oracleCounts().fell_back += undecided;
  }
  if (kRounding(in.spec) != Rounding::Plain &&
      (Vd != T || std::any_of(v_budget.begin(), v_budget.end(), [](double b) { return b != 0.0; })))
    throw std::invalid_argument(
        "the allreduce_rmsnorm oracle models rounding=llama only where the norm reads an exact value of T");
  const HostMatrix no_grad{T, M, N, N, PackedBits(storageBytes(T), size_t(M * N))};
  // The RMSNorm's spec (it reads its own fields); its x is v, whatever its dtype.
  // Named members: the RMSNorm oracle's inputs of its own fields (a bias) stay its business.
  const RmsNormInputs norm_inputs{.x = v, .w = in.w, .dy = no_grad, .eps = in.eps, .spec = in.spec, .y_dtype = T};
  RmsNormReference norm = rmsnormReference(norm_inputs, contract, pool, mode);
  ref.y.exact = std::move(norm.y.exact);
  ref.y.budget = std::move(norm.y.budget);

  // What the budget of the norm's input can move y by.
  for (int64_t i = 0; i < M; ++i) {
    const double r = norm.rstd.exact[size_t(i)];
    double coupled = 0.0, largest = 0.0;  // mean_k |xhat_k| d_v_k, max_k d_v_k
    for (int64_t k = 0; k < N; ++k) {
      const double d_v = v_budget[size_t(i * N + k)];
      coupled += std::fabs(v.value(i, k) * r) * d_v;
      largest = std::max(largest, d_v);
    }
    coupled /= double(N);
    if (largest == 0.0) continue;  // the row's v is exact: RMSNorm's own budget
    // A row whose residual_out overflowed (r = 0) has y = NaN or 0 exactly:
    // nothing to propagate.
    if (!std::isfinite(coupled) || !std::isfinite(r) || r == 0.0) continue;
    for (int64_t j = 0; j < N; ++j) {
      const int64_t e = i * N + j;
      const double xhat = std::fabs(v.value(i, j) * r);
      const double g = double(kWeightOffset(in.spec)) + in.w.value(0, j);
      ref.y.budget[size_t(e)] += K * std::fabs(g) * r * (v_budget[size_t(e)] + xhat * coupled);
    }
  }
  return ref;
}

}  // namespace ulpcheck
