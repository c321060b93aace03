// The LayerNorm oracle and judge on the GPU (oracles/layernorm_device.h
// says what it computes and why its verdicts are the host's). Each value
// and bound below is oracles/layernorm.cpp's fastRow's, step for step; the
// comments there ("The certified fast path") derive them. Built with
// -fmad=false: the double-word algorithms and every budget expression
// assume each operation rounds once, as written.
#include "oracles/layernorm_device.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>

#include "core/cuda_check.h"
#include "core/device.h"
#include "oracles/device_judge.cuh"
#include "oracles/double_word.h"
#include "oracles/rmsnorm_budgets.h"

namespace ulpcheck::gpu_oracle {

namespace {

using dw::DW;
using dw::kU2;
using rmsnorm_budget::kMpfrSlack;
namespace lnb = layernorm_budget;

constexpr int kThreads = 256;
constexpr int kTile = kThreads;  // a tile of terms one thread adds in column order
constexpr int kTileTerms = 5;    // the most terms per column a serial sum reads

/// What every element of a row needs, from its row sums (thread 0 writes it).
struct Row {
  DW mean, r, c1, c2;
  double b_mean, b_r, b_c1, b_c2;
  double mean_odd, V_near, r_near, r_odd, c1_near, c2_near;
  double abs_x, sq_x, q, Dm, A_d, DV_running, r_hi, Dr;
  lnb::BackwardError backward;
  // The run's own statistics (on_saved_statistics): finite, their row's
  // centers' sums, and rstd's center and its budget.
  bool saved;
  double m_s, r_s, c1_s, c2_s, r_center, r_half;
  lnb::BackwardError backward_s;
  int undecided, untrusted;
};

/// Flags a row's value undecided (and untrusted) as fastRow's `decide` does.
struct Decisions {
  bool trusted = true, decided = true;
  double widen = 1;
  __device__ void nearest(const DW& v, double b, double& out) {
    trusted = trusted && dw::inRange(v) && isfinite(b);
    decided = decided && trusted && dw::roundToNearest(v, widen * dw::up(b), out);
  }
  __device__ void odd(const DW& v, double b, double& out) {
    trusted = trusted && dw::inRange(v) && isfinite(b);
    decided = decided && trusted && dw::roundToOdd(v, widen * dw::up(b), out);
  }
};

__device__ inline double gammaAt(const LayerNormDeviceCase& c, int64_t j) {
  return c.gamma ? load(c.W, c.gamma, j) : 1.0;
}
__device__ inline double betaAt(const LayerNormDeviceCase& c, int64_t j) { return c.beta ? load(c.W, c.beta, j) : 0.0; }

/// d_j = x_j - mean as a double word with its bound (fastRow's).
__device__ inline void deviation(const Row& v, double xv, DW& d, double& b_d) {
  if (v.b_mean == 0.0) {
    d = dw::twoSum(xv, -v.mean.h);
    b_d = lnb::exactWordBound(d, kMpfrSlack);
  } else {
    d = dw::plus(DW{-v.mean.h, -v.mean.l}, xv);
    b_d = v.b_mean + (2.0 * kU2 + kMpfrSlack) * fabs(d.h);
  }
}

/// x-hat_j = d_j r with its bound.
__device__ inline void xhatWord(const DW& r, double b_r, const DW& d, double b_d, DW& xh, double& b_xh) {
  xh = dw::times(d, r);
  b_xh = dw::up(b_d * r.h + fabs(d.h) * b_r + (4.0 * kU2 + kMpfrSlack) * fabs(xh.h));
}

/// One element's values, as fastRow decides them (in `d`): the nearest
/// d_j and x-hat_j with x-hat's word and bound, Dx_j, y's round-to-odd
/// value; then (elementBackward) the nearest a - c1 - xhat c2 and dx's.
struct Element {
  double a = 0, d_near = 0, xhat = 0, dxh = 0, y_odd = 0, inner_near = 0, dx_odd = 0;
  DW xh;
  double b_xh = 0;
};

/// Through y, with the row's statistics and their bounds.
__device__ inline void elementForward(const lnb::Constants& k, const Row& row, double xv, double g, double bias,
                                      double dyv, Decisions& d, Element& e) {
  DW dv;
  double b_d;
  e.a = g * dyv;  // exact: 48 bits
  deviation(row, xv, dv, b_d);
  d.nearest(dv, b_d, e.d_near);
  xhatWord(row.r, row.b_r, dv, b_d, e.xh, e.b_xh);
  d.nearest(e.xh, e.b_xh, e.xhat);
  e.dxh = lnb::xhatError(k, row.r_hi, row.Dr, e.d_near, lnb::deviationError(k, row.Dm, e.d_near));
  DW y{bias, 0.0};
  double b_y = 0;
  if (!(g == 0.0 || (e.xh.h == 0.0 && e.xh.l == 0.0 && e.b_xh == 0.0))) {
    const DW xg = dw::times(e.xh, g);
    y = dw::plus(xg, bias);
    b_y = fabs(g) * e.b_xh + (2.0 * kU2 + kMpfrSlack) * (fabs(xg.h) + fabs(y.h));
  }
  d.odd(y, b_y, e.y_odd);
}

/// dx, from the row's c1 and c2.
__device__ inline void elementBackward(const Row& row, Decisions& d, Element& e) {
  const DW tt = dw::times(e.xh, row.c2);
  const DW diff = dw::plus(DW{-row.c1.h, -row.c1.l}, e.a);
  const DW inner = dw::plus(diff, DW{-tt.h, -tt.l});
  const double b_inner = dw::up(row.b_c1 + (2.0 * kU2 + kMpfrSlack) * fabs(diff.h) + e.b_xh * fabs(row.c2.h) +
                                fabs(e.xh.h) * row.b_c2 + (4.0 * kU2 + kMpfrSlack) * fabs(tt.h) +
                                (3.01 * kU2 + kMpfrSlack) * fabs(inner.h));
  d.nearest(inner, b_inner, e.inner_near);
  const DW dx = dw::times(inner, row.r);
  d.odd(dx, b_inner * row.r.h + fabs(inner.h) * row.b_r + (4.0 * kU2 + kMpfrSlack) * fabs(dx.h), e.dx_odd);
}

/// A double word and its bound summed over the CTA in a fixed tree (each
/// add of two words adds 3.01 u^2 of its result), with a plain double sum,
/// a maximum and a minimum beside it.
struct TreeSums {
  DW s1, s2;
  double b1, b2, plain, largest, smallest;
};

__device__ TreeSums reduceTree(const TreeSums& mine, TreeSums* shared) {
  return reduceCta(mine, shared, [](TreeSums& a, const TreeSums& b) {
    a.s1 = dw::plus(a.s1, b.s1);
    a.b1 += b.b1 + 3.01 * kU2 * fabs(a.s1.h);
    a.s2 = dw::plus(a.s2, b.s2);
    a.b2 += b.b2 + 3.01 * kU2 * fabs(a.s2.h);
    a.plain += b.plain;
    a.largest = a.largest < b.largest ? b.largest : a.largest;
    a.smallest = b.smallest < a.smallest ? b.smallest : a.smallest;
  });
}

struct RowOutputs {
  uint8_t* undecided;
  RowFigures* figures[kLayerNormTensors];
  LayerNormRowWords* words;
  GlobalDistribution* distribution;  // kLayerNormTensors of them
};

__global__ void __launch_bounds__(kThreads, 2) judgeLayerNormRowsKernel(LayerNormDeviceCase c, RowOutputs out) {
  __shared__ SharedDistribution dist[kLayerNormTensors];
  constexpr size_t kScratch = kThreads * (sizeof(TreeSums) > kFiguresScratch ? sizeof(TreeSums) : kFiguresScratch);
  __shared__ __align__(16) unsigned char scratch[kScratch];
  TreeSums* tree = reinterpret_cast<TreeSums*>(scratch);
  __shared__ double tile[kTileTerms][kTile];
  __shared__ __align__(16) unsigned char row_storage[sizeof(Row)];
  Row& row = *reinterpret_cast<Row*>(row_storage);
  const int t = threadIdx.x;
  clearDistributions(dist, kLayerNormTensors);
  double max_ulp_at_scale[kLayerNormTensors] = {0, 0, 0, 0};
  const lnb::Constants& k = c.k;
  const int64_t M = c.M, N = c.N;
  const double n = double(N);
  const DW n_word{n, 0.0};

  // Every column of the row in tiles of kTile: term(j, slot) fills this
  // thread's column's slots; then thread 0 adds the tile in column order.
  const auto tiles = [&](auto term, auto add) {
    for (int64_t base = 0; base < N; base += kTile) {
      const int64_t j = base + t;
      if (j < N) term(j);
      __syncthreads();
      if (t == 0) {
        const int count = int(N - base < kTile ? N - base : kTile);
        for (int q = 0; q < count; ++q) add(q);
      }
      __syncthreads();
    }
  };

  for (int64_t i = blockIdx.x; i < M; i += gridDim.x) {
    const int64_t base_i = i * c.ld;
    const auto xAt = [&](int64_t j) { return load(c.T, c.x, base_i + j); };
    const auto dyAt = [&](int64_t j) { return load(c.T, c.dy, base_i + j); };
    if (t == 0) {
      row.undecided = 0, row.untrusted = 0;
      row.abs_x = row.sq_x = 0.0;
    }
    __syncthreads();
    Decisions mine;
    mine.widen = c.widen;

    // The sum of x (DWPlusFP, 2 u2 |partial| each), q; in order: sum |x|, sum x^2.
    TreeSums s{DW{}, DW{}, 0, 0, 0, 0, INFINITY};
    tiles(
        [&](int64_t j) {
          const double xv = xAt(j);
          s.s1 = dw::plus(s.s1, xv);
          s.b1 += 2.0 * kU2 * fabs(s.s1.h);
          if (xv != 0.0) s.smallest = s.smallest < ulpOf(c.T, xv) ? s.smallest : ulpOf(c.T, xv);
          tile[0][t] = xv;
        },
        [&](int q) {
          row.abs_x += fabs(tile[0][q]);
          row.sq_x += tile[0][q] * tile[0][q];
        });
    s = reduceTree(s, tree);
    if (t == 0) {
      Decisions d;
      d.widen = c.widen;
      row.q = s.smallest;
      const bool sum_exact = row.abs_x < dw::kExactSumQuanta * row.q;  // the words' sum is exact
      const double m = s.s1.h / n;
      const DW back = dw::twoProd(m, n);
      if (sum_exact && s.s1.l == 0.0 && back.h == s.s1.h && back.l == 0.0) {
        row.mean = DW{m, 0.0};
        row.b_mean = 0.0;
      } else {
        row.mean = dw::divide(s.s1, n_word);
        row.b_mean = (sum_exact ? 0.0 : s.b1 / n) + (9.8 * kU2 + kMpfrSlack) * fabs(row.mean.h);
      }
      d.odd(row.mean, row.b_mean, row.mean_odd);
      row.undecided = !d.decided;
      row.untrusted = !d.trusted;
    }
    __syncthreads();

    // Deviations (nearest d_j) and V; in order: sum |d|, sum d^2 (max |d| and the squares' quantum in the tree).
    double abs_d = 0, sq_d = 0;
    s = TreeSums{DW{}, DW{}, 0, 0, 0, 0, INFINITY};
    tiles(
        [&](int64_t j) {
          DW d;
          double b_d, d_near = 0;
          deviation(row, xAt(j), d, b_d);
          mine.nearest(d, b_d, d_near);
          s.smallest = lnb::smaller(s.smallest, lnb::squareQuantum(d, b_d));
          const DW sq = dw::times(d, d);
          s.s2 = dw::plus(s.s2, sq);
          s.b2 += 2.0 * fabs(d.h) * b_d + b_d * b_d + (4.0 * kU2 + kMpfrSlack) * sq.h + 3.01 * kU2 * fabs(s.s2.h);
          s.largest = s.largest < fabs(d_near) ? fabs(d_near) : s.largest;
          tile[0][t] = d_near;
        },
        [&](int q) {
          abs_d += fabs(tile[0][q]);
          sq_d += tile[0][q] * tile[0][q];
        });
    if (!mine.decided) atomicOr(&row.undecided, 1);
    if (!mine.trusted) atomicOr(&row.untrusted, 1);
    s = reduceTree(s, tree);
    if (t == 0) {
      Decisions d;
      d.widen = c.widen;
      d.trusted = !row.untrusted;
      d.decided = !row.undecided;
      const DW quotient = dw::divide(s.s2, n_word);
      const DW V = dw::plus(quotient, double(k.eps));
      const double b_V = lnb::varianceWordsExact(s.smallest, s.s2, n, quotient, double(k.eps))
                             ? lnb::exactWordBound(V, kMpfrSlack)
                             : dw::up((s.b2 + kMpfrSlack * fabs(s.s2.h)) / n + (9.8 * kU2 + kMpfrSlack) * quotient.h +
                                      (2.0 * kU2 + kMpfrSlack) * V.h);
      d.trusted = d.trusted && V.h > 0.0;
      d.nearest(V, b_V, row.V_near);
      row.r = d.trusted ? dw::divide(DW{1.0, 0.0}, dw::sqrt(V)) : DW{};
      row.b_r = dw::up(0.5 * b_V / V.h + (3.125 + 9.8) * kU2 + kMpfrSlack) * row.r.h;
      d.nearest(row.r, row.b_r, row.r_near);
      d.odd(row.r, row.b_r, row.r_odd);
      row.undecided = !d.decided;
      row.untrusted = !d.trusted;
      if (d.decided) {
        const lnb::StatisticsError e = lnb::statisticsError(k, n, row.abs_x, row.q, row.mean_odd, abs_d, s.largest,
                                                            sq_d, row.V_near);
        row.Dm = e.Dm, row.A_d = e.A_d, row.DV_running = e.DV_running;
      }
    }
    __syncthreads();

    // x-hat decided (and, in order, mean_j Dd_j^2).
    double mean_dd2 = 0;
    const bool statistics_decided = !row.undecided;
    tiles(
        [&](int64_t j) {
          DW d, xh;
          double b_d, b_xh, d_near = 0, xhat = 0;
          deviation(row, xAt(j), d, b_d);
          mine.nearest(d, b_d, d_near);
          xhatWord(row.r, row.b_r, d, b_d, xh, b_xh);
          mine.nearest(xh, b_xh, xhat);
          tile[0][t] = statistics_decided ? lnb::deviationError(k, row.Dm, d_near) : 0.0;
        },
        [&](int q) { mean_dd2 += tile[0][q] * tile[0][q]; });
    if (!mine.decided) atomicOr(&row.undecided, 1);
    if (!mine.trusted) atomicOr(&row.untrusted, 1);
    __syncthreads();
    if (t == 0) {
      LayerNormRowWords w;
      if (!row.untrusted) {
        w.mean_h = row.mean.h, w.mean_l = row.mean.l, w.b_mean = row.b_mean;
        w.r_h = row.r.h, w.r_l = row.r.l, w.b_r = row.b_r;
      }
      if (!row.undecided) {
        const lnb::RstdError e = lnb::rstdError(k, row.V_near, row.r_near, row.Dm, row.A_d, mean_dd2 / n,
                                                row.DV_running);
        row.r_hi = e.r_hi, row.Dr = e.Dr;
        w.r = row.r_near, w.r_hi = row.r_hi, w.Dr = row.Dr, w.Dm = row.Dm;
        w.mean_odd = row.mean_odd, w.rstd_odd = row.r_odd;
      }
      out.words[i] = w;
      row.m_s = c.on_saved_statistics ? double(c.mean[i]) : NAN;
      row.r_s = c.on_saved_statistics ? double(c.rstd[i]) : NAN;
      row.saved = isfinite(row.m_s) && isfinite(row.r_s);
    }
    __syncthreads();

    // y decided; the backward's sums: c1 and c2 in the tree, in order their
    // bounds' five (and the saved statistics' centers' sums).
    lnb::BackwardSums bs, bs_saved;
    double sq_s = 0, dd2_s = 0, c1_s = 0, c2_s = 0;
    s = TreeSums{DW{}, DW{}, 0, 0, 0, 0, INFINITY};
    if (!row.undecided)
      tiles(
          [&](int64_t j) {
            Element e;
            const double xv = xAt(j);
            elementForward(k, row, xv, gammaAt(c, j), betaAt(c, j), dyAt(j), mine, e);
            const double a = e.a;
            s.s1 = dw::plus(s.s1, a);
            s.b1 += 2.0 * kU2 * fabs(s.s1.h);
            const DW term = dw::times(e.xh, a);
            s.s2 = dw::plus(s.s2, term);
            s.b2 += fabs(a) * e.b_xh + (2.0 * kU2 + kMpfrSlack) * fabs(term.h) + 3.01 * kU2 * fabs(s.s2.h);
            s.plain += fabs(a);
            tile[0][t] = a, tile[1][t] = e.xhat, tile[2][t] = e.dxh;
            if (row.saved) {
              const double d_s = xv - row.m_s, xhat_s = d_s * row.r_s;
              tile[3][t] = d_s, tile[4][t] = xhat_s;
            }
          },
          [&](int q) {
            const double a = tile[0][q];
            lnb::addBackwardTerms(k, bs, a, tile[1][q], tile[2][q]);
            if (row.saved) {
              // layernormSavedStatisticsBounds' sums: d = x - m~, Dd = K u |d|, x-hat = d r~.
              const double d_s = tile[3][q], xhat_s = tile[4][q];
              const double dd_s = lnb::deviationError(k, 0.0, d_s);
              sq_s += d_s * d_s;
              dd2_s += dd_s * dd_s;
              c1_s += a;
              c2_s += a * xhat_s;
              lnb::addBackwardTerms(k, bs_saved, a, xhat_s, lnb::xhatError(k, fabs(row.r_s), 0.0, d_s, dd_s));
            }
          });
    if (!mine.decided) atomicOr(&row.undecided, 1);
    const TreeSums backward = reduceTree(s, tree);
    if (t == 0 && !row.undecided) {
      Decisions d;
      d.widen = c.widen;
      row.c1 = dw::divide(backward.s1, n_word);
      row.c2 = dw::divide(backward.s2, n_word);
      row.b_c1 = dw::up(backward.b1 / n + (9.8 * kU2 + kMpfrSlack) * fabs(row.c1.h) + kMpfrSlack * backward.plain / n);
      row.b_c2 = dw::up(backward.b2 / n + (9.8 * kU2 + kMpfrSlack) * fabs(row.c2.h) + kMpfrSlack * bs.p2 / n);
      d.nearest(row.c1, row.b_c1, row.c1_near);
      d.nearest(row.c2, row.b_c2, row.c2_near);
      if (!d.decided) row.undecided = 1;
      row.backward = lnb::backwardError(k, n, bs);
      if (row.saved) {
        row.c1_s = c1_s / n;
        row.c2_s = c2_s / n;
        row.backward_s = lnb::backwardError(k, n, bs_saved);
        // The variance about the saved mean (two-pass statistics only).
        const double V = sq_s / n + k.eps, r = 1.0 / sqrt(V);
        const lnb::RstdError e = lnb::rstdError(k, V, r, 0.0, 0.0, dd2_s / n, 0.0);
        row.r_center = r;
        row.r_half = k.two_pass_statistics ? budgetFromError(k.S, r, e.Dr) : NAN;
      }
    }
    __syncthreads();

    // dx decided.
    if (!row.undecided) {
      for (int64_t j = t; j < N; j += kThreads) {
        Element e;
        elementForward(k, row, xAt(j), gammaAt(c, j), betaAt(c, j), dyAt(j), mine, e);
        elementBackward(row, mine, e);
        if (!mine.decided) break;
      }
      if (!mine.decided) atomicOr(&row.undecided, 1);
    }
    __syncthreads();
    if (row.undecided) {
      if (t == 0) {
        out.undecided[i] = 1;
        for (int tensor = 0; tensor < kLayerNormTensors; ++tensor) out.figures[tensor][i] = RowFigures{};
      }
      __syncthreads();
      continue;
    }

    // Judge y and dx (every value decided: the same doubles again).
    const double row_fraction = double(i) / double(M);
    RowFigures fy{}, fdx{};
    for (int64_t j = t; j < N; j += kThreads) {
      Decisions d;  // every decision here was made above: the same doubles
      d.widen = c.widen;
      Element e;
      const double xv = xAt(j), g = gammaAt(c, j), bias = betaAt(c, j);
      elementForward(k, row, xv, g, bias, dyAt(j), d, e);
      elementBackward(row, d, e);
      const double a = e.a;

      // About the run's own statistics (layernormSavedStatisticsBounds).
      double y_mid = NAN, y_half = NAN, dx_mid = NAN, dx_half = NAN;
      if (row.saved) {
        const double d_s = xv - row.m_s, xhat_s = d_s * row.r_s;
        const double dxh_s = lnb::xhatError(k, fabs(row.r_s), 0.0, d_s, lnb::deviationError(k, 0.0, d_s));
        y_mid = xhat_s * g + bias;
        y_half = lnb::yBudget(k, y_mid, g, dxh_s, row.r_s);
        const double inner_s = a - row.c1_s - xhat_s * row.c2_s;
        dx_mid = row.r_s * inner_s;
        dx_half = lnb::dxBudget(k, dx_mid, a, xhat_s, dxh_s, row.c1_s, row.c2_s, row.backward_s, fabs(row.r_s), 0.0,
                                inner_s);
      }
      const double col_fraction = double(j) / n;
      judgeElement(c.T, e.y_odd, lnb::yBudget(k, e.y_odd, g, e.dxh, row.r_near), -1.0, lnb::yMagnitude(e.xhat, g, bias),
                   load(c.T, c.y, base_i + j), row_fraction, col_fraction, fy, dist[0], max_ulp_at_scale[0], y_mid,
                   y_half);
      judgeElement(c.T, e.dx_odd,
                   lnb::dxBudget(k, e.dx_odd, a, e.xhat, e.dxh, row.c1_near, row.c2_near, row.backward, row.r_hi,
                                 row.Dr, e.inner_near),
                   -1.0, lnb::dxMagnitude(row.r_near, a, row.c1_near, e.xhat, row.c2_near), load(c.T, c.dx, base_i + j),
                   row_fraction, col_fraction, fdx, dist[3], max_ulp_at_scale[3], dx_mid, dx_half);
    }
    const RowFigures y_row = reduceFigures(fy, scratch), dx_row = reduceFigures(fdx, scratch);
    if (t == 0) {
      out.figures[0][i] = y_row;
      out.figures[3][i] = dx_row;
      RowFigures fm{}, fr{};
      judgeElement(DType::F32, row.mean_odd, budgetFromError(k.S, row.mean_odd, row.Dm), -1.0, sqrt(row.sq_x) / n,
                   double(c.mean[i]), row_fraction, 0.0, fm, dist[1], max_ulp_at_scale[1]);
      judgeElement(DType::F32, row.r_odd, budgetFromError(k.S, row.r_odd, row.Dr), -1.0, -1.0, double(c.rstd[i]),
                   row_fraction, 0.0, fr, dist[2], max_ulp_at_scale[2], row.saved ? row.r_center : NAN,
                   row.saved ? row.r_half : NAN);
      out.figures[1][i] = fm;
      out.figures[2][i] = fr;
      out.undecided[i] = 0;
    }
    __syncthreads();
  }
  flushDistributions(dist, max_ulp_at_scale, kLayerNormTensors, out.distribution);
}

struct ChunkOutputs {
  double *sum_hi, *sum_lo, *err, *abs_terms, *gain, *sq_terms;
};

/// fastSweep's addFastDgammaRow and addDgammaMagnitudes over the rows of one
/// chunk, one column per thread. (The random-gradient model's coefficient
/// sums are not formed: the GPU judge does not take black boxes.)
__global__ void dgammaChunkKernel(LayerNormDeviceCase c, int64_t chunks, const LayerNormRowWords* rows,
                                  const int64_t* host_row, const double* host_xhat, const double* host_dxh,
                                  ChunkOutputs out) {
  const int64_t id = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= chunks * c.N) return;
  const int64_t chunk = id / c.N, j = id % c.N;
  const lnb::Constants& k = c.k;
  DW sum{};
  double err = 0, abs_terms = 0, gain = 0, sq_terms = 0;
  for (int64_t i = c.M * chunk / chunks; i < c.M * (chunk + 1) / chunks; ++i) {
    const LayerNormRowWords& w = rows[i];
    const double xv = load(c.T, c.x, i * c.ld + j), dyv = load(c.T, c.dy, i * c.ld + j);
    Row v;
    v.mean = DW{w.mean_h, w.mean_l}, v.b_mean = w.b_mean;
    DW d, xh;
    double b_d, b_xh;
    deviation(v, xv, d, b_d);
    xhatWord(DW{w.r_h, w.r_l}, w.b_r, d, b_d, xh, b_xh);
    if (!isfinite(w.b_mean) || !isfinite(w.b_r)) b_xh = INFINITY;  // untrusted words
    const DW term = dw::times(xh, dyv);
    sum = dw::plus(sum, term);
    err += fabs(dyv) * b_xh + 2.0 * kU2 * fabs(term.h) + 3.01 * kU2 * fabs(sum.h);
    // The magnitudes from the nearest x-hat and Dx: decided here, or the host's.
    double xhat = 0, dxh = 0;
    if (host_row[i] >= 0) {
      xhat = host_xhat[host_row[i] * c.N + j];
      dxh = host_dxh[host_row[i] * c.N + j];
    } else {
      double d_near = 0;
      dw::roundToNearest(d, c.widen * dw::up(b_d), d_near);
      dw::roundToNearest(xh, c.widen * dw::up(b_xh), xhat);
      dxh = lnb::xhatError(k, w.r_hi, w.Dr, d_near, lnb::deviationError(k, w.Dm, d_near));
    }
    abs_terms += fabs(dyv * xhat);
    sq_terms += (dyv * xhat) * (dyv * xhat);
    gain += fabs(dyv) * dxh + k.K * k.eta * w.r;
  }
  out.sum_hi[id] = sum.h, out.sum_lo[id] = sum.l, out.err[id] = err, out.abs_terms[id] = abs_terms;
  out.gain[id] = gain, out.sq_terms[id] = sq_terms;
}

/// biasGradientReference's fast chunk sums of dy, one column per thread.
__global__ void dbetaChunkKernel(LayerNormDeviceCase c, int64_t chunks, ChunkOutputs out, double* smallest_ulp) {
  const int64_t id = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= chunks * c.N) return;
  const int64_t chunk = id / c.N, j = id % c.N;
  DW sum{};
  double err = 0, abs_terms = 0, sq_terms = 0, q = INFINITY;
  for (int64_t i = c.M * chunk / chunks; i < c.M * (chunk + 1) / chunks; ++i) {
    const double v = load(c.T, c.dy, i * c.ld + j);
    sum = dw::plus(sum, v);
    err += 2.0 * kU2 * fabs(sum.h);
    if (v != 0.0) q = q < ulpOf(c.T, v) ? q : ulpOf(c.T, v);
    abs_terms += fabs(v);
    sq_terms += v * v;
  }
  out.sum_hi[id] = sum.h, out.sum_lo[id] = sum.l, out.err[id] = err, out.abs_terms[id] = abs_terms;
  out.gain[id] = 0, out.sq_terms[id] = sq_terms;
  smallest_ulp[id] = q;
}

/// dgamma's leaves as finishDgamma's: dy (x - mean) rstd from doubles of the
/// exact statistics, with the error of that evaluation.
struct DgammaLeaf {
  DType T;
  const void *dy, *x;
  int64_t ld;
  const double *mean, *rstd;
  __device__ DeviceLeaf operator()(int64_t i, int64_t j) const {
    const double xv = load(T, x, i * ld + j), mu = mean[i], dyv = load(T, dy, i * ld + j);
    const double t = dyv * (xv - mu) * rstd[i];
    // x - mean in double: the mean's double error and the subtraction's rounding.
    return DeviceLeaf{t, fabs(dyv) * rstd[i] * 0x1p-50 * (fabs(xv) + fabs(mu)) + 0x1p-51 * fabs(t)};
  }
};

/// dbeta's leaves: dy, exact.
struct DbetaLeaf {
  DType T;
  const void* dy;
  int64_t ld;
  __device__ DeviceLeaf operator()(int64_t i, int64_t j) const { return DeviceLeaf{load(T, dy, i * ld + j), 0.0}; }
};

ColumnChunkSums downloadChunks(const ChunkOutputs& out, int64_t chunks, size_t count) {
  ColumnChunkSums s;
  s.chunks = chunks;
  s.sum_hi = DeviceArrays::download(out.sum_hi, count), s.sum_lo = DeviceArrays::download(out.sum_lo, count);
  s.err = DeviceArrays::download(out.err, count), s.abs_terms = DeviceArrays::download(out.abs_terms, count);
  s.gain = DeviceArrays::download(out.gain, count), s.sq_terms = DeviceArrays::download(out.sq_terms, count);
  return s;
}

ChunkOutputs makeChunks(DeviceArrays& mem, size_t count) {
  ChunkOutputs out{};
  for (double** p : {&out.sum_hi, &out.sum_lo, &out.err, &out.abs_terms, &out.gain, &out.sq_terms})
    *p = mem.make<double>(count);
  return out;
}

}  // namespace

LayerNormRowsJudged judgeLayerNormRows(const LayerNormDeviceCase& c) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t M = size_t(c.M);
  DeviceArrays mem;
  RowOutputs out{};
  out.undecided = mem.make<uint8_t>(M);
  for (int tensor = 0; tensor < kLayerNormTensors; ++tensor) out.figures[tensor] = mem.make<RowFigures>(M);
  out.words = mem.make<LayerNormRowWords>(M);
  out.distribution = mem.make<GlobalDistribution>(kLayerNormTensors);
  if (c.M > 0) {
    judgeLayerNormRowsKernel<<<ctasFor(c.M, 4), kThreads>>>(c, out);
    ULPCHECK_CUDA_LAUNCH("gpu_oracle::judgeLayerNormRowsKernel");
  }
  deviceSynchronize("gpu_oracle::judgeLayerNormRowsKernel");
  LayerNormRowsJudged r;
  r.undecided = DeviceArrays::download(out.undecided, M);
  for (int tensor = 0; tensor < kLayerNormTensors; ++tensor)
    r.figures[size_t(tensor)] = DeviceArrays::download(out.figures[tensor], M);
  r.words = DeviceArrays::download(out.words, M);
  const std::vector<Distribution> d = downloadDistributions(out.distribution, kLayerNormTensors, r.figures.data());
  std::copy(d.begin(), d.end(), r.distribution.begin());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

ColumnChunkSums dgammaChunkSums(const LayerNormDeviceCase& c, int64_t chunks,
                                const std::vector<LayerNormRowWords>& rows, const std::vector<int64_t>& host_row,
                                const std::vector<double>& host_xhat, const std::vector<double>& host_dxh) {
  DeviceArrays mem;
  const size_t count = size_t(chunks * c.N);
  const ChunkOutputs out = makeChunks(mem, count);
  const LayerNormRowWords* w = mem.upload(rows);
  const int64_t* hr = mem.upload(host_row);
  const double *hx = mem.upload(host_xhat), *hd = mem.upload(host_dxh);
  if (count) {
    dgammaChunkKernel<<<unsigned((count + kThreads - 1) / kThreads), kThreads>>>(c, chunks, w, hr, hx, hd, out);
    ULPCHECK_CUDA_LAUNCH("gpu_oracle::dgammaChunkKernel");
  }
  deviceSynchronize("gpu_oracle::dgammaChunkKernel");
  return downloadChunks(out, chunks, count);
}

ColumnChunkSums dbetaChunkSums(const LayerNormDeviceCase& c, int64_t chunks) {
  DeviceArrays mem;
  const size_t count = size_t(chunks * c.N);
  const ChunkOutputs out = makeChunks(mem, count);
  double* q = mem.make<double>(count);
  if (count) {
    dbetaChunkKernel<<<unsigned((count + kThreads - 1) / kThreads), kThreads>>>(c, chunks, out, q);
    ULPCHECK_CUDA_LAUNCH("gpu_oracle::dbetaChunkKernel");
  }
  deviceSynchronize("gpu_oracle::dbetaChunkKernel");
  ColumnChunkSums s = downloadChunks(out, chunks, count);
  const std::vector<double> per_chunk = DeviceArrays::download(q, count);
  s.smallest_ulp.assign(size_t(c.N), INFINITY);
  for (size_t e = 0; e < count; ++e) {
    double& m = s.smallest_ulp[e % size_t(c.N)];
    m = std::min(m, per_chunk[e]);
  }
  return s;
}

std::vector<double> dgammaOrderedPartialAbs(const LayerNormDeviceCase& c, const ColumnOrder& order, int64_t depth,
                                            const std::vector<double>& mean, const std::vector<double>& rstd) {
  DeviceArrays mem;
  return orderedPartialAbs(c.M, c.N, order, depth, DgammaLeaf{c.T, c.dy, c.x, c.ld, mem.upload(mean), mem.upload(rstd)},
                           "gpu_oracle::orderedPartialKernel (dgamma)");
}

std::vector<double> dbetaOrderedPartialAbs(const LayerNormDeviceCase& c, const ColumnOrder& order, int64_t depth) {
  return orderedPartialAbs(c.M, c.N, order, depth, DbetaLeaf{c.T, c.dy, c.ld},
                           "gpu_oracle::orderedPartialKernel (dbeta)");
}

}  // namespace ulpcheck::gpu_oracle
