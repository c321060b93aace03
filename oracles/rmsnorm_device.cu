// The RMSNorm oracle and judge on the GPU (oracles/rmsnorm_device.h says
// what it computes and why its verdicts are the host's). Built with
// -fmad=false: the double-word algorithms and every budget expression
// assume each operation rounds once, as written.
#include "oracles/rmsnorm_device.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/cuda_check.h"
#include "core/device.h"
#include "oracles/device_judge.cuh"
#include "oracles/double_word.h"
#include "oracles/rmsnorm_budgets.h"
#include "oracles/tolerances.h"

namespace ulpcheck::gpu_oracle {

namespace {

using dw::DW;
using dw::kU2;

constexpr int kThreads = 256;

/// What every element of a row needs, from its row sums.
struct RowValues {
  DW r, c;
  double rel_r, e_r, e_c, r_near, r_odd, c_near, m;
  int undecided;
};

struct ElementValues {
  double y_exact, y_budget, dx_exact, dx_budget, dx_magnitude;
  double y_statistical = -1, dx_statistical = -1;  // -1: none
};

/// y and dx of element j, certified as rmsnorm.cpp's fastRow does; false
/// where an interval does not decide its double.
__device__ bool certifyElement(const RmsNormDeviceCase& c, const rmsnorm_budget::Constants& k,
                               const rmsnorm_budget::Constants& ks, const RowValues& v, double xv, double dyv,
                               double w_val, ElementValues& out) {
  const double w = w_val + c.offset;  // s.w[j]: offset + w rounded to double
  const DW w_words = dw::twoSum(w_val, c.offset);
  const double a = w * dyv, xhat = xv * v.r_near;
  DW y;
  double e_y;
  if (c.offset == 0.0) {
    y = dw::times(v.r, xv * w);
    e_y = (v.rel_r + 2.0 * kU2) * fabs(y.h);
  } else {
    y = dw::times(dw::times(v.r, xv), w_words);
    e_y = (v.rel_r + 6.0 * kU2) * fabs(y.h);
  }
  const double y_terms = fabs(y.h);
  if (!dw::inRange(y) || !dw::roundToOdd(y, c.widen * dw::up(e_y + rmsnorm_budget::kMpfrSlack * y_terms), out.y_exact))
    return false;
  out.y_budget = rmsnorm_budget::plainY(k, out.y_exact, xhat, w, 0.0, v.r_near);
  if (c.statistical) out.y_statistical = rmsnorm_budget::plainY(ks, out.y_exact, xhat, w, 0.0, v.r_near);

  const DW xr = dw::times(v.r, xv);
  const double e_xr = (v.rel_r + 2.0 * kU2) * fabs(xr.h);
  const DW t = dw::times(xr, v.c);
  double e_diff = e_xr * fabs(v.c.h) + fabs(xr.h) * v.e_c + 4.0 * kU2 * fabs(t.h);
  DW diff;
  if (c.offset == 0.0) {
    diff = dw::plus(DW{-t.h, -t.l}, a);
    e_diff += 2.0 * kU2 * fabs(diff.h);
  } else {
    const DW a_words = dw::times(w_words, dyv);
    diff = dw::plus(DW{-t.h, -t.l}, a_words);
    e_diff += 2.0 * kU2 * fabs(a_words.h) + 3.01 * kU2 * fabs(diff.h);
  }
  const DW dx = dw::times(diff, v.r);
  const double e_dx = e_diff * v.r.h + fabs(diff.h) * v.e_r + 4.0 * kU2 * fabs(dx.h);
  const double dx_terms = v.r_near * (fabs(a) + fabs(xhat * v.c_near) + fabs(xhat) * v.m);
  if (!dw::inRange(dx) ||
      !dw::roundToOdd(dx, c.widen * dw::up(e_dx + rmsnorm_budget::kMpfrSlack * dx_terms), out.dx_exact))
    return false;
  out.dx_budget = rmsnorm_budget::dx(k, out.dx_exact, a, xv, v.c_near, v.m, v.r_near, 0.0);
  if (c.statistical) out.dx_statistical = rmsnorm_budget::dx(ks, out.dx_exact, a, xv, v.c_near, v.m, v.r_near, 0.0);
  out.dx_magnitude = rmsnorm_budget::dxMagnitude(a, xv, v.c_near, v.r_near);
  return true;
}

/// A double word, its error bound and a plain double, summed over the CTA
/// (a fixed tree: each add of two double words adds 3.01 u^2 of its result).
struct RowSums {
  DW sq, P;
  double e_sq, e_P, partials;
  int finite;
};

__device__ RowSums reduceRowSums(const RowSums& mine, RowSums* shared) {
  return reduceCta(mine, shared, [](RowSums& a, const RowSums& b) {
    a.sq = dw::plus(a.sq, b.sq);
    a.e_sq += b.e_sq + 3.01 * kU2 * fabs(a.sq.h);
    a.P = dw::plus(a.P, b.P);
    a.e_P += b.e_P + 3.01 * kU2 * fabs(a.P.h);
    a.partials += b.partials;
    a.finite &= b.finite;
  });
}

struct RowOutputs {
  uint8_t* undecided;
  RowFigures* figures[kTensors];
  double *r_hi, *r_lo, *rel_r, *r_near, *r_odd;
  GlobalDistribution* distribution;  // kTensors of them
};

__global__ void __launch_bounds__(kThreads, 2)
    judgeRowsKernel(RmsNormDeviceCase c, rmsnorm_budget::Constants k, rmsnorm_budget::Constants ks, RowOutputs out) {
  __shared__ SharedDistribution dist[kTensors];
  // The row sums' and the figures' reductions take turns in one buffer.
  constexpr size_t kScratch = kThreads * (sizeof(RowSums) > kFiguresScratch ? sizeof(RowSums) : kFiguresScratch);
  __shared__ __align__(16) unsigned char scratch[kScratch];
  RowSums* sums = reinterpret_cast<RowSums*>(scratch);
  __shared__ RowValues row;
  __shared__ double abs_sum;
  __shared__ int undecided;
  const int t = threadIdx.x;
  clearDistributions(dist, kTensors);
  double max_ulp_at_scale[kTensors] = {0, 0, 0};
  const int64_t M = c.M, N = c.N;
  const double n = double(N);

  for (int64_t i = blockIdx.x; i < M; i += gridDim.x) {
    const int64_t base = i * c.ld;
    // Row sums: sum x^2 (exact terms, DWPlusFP each), P = sum (offset + w) dy x.
    RowSums mine{DW{}, DW{}, 0, 0, 0, 1};
    for (int64_t j = t; j < N; j += kThreads) {
      const double xv = load(c.T, c.x, base + j), dyv = load(c.T, c.dy, base + j), w_val = load(c.W, c.w, j);
      if (!isfinite(xv) || !isfinite(dyv)) mine.finite = 0;
      mine.sq = dw::plus(mine.sq, xv * xv);
      mine.partials += mine.sq.h;
      const double w = w_val + c.offset;
      DW p;
      if (c.offset == 0.0) {
        p = dw::twoProd(w * dyv, xv);  // exact: w dy has 48 bits
      } else {
        p = dw::times(dw::times(dw::twoSum(w_val, c.offset), dyv), xv);
        mine.e_P += 4.0 * kU2 * fabs(p.h);
      }
      mine.P = dw::plus(mine.P, p);
      mine.e_P += 3.01 * kU2 * fabs(mine.P.h);
    }
    mine.e_sq = 2.0 * kU2 * mine.partials;
    // m's sum |(offset + w) dy x| in rmsnorm_budget::chainedAbsSum's order:
    // lane k's chain over the columns k mod 32, then the chains in lane order.
    if (t < 32) {
      double chain = 0.0;
      for (int64_t j = t; j < N; j += 32) {
        const double w = load(c.W, c.w, j) + c.offset;
        chain += fabs(w * load(c.T, c.dy, base + j) * load(c.T, c.x, base + j));
      }
      double total = 0.0;
      for (int lane = 0; lane < 32; ++lane) total += __shfl_sync(0xffffffffu, chain, lane);
      if (t == 0) abs_sum = total;
    }
    const RowSums s = reduceRowSums(mine, sums);
    if (t == 0) {
      RowValues v{};
      v.undecided = !s.finite;
      const DW nn{n, 0.0};
      DW ms = dw::divide(s.sq, nn);
      double e_ms = s.e_sq / n + 9.8 * kU2 * ms.h;
      ms = dw::plus(ms, double(c.eps));
      e_ms = dw::up(e_ms + 2.0 * kU2 * ms.h);
      if (!(ms.h > 0.0) || !dw::inRange(ms)) v.undecided = 1;
      if (!v.undecided) {
        v.r = dw::divide(DW{1.0, 0.0}, dw::sqrt(ms));
        v.rel_r = dw::up(0.5 * e_ms / ms.h + (3.125 + 9.8) * kU2);
        v.e_r = v.rel_r * v.r.h;
        const double e = c.widen * (v.e_r + rmsnorm_budget::kMpfrSlack * v.r.h);
        if (!dw::inRange(v.r) || !dw::roundToNearest(v.r, e, v.r_near) || !dw::roundToOdd(v.r, e, v.r_odd))
          v.undecided = 1;
      }
      if (!v.undecided) {
        const DW Pr = dw::times(s.P, v.r);
        v.c = dw::divide(Pr, nn);
        v.e_c = dw::up((s.e_P * v.r.h + fabs(s.P.h) * v.e_r + 4.0 * kU2 * fabs(Pr.h)) / n + 9.8 * kU2 * fabs(v.c.h));
        v.m = abs_sum * v.r_near / n;
        if (!dw::roundToNearest(v.c, c.widen * (v.e_c + rmsnorm_budget::kMpfrSlack * v.m), v.c_near)) v.undecided = 1;
      }
      row = v;
      undecided = v.undecided;
    }
    __syncthreads();
    // Every element decided, or the whole row goes to the host.
    if (!undecided) {
      int mine_undecided = 0;
      ElementValues e;
      for (int64_t j = t; j < N && !mine_undecided; j += kThreads)
        mine_undecided = !certifyElement(c, k, ks, row, load(c.T, c.x, base + j), load(c.T, c.dy, base + j),
                                         load(c.W, c.w, j), e);
      if (mine_undecided) atomicOr(&undecided, 1);
    }
    __syncthreads();
    if (undecided) {
      if (t == 0) {
        out.undecided[i] = 1;
        for (int tensor = 0; tensor < kTensors; ++tensor) out.figures[tensor][i] = RowFigures{};
      }
      __syncthreads();
      continue;
    }
    // Judge y and dx.
    const double row_fraction = double(i) / double(M);
    RowFigures fy{}, fdx{};
    for (int64_t j = t; j < N; j += kThreads) {
      ElementValues e;
      certifyElement(c, k, ks, row, load(c.T, c.x, base + j), load(c.T, c.dy, base + j), load(c.W, c.w, j), e);
      const double col_fraction = double(j) / n;
      judgeElement(c.T, e.y_exact, e.y_budget, e.y_statistical, -1.0, load(c.T, c.y, base + j), row_fraction,
                   col_fraction, fy, dist[0], max_ulp_at_scale[0]);
      judgeElement(c.T, e.dx_exact, e.dx_budget, e.dx_statistical, e.dx_magnitude, load(c.T, c.dx, base + j),
                   row_fraction, col_fraction, fdx, dist[2], max_ulp_at_scale[2]);
    }
    const RowFigures y_row = reduceFigures(fy, scratch), dx_row = reduceFigures(fdx, scratch);
    if (t == 0) {
      out.figures[0][i] = y_row;
      out.figures[2][i] = dx_row;
      RowFigures fr{};
      judgeElement(DType::F32, row.r_odd, rmsnorm_budget::rstd(k, DType::F32, row.r_odd, row.r_near),
                   c.statistical ? rmsnorm_budget::rstd(ks, DType::F32, row.r_odd, row.r_near) : -1.0, -1.0,
                   double(c.rstd[i]), row_fraction, 0.0, fr, dist[1], max_ulp_at_scale[1]);
      out.figures[1][i] = fr;
      out.undecided[i] = 0;
      out.r_hi[i] = row.r.h, out.r_lo[i] = row.r.l, out.rel_r[i] = row.rel_r, out.r_near[i] = row.r_near;
      out.r_odd[i] = row.r_odd;
    }
    __syncthreads();
  }
  flushDistributions(dist, max_ulp_at_scale, kTensors, out.distribution);
}

/// The budget's constants at row depth d_row (rstd saved in fp32: the
/// backward's rstd error is the forward's).
rmsnorm_budget::Constants constantsOf(const RmsNormDeviceCase& c, double d_row, double delta_r) {
  return rmsnorm_budget::Constants{c.T, c.acc, d_row, delta_r, delta_r, c.w_units, false};
}

}  // namespace

RowsJudged judgeRows(const RmsNormDeviceCase& c) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t M = size_t(c.M);
  DeviceArrays mem;
  RowOutputs out{};
  out.undecided = mem.make<uint8_t>(M);
  for (int tensor = 0; tensor < kTensors; ++tensor) out.figures[tensor] = mem.make<RowFigures>(M);
  out.r_hi = mem.make<double>(M), out.r_lo = mem.make<double>(M), out.rel_r = mem.make<double>(M);
  out.r_near = mem.make<double>(M), out.r_odd = mem.make<double>(M);
  out.distribution = mem.make<GlobalDistribution>(kTensors);
  if (c.M > 0) {
    judgeRowsKernel<<<ctasFor(c.M, 4), kThreads>>>(c, constantsOf(c, c.d_row, c.delta_r),
                                                   constantsOf(c, c.d_row_statistical, c.delta_r_statistical), out);
    ULPCHECK_CUDA_LAUNCH("gpu_oracle::judgeRowsKernel");
  }
  deviceSynchronize("gpu_oracle::judgeRowsKernel");
  RowsJudged r;
  r.undecided = DeviceArrays::download(out.undecided, M);
  for (int tensor = 0; tensor < kTensors; ++tensor) r.figures[tensor] = DeviceArrays::download(out.figures[tensor], M);
  r.r_hi = DeviceArrays::download(out.r_hi, M), r.r_lo = DeviceArrays::download(out.r_lo, M);
  r.rel_r = DeviceArrays::download(out.rel_r, M), r.r_near = DeviceArrays::download(out.r_near, M);
  r.r_odd = DeviceArrays::download(out.r_odd, M);
  const std::vector<Distribution> d = downloadDistributions(out.distribution, kTensors, r.figures.data());
  std::copy(d.begin(), d.end(), r.distribution.begin());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

namespace {

struct ChunkOutputs {
  double *sum_hi, *sum_lo, *err, *abs_terms, *gain, *sq_terms, *spread;
};

/// rmsnorm.cpp's addFastDwRow over the rows of one chunk, one column per thread.
__global__ void dwChunkKernel(RmsNormDeviceCase c, int64_t chunks, const double* r_hi, const double* r_lo,
                              const double* rel_r, const double* r_near, ChunkOutputs out) {
  const int64_t id = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= chunks * c.N) return;
  const int64_t chunk = id / c.N, j = id % c.N;
  DW sum{};
  double err = 0, abs_terms = 0, gain = 0, sq_terms = 0, spread = 0;
  for (int64_t i = c.M * chunk / chunks; i < c.M * (chunk + 1) / chunks; ++i) {
    const double xv = load(c.T, c.x, i * c.ld + j), dyv = load(c.T, c.dy, i * c.ld + j);
    const DW term = dw::times(DW{r_hi[i], r_lo[i]}, dyv * xv);  // dy x exact: 48 bits
    sum = dw::plus(sum, term);
    err += (rel_r[i] + 2.0 * kU2) * fabs(term.h) + 3.01 * kU2 * fabs(sum.h);
    // addPlainDwMagnitudes and addDwGain with rb = r_near, spread_r = 0.
    const double rb = r_near[i], xhat_b = xv * rb;
    abs_terms += fabs(dyv * xhat_b);
    sq_terms += (dyv * xhat_b) * (dyv * xhat_b);
    spread += 0.0 * fabs(dyv * xv);
    gain += 1.0 + fabs(dyv) + rb;
  }
  out.sum_hi[id] = sum.h, out.sum_lo[id] = sum.l, out.err[id] = err, out.abs_terms[id] = abs_terms;
  out.gain[id] = gain, out.sq_terms[id] = sq_terms, out.spread[id] = spread;
}

}  // namespace

DwChunkSums dwChunkSums(const RmsNormDeviceCase& c, int64_t chunks, const std::vector<double>& r_hi,
                        const std::vector<double>& r_lo, const std::vector<double>& rel_r,
                        const std::vector<double>& r_near) {
  DeviceArrays mem;
  const size_t count = size_t(chunks * c.N);
  ChunkOutputs out{};
  for (double** p : {&out.sum_hi, &out.sum_lo, &out.err, &out.abs_terms, &out.gain, &out.sq_terms, &out.spread})
    *p = mem.make<double>(count);
  const double *rh = mem.upload(r_hi), *rl = mem.upload(r_lo), *rel = mem.upload(rel_r), *rn = mem.upload(r_near);
  if (count) {
    dwChunkKernel<<<unsigned((count + kThreads - 1) / kThreads), kThreads>>>(c, chunks, rh, rl, rel, rn, out);
    ULPCHECK_CUDA_LAUNCH("gpu_oracle::dwChunkKernel");
  }
  deviceSynchronize("gpu_oracle::dwChunkKernel");
  DwChunkSums s;
  s.chunks = chunks;
  s.sum_hi = DeviceArrays::download(out.sum_hi, count), s.sum_lo = DeviceArrays::download(out.sum_lo, count);
  s.err = DeviceArrays::download(out.err, count), s.abs_terms = DeviceArrays::download(out.abs_terms, count);
  s.gain = DeviceArrays::download(out.gain, count), s.sq_terms = DeviceArrays::download(out.sq_terms, count);
  s.spread = DeviceArrays::download(out.spread, count);
  return s;
}

namespace {

/// dW's leaves dy x rstd_backward[i], each within 2^-51 of itself.
struct DwLeaf {
  DType T;
  const void *dy, *x;
  int64_t ld;
  const double* rstd_backward;
  __device__ DeviceLeaf operator()(int64_t i, int64_t j) const {
    const double t = load(T, dy, i * ld + j) * load(T, x, i * ld + j) * rstd_backward[i];
    return DeviceLeaf{t, 0x1p-51 * fabs(t)};
  }
};

}  // namespace

std::vector<double> orderedPartialAbs(const RmsNormDeviceCase& c, const ColumnOrder& order, int64_t depth,
                                      const std::vector<double>& rstd_backward) {
  DeviceArrays mem;
  return gpu_oracle::orderedPartialAbs(c.M, c.N, order, depth, DwLeaf{c.T, c.dy, c.x, c.ld, mem.upload(rstd_backward)},
                                       "gpu_oracle::orderedPartialKernel");
}

}  // namespace ulpcheck::gpu_oracle
