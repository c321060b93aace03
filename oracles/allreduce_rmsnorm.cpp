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
// exact sum, as the MPFR path's toDoubleRoundToOdd is. A zero sum of adds
// (IEEE's sign is the MPFR path's to keep), a sum not finite and an
// undecided one are computed by MPFR; one rank's sum is x_0 itself.
// residual_out = round_Rd(s + residual): twoSum of two doubles is exact, so
// its round-to-odd double is decided, IEEE's x + (-x) = +0 and
// (-0) + (-0) = -0 included (twoSum's high word holds them).

/// round_T of the exact sum of x[0..R)(i, j) into `s`; false where undecided.
bool fastRankSum(const std::vector<HostMatrix>& x, int64_t i, int64_t j, DType T, double& s) {
  dw::DW sum{x[0].value(i, j), 0.0};
  double dropped = 0.0;
  if (!std::isfinite(sum.h)) return false;
  if (x.size() == 1) {
    // One partial (fused add's): no add, the sum is x_0 itself, a zero's
    // sign included, as the MPFR path's sum starts from x_0.
    s = roundToFormat(T, sum.h);
    return true;
  }
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

/// The case's constants.
struct ResidualSetup {
  explicit ResidualSetup(const AllreduceRmsNormInputs& in)
      : M(in.x.at(0).rows),
        N(in.x.at(0).cols),
        T(in.x.at(0).dtype),
        Rd(in.residual.dtype),
        // What the norm reads: the spec's residual_out, or round_fp32(s + residual).
        Vd(in.norm_of_fp32_sum ? DType::F32 : Rd),
        R(static_cast<int>(in.x.size())),
        // acc=T differs from one rounding of the exact sum from three ranks on.
        rank_order_in_t(in.sum_in_activation_dtype && R > 2) {}
  const int64_t M, N;
  const DType T;
  const DType Rd;  // residual and residual_out: T, or fp32 (res=fp32)
  const DType Vd;
  const int R;
  const bool rank_order_in_t;
  bool vIsResidualOut() const { return Vd == Rd; }
};

/// One element of residual_out and of what the norm reads (v), exact, with budgets.
struct ResidualElement {
  double out = 0, out_budget = 0, v = 0, v_budget = 0;
  bool by_mpfr = false;  // the double words did not decide it
};

/// Element (i, j): the fast path where it decides, MPFR where not (and both,
/// compared, under the audit). `sum` is the caller's MPFR scratch.
ResidualElement residualElement(const ResidualSetup& k, const AllreduceRmsNormInputs& in, int64_t i, int64_t j,
                                OracleMode mode, mp::Real& sum) {
  const DType T = k.T, Rd = k.Rd, Vd = k.Vd;
  const int R = k.R;
  const bool rank_order_in_t = k.rank_order_in_t;
  double abs_sum = 0.0, q = INFINITY;
  for (int r = 0; r < R; ++r) {
    const double v = in.x[size_t(r)].value(i, j);
    abs_sum += std::fabs(v);
    if (v != 0.0) q = std::min(q, ulpOf(T, std::fabs(v)));
  }
  ResidualElement e;
  double s = 0.0, fast_out = 0.0, fast_v = 0.0;
  const bool fast = mode != OracleMode::Mpfr &&
                    (rank_order_in_t ? fastRankOrderSumInT(in.x, i, j, T, s) : fastRankSum(in.x, i, j, T, s));
  if (fast) {
    fast_out = std::isinf(s) ? s : fastRoundedAdd(s, in.residual.value(i, j), Rd);
    fast_v = k.vIsResidualOut() || std::isinf(s) ? fast_out : fastRoundedAdd(s, in.residual.value(i, j), Vd);
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
    const double exact_v = k.vIsResidualOut() || std::isinf(exact_s) ? exact_out : roundToT(Vd, sum);
    if (fast && !(dw::bitsOf(exact_s) == dw::bitsOf(s) && dw::bitsOf(exact_out) == dw::bitsOf(fast_out) &&
                  dw::bitsOf(exact_v) == dw::bitsOf(fast_v)))
      throw OracleDisagreement(fmt::format(
          "oracle audit, allreduce_rmsnorm: residual_out[{},{}]: MPFR s {:a} out {:a} normed {:a}, fast s {:a} "
          "out {:a} normed {:a}",
          i, j, exact_s, exact_out, exact_v, s, fast_out, fast_v));
    e.by_mpfr = !fast;
    s = exact_s, fast_out = exact_out, fast_v = exact_v;
  }
  // Every partial sum exact in every order, in fp32 (in T under acc=T):
  // A / q < 2^24 (2^p_T), with a margin for abs_sum's own rounding in
  // double (and no partial sum that could overflow in some order).
  const DType acc = rank_order_in_t ? T : DType::F32;
  const bool exact_any_order = abs_sum == 0.0 ||
                               (abs_sum * (1.0 + 0x1p-40) / q < 1.0 / unitRoundoff(acc) && abs_sum <= maxFinite(acc));
  // A serial order's error; under acc=T, between two orders' (rank order's s and another).
  const double e_s = exact_any_order ? 0.0 : tolerance::kBudgetSafety * double(R - 1) * unitRoundoff(acc) * abs_sum;
  const double d_s = exact_any_order   ? 0.0
                     : rank_order_in_t ? 2.0 * e_s + ulpOf(T, std::fabs(s) + 2.0 * e_s)
                                       : e_s + ulpOf(T, std::fabs(s) + e_s);
  // acc=T's rank order overflowed T: the spec's own result is infinite.
  const bool spec_overflowed = rank_order_in_t && std::isinf(s);
  e.out = fast_out;
  e.out_budget = spec_overflowed ? INFINITY : d_s == 0.0 ? 0.0 : d_s + ulpOf(Rd, std::fabs(fast_out) + d_s);
  e.v = fast_v;
  e.v_budget = spec_overflowed ? INFINITY : d_s == 0.0 ? 0.0 : d_s + ulpOf(Vd, std::fabs(fast_v) + d_s);
  return e;
}

/// Rows [begin, end) of residual_out into `out` (a tensor or a block that
/// holds them) and of v's budget into `v_budget` (row-major from `begin`),
/// v's values into `v` and residual_out's into `out_values` unless null;
/// counts the elements MPFR computed.
int64_t residualRows(const ResidualSetup& k, const AllreduceRmsNormInputs& in, int64_t begin, int64_t end,
                     OracleMode mode, ReferenceTensor* out, double* v_budget, HostMatrix* v,
                     HostMatrix* out_values = nullptr) {
  mp::Real sum(kExactSumBits);
  int64_t by_mpfr = 0;
  for (int64_t i = begin; i < end; ++i)
    for (int64_t j = 0; j < k.N; ++j) {
      const ResidualElement e = residualElement(k, in, i, j, mode, sum);
      by_mpfr += e.by_mpfr;
      if (out && !out->exact.empty()) {
        out->exact[out->index(i, j)] = e.out;
        out->budget[out->index(i, j)] = e.out_budget;
      }
      v_budget[size_t((i - begin) * k.N + j)] = e.v_budget;
      if (v) v->bits.set(size_t(i * k.N + j), doubleToBits(k.Vd, e.v));
      if (out_values) out_values->bits.set(size_t(i * k.N + j), doubleToBits(k.Rd, e.out));
    }
  return by_mpfr;
}

/// What an error d_v in what the norm reads can move y by (see the
/// derivation), added to the budgets of y's rows [begin, end) in `y`; r the
/// rows' rstd (whole), v_budget the rows' d_v from `begin`.
void addNormInputError(const ResidualSetup& k, const AllreduceRmsNormInputs& in, const HostMatrix& v,
                       const std::vector<double>& rstd, int64_t begin, int64_t end, const double* v_budget,
                       ReferenceTensor& y) {
  const double K = tolerance::kBudgetSafety;
  const int64_t N = k.N;
  for (int64_t i = begin; i < end; ++i) {
    const double r = rstd[size_t(i)];
    const double* d_v = v_budget + (i - begin) * N;
    double coupled = 0.0, largest = 0.0;  // mean_k |xhat_k| d_v_k, max_k d_v_k
    for (int64_t c = 0; c < N; ++c) {
      coupled += std::fabs(v.value(i, c) * r) * d_v[c];
      largest = std::max(largest, d_v[c]);
    }
    coupled /= double(N);
    if (largest == 0.0) continue;  // the row's v is exact: RMSNorm's own budget
    // A row whose residual_out overflowed (r = 0) has y = NaN or 0 exactly:
    // nothing to propagate.
    if (!std::isfinite(coupled) || !std::isfinite(r) || r == 0.0) continue;
    for (int64_t j = 0; j < N; ++j) {
      const double xhat = std::fabs(v.value(i, j) * r);
      const double g = double(kWeightOffset(in.spec)) + in.w.value(0, j);
      y.budget[y.index(i, j)] += K * std::fabs(g) * r * (d_v[j] + xhat * coupled);
    }
  }
}

/// residual_out's and y's rows made again, a block at a time, for the
/// judge: residual_out by residualRows, y by the RMSNorm oracle's rows
/// (RmsNormRows, on the v it kept) plus addNormInputError, as held.
class AllreduceRows final : public ReferenceRows {
 public:
  AllreduceRows(const AllreduceRmsNormInputs& in, std::shared_ptr<const std::vector<HostMatrix>> owned_partials,
                OracleMode mode, std::shared_ptr<const HostMatrix> v, std::shared_ptr<const ReferenceRows> norm_rows,
                std::vector<double> rstd)
      : owned_partials_(std::move(owned_partials)),
        in_(in),
        k_(in_),
        mode_(mode),
        v_(std::move(v)),
        norm_rows_(std::move(norm_rows)),
        rstd_(std::move(rstd)) {}

  std::vector<ReferenceTensor> rows(int64_t begin, int64_t end) const override {
    ReferenceTensor residual_out = ReferenceTensor::zeros("residual_out", k_.Rd, end - begin, k_.N, true);
    residual_out.first_row = begin;
    std::vector<double> v_budget(size_t((end - begin) * k_.N));
    residualRows(k_, in_, begin, end, mode_, &residual_out, v_budget.data(), nullptr);
    ReferenceTensor y = std::move(norm_rows_->rows(begin, end).at(0));  // the norm's y (its dx is not this op's)
    addNormInputError(k_, in_, *v_, rstd_, begin, end, v_budget.data(), y);
    return movedTensors(residual_out, y);
  }

 private:
  const std::shared_ptr<const std::vector<HostMatrix>> owned_partials_;  // in_.x, where the caller made it
  const AllreduceRmsNormInputs in_;
  const ResidualSetup k_;
  const OracleMode mode_;
  const std::shared_ptr<const HostMatrix> v_;
  const std::shared_ptr<const ReferenceRows> norm_rows_;
  const std::vector<double> rstd_;
};

/// The oracle, its per-row tensors held whole or (`stream`) made again for the judge.
AllreduceRmsNormReference allreduceReference(const AllreduceRmsNormInputs& in, const AccuracyContract& contract,
                                             ThreadPool& pool, OracleMode mode, bool stream,
                                             std::shared_ptr<const std::vector<HostMatrix>> owned_partials = nullptr) {
  const ResidualSetup k(in);
  const int64_t M = k.M, N = k.N;
  AllreduceRmsNormReference ref{ReferenceTensor::zeros("residual_out", k.Rd, stream ? 0 : M, N, true),
                                ReferenceTensor::zeros("y", in.y_dtype.value_or(k.T), stream ? 0 : M, N, true)};
  ref.residual_out.rows = ref.y.rows = M;
  // What the norm reads, as a matrix of its dtype for the RMSNorm oracle:
  // the spec's residual_out, or round_fp32(s + residual); and its budgets
  // (held unless streamed, where each block's rows make them again).
  auto v = std::make_shared<HostMatrix>(HostMatrix{k.Vd, M, N, N, PackedBits(storageBytes(k.Vd), size_t(M * N))});
  // residual_out's values, where they are not v's (fused add's backward reads them).
  auto out_values = k.vIsResidualOut() ? v
                                       : std::make_shared<HostMatrix>(
                                             HostMatrix{k.Rd, M, N, N, PackedBits(storageBytes(k.Rd), size_t(M * N))});
  std::vector<double> v_budget(stream ? 0 : size_t(M * N));
  std::vector<int64_t> fell_back(size_t(M), 0);  // per row: elements the double words did not decide
  std::vector<char> v_inexact(size_t(M), 0);     // per row: some element of v has a budget
  pool.forChunks(M, [&](unsigned, int64_t row_begin, int64_t row_end) {
    std::vector<double> row_budget(stream ? size_t(N) : 0);
    for (int64_t i = row_begin; i < row_end; ++i) {
      double* d_v = stream ? row_budget.data() : v_budget.data() + i * N;
      fell_back[size_t(i)] = residualRows(k, in, i, i + 1, mode, &ref.residual_out, d_v, v.get(),
                                          k.vIsResidualOut() ? nullptr : out_values.get());
      v_inexact[size_t(i)] = std::any_of(d_v, d_v + N, [](double b) { return b != 0.0; });
    }
  });
  // v's budget is 0 exactly where residual_out's is (both d_s = 0).
  ref.residual_out_exact = std::none_of(v_inexact.begin(), v_inexact.end(), [](char c) { return c != 0; });

  int64_t undecided = 0;
  for (int64_t n : fell_back) undecided += n;
  if (mode == OracleMode::Mpfr) {
    oracleCounts().mpfr_only += M * N;
  } else {
    oracleCounts().fast += M * N - undecided;
    oracleCounts().fell_back += undecided;
  }
  if (kRounding(in.spec) != Rounding::Plain &&
      (k.Vd != k.T || std::any_of(v_inexact.begin(), v_inexact.end(), [](char c) { return c != 0; })))
    throw std::invalid_argument(
        "the allreduce_rmsnorm oracle models rounding=llama only where the norm reads an exact value of T");
  auto no_grad =
      std::make_shared<const HostMatrix>(HostMatrix{k.T, M, N, N, PackedBits(storageBytes(k.T), size_t(M * N))});
  // The RMSNorm's spec (it reads its own fields); its x is v, whatever its dtype.
  // Named members: the RMSNorm oracle's inputs of its own fields (a bias) stay its business.
  const RmsNormInputs norm_inputs{
      .x = *v, .w = in.w, .dy = *no_grad, .eps = in.eps, .spec = in.spec, .y_dtype = in.y_dtype.value_or(k.T)};
  if (stream) {
    RmsNormReference norm = rmsnormReferenceStreamed(norm_inputs, contract, pool, mode, {v, no_grad});
    ref.y.rows_from = ref.residual_out.rows_from = std::make_shared<const AllreduceRows>(
        in, std::move(owned_partials), mode, v, norm.y.rows_from, std::move(norm.rstd.exact));
  } else {
    RmsNormReference norm = rmsnormReference(norm_inputs, contract, pool, mode);
    ref.y.exact = std::move(norm.y.exact);
    ref.y.budget = std::move(norm.y.budget);
    addNormInputError(k, in, *v, norm.rstd.exact, 0, M, v_budget.data(), ref.y);
  }
  ref.normed = std::move(v);
  ref.residual_out_values = std::move(out_values);
  return ref;
}

}  // namespace

AllreduceRmsNormReference allreduceRmsNormReference(const AllreduceRmsNormInputs& in, const AccuracyContract& contract,
                                                    ThreadPool& pool, OracleMode mode) {
  return allreduceReference(in, contract, pool, mode, /*stream=*/false);
}

AllreduceRmsNormReference allreduceRmsNormReferenceStreamed(
    const AllreduceRmsNormInputs& in, const AccuracyContract& contract, ThreadPool& pool, OracleMode mode,
    std::shared_ptr<const std::vector<HostMatrix>> owned_partials) {
  if (mode == OracleMode::Audit) return allreduceRmsNormReference(in, contract, pool, mode);
  AllreduceRmsNormReference ref = allreduceReference(in, contract, pool, mode, /*stream=*/true,
                                                     std::move(owned_partials));
  oracleCounts().streamed += 2 * ref.y.rows * ref.y.cols;
  return ref;
}

}  // namespace ulpcheck
