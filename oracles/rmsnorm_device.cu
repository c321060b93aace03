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
#include "oracles/double_word.h"
#include "oracles/rmsnorm_budgets.h"
#include "oracles/tolerances.h"

namespace ulpcheck::gpu_oracle {

namespace {

using dw::DW;
using dw::kU2;
namespace eb = error_buckets;

constexpr int kThreads = 256;

__device__ inline double load(DType t, const void* p, int64_t i) {
  const uint32_t bits = storageBytes(t) == 4 ? static_cast<const uint32_t*>(p)[i] : static_cast<const uint16_t*>(p)[i];
  return decodeBits(t, bits);
}

__device__ inline double overflowThreshold(DType t) { return maxFinite(t) + 0.5 * ulpOf(t, maxFinite(t)); }

/// A CTA's share of the distributions, flushed to global memory at its end.
struct SharedDistribution {
  unsigned long long ratio[eb::kRatioBuckets];
  unsigned long long ulp[eb::kUlpBuckets];
  unsigned long long scale_count[eb::kScaleOctaves];
  int where[eb::kGrid * eb::kGrid];  // float bits of values >= 0 order as ints
  int scale_worst[eb::kScaleOctaves];
  unsigned long long max_ulp_bits;  // double bits of values >= 0 order as integers
};

/// The global distribution: the same arrays.
struct GlobalDistribution {
  unsigned long long ratio[eb::kRatioBuckets];
  unsigned long long ulp[eb::kUlpBuckets];
  unsigned long long scale_count[eb::kScaleOctaves];
  int where[eb::kGrid * eb::kGrid];
  int scale_worst[eb::kScaleOctaves];
  unsigned long long max_ulp_bits;
};

__device__ inline int floatBits(float f) { return __float_as_int(f); }

/// One element judged as properties/accuracy.cpp's judgeTensorRows judges it.
/// magnitude < 0: the tensor has none (its scale is |exact|).
/// statistical < 0: no probabilistic budget.
__device__ void judgeElement(DType t, double exact, double rigorous, double statistical, double magnitude, double got,
                             double row_fraction, double col_fraction, RowFigures& f, SharedDistribution& d,
                             double& max_ulp_at_scale) {
  // std::min(rigorous, statistical)
  const double budget = statistical < 0 ? rigorous : (statistical < rigorous ? statistical : rigorous);
  const double unit = ulpOf(t, exact);
  bool ok;
  if (!isfinite(exact) && isinf(rigorous)) ok = !isfinite(got);
  else if (isnan(exact)) ok = isnan(got);
  else if (isnan(got)) ok = false;
  else if (isinf(got)) ok = (signbit(got) ? budget - exact : exact + budget) >= overflowThreshold(t);
  else ok = true;
  const double err = isfinite(got) && isfinite(exact) ? fabs(got - exact) : INFINITY;
  const double ulp = ok && !isfinite(err) ? 0 : err / unit;
  const double ratio = (ok && !isfinite(err)) || err == 0.0 ? 0 : err / budget;
  if (ok && ratio > 1.0 && err <= rigorous) ++f.statistical_flags;
  ok = ok && ratio <= 1.0;
  // ReferenceTensor::magnitudeAt: std::max(|exact|, magnitude).
  const double scale = magnitude < 0 ? fabs(exact) : (fabs(exact) < magnitude ? magnitude : fabs(exact));
  const double scale_unit = ulpOf(t, scale > 0 ? scale : minNormal(t));
  const double ulp_at_scale = !isfinite(err) ? (ok ? 0.0 : INFINITY) : err / scale_unit;
  // ErrorDistribution::add (ulp@scale only where there is a scale)
  atomicAdd(&d.ratio[eb::bucketOf(ratio, eb::kRatioLow, eb::kRatioHigh)], 1ull);
  const float shown = eb::shownRatio(ratio);
  atomicMax(&d.where[eb::gridCell(row_fraction, col_fraction)], floatBits(shown));
  if (scale > 0) {
    atomicAdd(&d.ulp[eb::bucketOf(ulp_at_scale, eb::kUlpLow, eb::kUlpHigh)], 1ull);
    if (ulp_at_scale > max_ulp_at_scale) max_ulp_at_scale = ulp_at_scale;
    const int slot = eb::scaleSlot(scale);
    atomicAdd(&d.scale_count[slot], 1ull);
    atomicMax(&d.scale_worst[slot], floatBits(shown));
  }
  ++f.elements;
  if (isfinite(ulp)) {
    if (f.max_ulp < ulp) f.max_ulp = ulp;
    f.sum_sq_ulp += ulp * ulp;
    ++f.finite;
  }
  if (f.max_ratio < ratio) f.max_ratio = ratio;
  f.nontrivial |= exact != 0.0;
  if (isfinite(exact) && exact != 0.0) {
    ++f.nonzero;
    const double seen = tolerance::kPowerErrorFraction * (magnitude < 0 ? fabs(exact) : scale);
    f.sharp += budget <= (seen < unit ? unit : seen);
  }
  if (!ok) ++f.wrong;
}

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

__device__ void reduceRowSums(RowSums& mine, RowSums* shared) {
  const int t = threadIdx.x;
  shared[t] = mine;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) {
      RowSums a = shared[t];
      const RowSums& b = shared[t + stride];
      a.sq = dw::plus(a.sq, b.sq);
      a.e_sq += b.e_sq + 3.01 * kU2 * fabs(a.sq.h);
      a.P = dw::plus(a.P, b.P);
      a.e_P += b.e_P + 3.01 * kU2 * fabs(a.P.h);
      a.partials += b.partials;
      a.finite &= b.finite;
      shared[t] = a;
    }
    __syncthreads();
  }
}

/// Per-row figures summed over the CTA (maxima and counts exact; the sum of
/// squares in a fixed tree).
__device__ void reduceFigures(RowFigures& mine, RowFigures* shared) {
  const int t = threadIdx.x;
  shared[t] = mine;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) {
      RowFigures a = shared[t];
      const RowFigures& b = shared[t + stride];
      if (a.max_ratio < b.max_ratio) a.max_ratio = b.max_ratio;
      if (a.max_ulp < b.max_ulp) a.max_ulp = b.max_ulp;
      a.sum_sq_ulp += b.sum_sq_ulp;
      a.elements += b.elements, a.finite += b.finite, a.wrong += b.wrong, a.nonzero += b.nonzero, a.sharp += b.sharp;
      a.nontrivial |= b.nontrivial;
      a.statistical_flags += b.statistical_flags;
      shared[t] = a;
    }
    __syncthreads();
  }
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
  constexpr size_t kScratch = kThreads * (sizeof(RowSums) > sizeof(RowFigures) ? sizeof(RowSums) : sizeof(RowFigures));
  __shared__ __align__(16) unsigned char scratch[kScratch];
  RowSums* sums = reinterpret_cast<RowSums*>(scratch);
  RowFigures* figures = reinterpret_cast<RowFigures*>(scratch);
  __shared__ RowValues row;
  __shared__ double abs_sum;
  __shared__ int undecided;
  const int t = threadIdx.x;
  for (int tensor = 0; tensor < kTensors; ++tensor) {
    SharedDistribution& d = dist[tensor];
    for (int b = t; b < eb::kRatioBuckets; b += kThreads) d.ratio[b] = 0;
    for (int b = t; b < eb::kUlpBuckets; b += kThreads) d.ulp[b] = 0;
    for (int b = t; b < eb::kScaleOctaves; b += kThreads) d.scale_count[b] = 0, d.scale_worst[b] = 0;
    for (int b = t; b < eb::kGrid * eb::kGrid; b += kThreads) d.where[b] = 0;
    if (t == 0) d.max_ulp_bits = 0;
  }
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
    reduceRowSums(mine, sums);
    if (t == 0) {
      RowValues v{};
      const RowSums& s = sums[0];
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
    reduceFigures(fy, figures);
    if (t == 0) out.figures[0][i] = figures[0];
    __syncthreads();
    reduceFigures(fdx, figures);
    if (t == 0) {
      out.figures[2][i] = figures[0];
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
  for (int tensor = 0; tensor < kTensors; ++tensor) {
    SharedDistribution& d = dist[tensor];
    atomicMax(&d.max_ulp_bits, static_cast<unsigned long long>(__double_as_longlong(max_ulp_at_scale[tensor])));
  }
  __syncthreads();
  for (int tensor = 0; tensor < kTensors; ++tensor) {
    const SharedDistribution& d = dist[tensor];
    GlobalDistribution& g = out.distribution[tensor];
    for (int b = t; b < eb::kRatioBuckets; b += kThreads)
      if (d.ratio[b]) atomicAdd(&g.ratio[b], d.ratio[b]);
    for (int b = t; b < eb::kUlpBuckets; b += kThreads)
      if (d.ulp[b]) atomicAdd(&g.ulp[b], d.ulp[b]);
    for (int b = t; b < eb::kScaleOctaves; b += kThreads) {
      if (d.scale_count[b]) atomicAdd(&g.scale_count[b], d.scale_count[b]);
      if (d.scale_worst[b]) atomicMax(&g.scale_worst[b], d.scale_worst[b]);
    }
    for (int b = t; b < eb::kGrid * eb::kGrid; b += kThreads)
      if (d.where[b]) atomicMax(&g.where[b], d.where[b]);
    if (t == 0) atomicMax(&g.max_ulp_bits, d.max_ulp_bits);
  }
}

/// Device memory for a few arrays, freed on every path out.
class DeviceArrays {
 public:
  ~DeviceArrays() {
    for (void* p : blocks_) cudaFree(p);
  }
  template <typename T>
  T* make(size_t count) {
    void* p = nullptr;
    ULPCHECK_CUDA(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T)));
    blocks_.push_back(p);
    ULPCHECK_CUDA(cudaMemset(p, 0, std::max<size_t>(count, 1) * sizeof(T)));
    return static_cast<T*>(p);
  }
  template <typename T>
  T* upload(const std::vector<T>& v) {
    T* p = make<T>(v.size());
    ULPCHECK_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
  }
  template <typename T>
  static std::vector<T> download(const T* p, size_t count) {
    std::vector<T> v(count);
    ULPCHECK_CUDA(cudaMemcpy(v.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }

 private:
  std::vector<void*> blocks_;
};

/// The budget's constants at row depth d_row (rstd saved in fp32: the
/// backward's rstd error is the forward's).
rmsnorm_budget::Constants constantsOf(const RmsNormDeviceCase& c, double d_row, double delta_r) {
  return rmsnorm_budget::Constants{c.T, c.acc, d_row, delta_r, delta_r, c.w_units, false};
}

int ctasFor(int64_t work, int per_sm) {
  int device = 0, sms = 0;
  ULPCHECK_CUDA(cudaGetDevice(&device));
  ULPCHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return int(std::max<int64_t>(1, std::min<int64_t>(work, int64_t(sms) * per_sm)));
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
  const std::vector<GlobalDistribution> g = DeviceArrays::download(out.distribution, kTensors);
  for (int tensor = 0; tensor < kTensors; ++tensor) {
    Distribution& d = r.distribution[size_t(tensor)];
    const GlobalDistribution& s = g[size_t(tensor)];
    std::copy(std::begin(s.ratio), std::end(s.ratio), d.ratio.begin());
    std::copy(std::begin(s.ulp), std::end(s.ulp), d.ulp_at_scale.begin());
    std::copy(std::begin(s.scale_count), std::end(s.scale_count), d.scale_count.begin());
    for (size_t b = 0; b < d.worst_where.size(); ++b) std::memcpy(&d.worst_where[b], &s.where[b], sizeof(float));
    for (size_t b = 0; b < d.scale_worst.size(); ++b) std::memcpy(&d.scale_worst[b], &s.scale_worst[b], sizeof(float));
    std::memcpy(&d.max_ulp_at_scale, &s.max_ulp_bits, sizeof(double));
    for (const RowFigures& f : r.figures[size_t(tensor)]) d.count += f.elements;
  }
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

/// mp::orderedColumnBound's loop for one column per thread, leaves dy x rstd.
__global__ void orderedPartialKernel(RmsNormDeviceCase c, int64_t ctas, int groups, double depth,
                                     const double* rstd_backward, double* partial_abs) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= c.N) return;
  double group[kMaxOrderGroups];
  for (int g = 0; g < groups; ++g) group[g] = 0.0;
  double abs_sum = 0, abs_terms = 0, errs = 0;
  for (int64_t cta = 0; cta < ctas; ++cta) {
    double chain = 0.0;
    for (int64_t i = cta; i < c.M; i += ctas) {
      const double t = load(c.T, c.dy, i * c.ld + j) * load(c.T, c.x, i * c.ld + j) * rstd_backward[i];
      chain += t;
      abs_sum += fabs(chain);
      abs_terms += fabs(t);
      errs += 0x1p-51 * fabs(t);
    }
    double& g = group[cta % groups];
    g += chain;
    abs_sum += fabs(g);
  }
  if (groups > 1) {
    double total = 0;
    for (int g = 0; g < groups; ++g) abs_sum += fabs(total += group[g]);
  }
  partial_abs[j] = abs_sum + depth * errs + depth * (depth + 2) * 0x1p-52 * abs_terms;
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

std::vector<double> orderedPartialAbs(const RmsNormDeviceCase& c, const ColumnOrder& order, int64_t depth,
                                      const std::vector<double>& rstd_backward) {
  if (order.groups > kMaxOrderGroups) throw std::invalid_argument("gpu_oracle: a column order with too many groups");
  DeviceArrays mem;
  const double* rb = mem.upload(rstd_backward);
  double* partial = mem.make<double>(size_t(c.N));
  if (c.N > 0) {
    orderedPartialKernel<<<unsigned((c.N + 127) / 128), 128>>>(c, std::max<int64_t>(1, order.ctas),
                                                               std::max(1, order.groups), double(depth), rb, partial);
    ULPCHECK_CUDA_LAUNCH("gpu_oracle::orderedPartialKernel");
  }
  deviceSynchronize("gpu_oracle::orderedPartialKernel");
  return DeviceArrays::download(partial, size_t(c.N));
}

}  // namespace ulpcheck::gpu_oracle
