// The device side of a GPU judge (oracles/device_judge.h): an element judged
// as properties/accuracy.cpp's judgeTensorRows judges it, per-row figures and
// a CTA's share of the error distributions summed, and device memory that
// is freed on every path out. Included by the ops' GPU oracles
// (oracles/rmsnorm_device.cu, oracles/layernorm_device.cu), built with
// -fmad=false: every expression here must round as the host's does.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "core/accuracy.h"
#include "core/cuda_check.h"
#include "core/cuda_ops.h"
#include "core/device.h"
#include "core/dtype.h"
#include "oracles/device_judge.h"
#include "oracles/tolerances.h"

namespace ulpcheck::gpu_oracle {

namespace eb = error_buckets;

__device__ inline double load(DType t, const void* p, int64_t i) {
  const int bytes = storageBytes(t);
  const uint32_t bits = bytes == 4   ? static_cast<const uint32_t*>(p)[i]
                        : bytes == 2 ? static_cast<const uint16_t*>(p)[i]
                                     : static_cast<const uint8_t*>(p)[i];
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

/// Zeroes a CTA's distributions (every thread of the CTA calls it).
__device__ inline void clearDistributions(SharedDistribution* dist, int tensors) {
  const int t = threadIdx.x, threads = blockDim.x;
  for (int tensor = 0; tensor < tensors; ++tensor) {
    SharedDistribution& d = dist[tensor];
    for (int b = t; b < eb::kRatioBuckets; b += threads) d.ratio[b] = 0;
    for (int b = t; b < eb::kUlpBuckets; b += threads) d.ulp[b] = 0;
    for (int b = t; b < eb::kScaleOctaves; b += threads) d.scale_count[b] = 0, d.scale_worst[b] = 0;
    for (int b = t; b < eb::kGrid * eb::kGrid; b += threads) d.where[b] = 0;
    if (t == 0) d.max_ulp_bits = 0;
  }
  __syncthreads();
}

/// Adds a CTA's distributions (and each thread's max ulp@scale) into the
/// global ones (every thread of the CTA calls it, at its end).
__device__ inline void flushDistributions(SharedDistribution* dist, const double* max_ulp_at_scale, int tensors,
                                          GlobalDistribution* global) {
  const int t = threadIdx.x, threads = blockDim.x;
  for (int tensor = 0; tensor < tensors; ++tensor)
    atomicMax(&dist[tensor].max_ulp_bits,
              static_cast<unsigned long long>(__double_as_longlong(max_ulp_at_scale[tensor])));
  __syncthreads();
  for (int tensor = 0; tensor < tensors; ++tensor) {
    const SharedDistribution& d = dist[tensor];
    GlobalDistribution& g = global[tensor];
    for (int b = t; b < eb::kRatioBuckets; b += threads)
      if (d.ratio[b]) atomicAdd(&g.ratio[b], d.ratio[b]);
    for (int b = t; b < eb::kUlpBuckets; b += threads)
      if (d.ulp[b]) atomicAdd(&g.ulp[b], d.ulp[b]);
    for (int b = t; b < eb::kScaleOctaves; b += threads) {
      if (d.scale_count[b]) atomicAdd(&g.scale_count[b], d.scale_count[b]);
      if (d.scale_worst[b]) atomicMax(&g.scale_worst[b], d.scale_worst[b]);
    }
    for (int b = t; b < eb::kGrid * eb::kGrid; b += threads)
      if (d.where[b]) atomicMax(&g.where[b], d.where[b]);
    if (t == 0) atomicMax(&g.max_ulp_bits, d.max_ulp_bits);
  }
}

__device__ inline int floatBits(float f) { return __float_as_int(f); }

/// One element judged as properties/accuracy.cpp's judgeTensorRows judges it.
/// magnitude < 0: the tensor has none (its scale is |exact|).
/// statistical < 0: no probabilistic budget.
/// mid, half: the run's own center and its budget (ConditionalBounds); NaN: none.
__device__ inline void judgeElement(DType t, double exact, double rigorous, double statistical, double magnitude,
                                    double got, double row_fraction, double col_fraction, RowFigures& f,
                                    SharedDistribution& d, double& max_ulp_at_scale, double mid = NAN,
                                    double half = NAN) {
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
  double ratio = (ok && !isfinite(err)) || err == 0.0 ? 0 : err / budget;
  if (ok && ratio > 1.0 && err <= rigorous) ++f.statistical_flags;
  ok = ok && ratio <= 1.0;
  // Within the budget about the run's own center too, where there is one:
  // the narrower bound measures power.
  double sharp_budget = budget;
  if (isfinite(mid) && isfinite(half) && isfinite(got)) {
    const double off = fabs(got - mid), own = off == 0.0 ? 0.0 : off / half;
    sharp_budget = half < budget ? half : budget;
    ok = ok && own <= 1.0;
    if (ratio < own) ratio = own;
  }
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
    f.sharp += sharp_budget <= (seen < unit ? unit : seen);
  }
  if (!ok) ++f.wrong;
  addBiasElement(t, exact, rigorous, got, unit, f.bias);
}

/// `mine` of every thread combined over the CTA in a fixed tree (strides
/// blockDim.x / 2, / 4, ... 1; blockDim.x a power of two): combine(a, b)
/// folds b into a. `shared` holds blockDim.x values; every thread gets the total.
template <typename T, typename Combine>
__device__ T reduceCta(const T& mine, T* shared, Combine combine) {
  const int t = threadIdx.x;
  shared[t] = mine;
  __syncthreads();
  for (int stride = int(blockDim.x) / 2; stride > 0; stride /= 2) {
    if (t < stride) {
      T a = shared[t];
      combine(a, shared[t + stride]);
      shared[t] = a;
    }
    __syncthreads();
  }
  const T total = shared[0];
  __syncthreads();
  return total;
}

/// The scratch reduceFigures takes, per thread.
inline constexpr size_t kFiguresScratch = sizeof(ErrorFigures) > sizeof(BiasSums) ? sizeof(ErrorFigures)
                                                                                  : sizeof(BiasSums);

/// Per-row figures summed over the CTA (maxima and counts exact; the sums
/// in a fixed tree), in `scratch` of blockDim.x kFiguresScratch bytes.
__device__ inline RowFigures reduceFigures(const RowFigures& mine, unsigned char* scratch) {
  RowFigures out;
  static_cast<ErrorFigures&>(out) = reduceCta(
      static_cast<const ErrorFigures&>(mine), reinterpret_cast<ErrorFigures*>(scratch),
      [](ErrorFigures& a, const ErrorFigures& b) {
        if (a.max_ratio < b.max_ratio) a.max_ratio = b.max_ratio;
        if (a.max_ulp < b.max_ulp) a.max_ulp = b.max_ulp;
        a.sum_sq_ulp += b.sum_sq_ulp;
        a.elements += b.elements, a.finite += b.finite, a.wrong += b.wrong, a.nonzero += b.nonzero, a.sharp += b.sharp;
        a.nontrivial |= b.nontrivial;
        a.statistical_flags += b.statistical_flags;
      });
  out.bias = reduceCta(mine.bias, reinterpret_cast<BiasSums*>(scratch),
                       [](BiasSums& a, const BiasSums& b) { a.add(b); });
  return out;
}

/// Device memory for a few arrays, freed on every path out (stream-ordered:
/// cudaops::allocateOnStream).
class DeviceArrays {
 public:
  DeviceArrays() = default;
  DeviceArrays(const DeviceArrays&) = delete;
  DeviceArrays& operator=(const DeviceArrays&) = delete;
  ~DeviceArrays() {
    for (void* p : blocks_) cudaops::releaseOnStream(p);
  }
  template <typename T>
  T* make(size_t count) {
    const size_t bytes = std::max<size_t>(count, 1) * sizeof(T);
    void* p = cudaops::allocateOnStream(bytes);
    blocks_.push_back(p);
    ULPCHECK_CUDA(cudaMemsetAsync(p, 0, bytes, cudaStreamPerThread));
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

/// The global distributions brought back, each counted over its rows' figures.
inline std::vector<Distribution> downloadDistributions(const GlobalDistribution* global, int tensors,
                                                       const std::vector<RowFigures>* figures) {
  const std::vector<GlobalDistribution> g = DeviceArrays::download(global, size_t(tensors));
  std::vector<Distribution> out(static_cast<size_t>(tensors));
  for (size_t tensor = 0; tensor < out.size(); ++tensor) {
    Distribution& d = out[tensor];
    const GlobalDistribution& s = g[tensor];
    std::copy(std::begin(s.ratio), std::end(s.ratio), d.ratio.begin());
    std::copy(std::begin(s.ulp), std::end(s.ulp), d.ulp_at_scale.begin());
    std::copy(std::begin(s.scale_count), std::end(s.scale_count), d.scale_count.begin());
    for (size_t b = 0; b < d.worst_where.size(); ++b) std::memcpy(&d.worst_where[b], &s.where[b], sizeof(float));
    for (size_t b = 0; b < d.scale_worst.size(); ++b) std::memcpy(&d.scale_worst[b], &s.scale_worst[b], sizeof(float));
    std::memcpy(&d.max_ulp_at_scale, &s.max_ulp_bits, sizeof(double));
    for (const RowFigures& f : figures[tensor]) d.count += f.elements;
  }
  return out;
}

/// One leaf of a column sum as the host's oracle evaluates it in double (mp::Leaf).
struct DeviceLeaf {
  double value, err;
};

/// mp::orderedColumnBound's loop (oracles/column_sum.h), one column per
/// thread, in its order: leaf(i, j) gives row i's term of column j.
template <typename LeafFn>
__global__ void orderedPartialKernel(int64_t M, int64_t N, int64_t ctas, int groups, double depth, LeafFn leaf,
                                     double* partial_abs) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= N) return;
  double group[kMaxOrderGroups];
  for (int g = 0; g < groups; ++g) group[g] = 0.0;
  double abs_sum = 0, abs_terms = 0, errs = 0;
  for (int64_t cta = 0; cta < ctas; ++cta) {
    double chain = 0.0;
    for (int64_t i = cta; i < M; i += ctas) {
      const DeviceLeaf t = leaf(i, j);
      chain += t.value;
      abs_sum += fabs(chain);
      abs_terms += fabs(t.value);
      errs += t.err;
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

/// The padded sum_v |s_v| of each column of an M x N sum in `order`
/// (mp::orderedColumnBound's partial_abs), leaves from `leaf`, depth as
/// mp::orderedColumnShape gives it.
template <typename LeafFn>
std::vector<double> orderedPartialAbs(int64_t M, int64_t N, const ColumnOrder& order, int64_t depth, LeafFn leaf,
                                      const char* what) {
  if (order.groups > kMaxOrderGroups) throw std::invalid_argument("gpu_oracle: a column order with too many groups");
  DeviceArrays mem;
  double* partial = mem.make<double>(size_t(N));
  if (N > 0) {
    orderedPartialKernel<<<unsigned((N + 127) / 128), 128>>>(M, N, std::max<int64_t>(1, order.ctas),
                                                             std::max(1, order.groups), double(depth), leaf, partial);
    ULPCHECK_CUDA_LAUNCH(what);
  }
  deviceSynchronize(what);
  return DeviceArrays::download(partial, size_t(N));
}

/// A grid of at most per_sm CTAs per SM, and no more than `work`.
inline int ctasFor(int64_t work, int per_sm) {
  int device = 0, sms = 0;
  ULPCHECK_CUDA(cudaGetDevice(&device));
  ULPCHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return int(std::max<int64_t>(1, std::min<int64_t>(work, int64_t(sms) * per_sm)));
}

}  // namespace ulpcheck::gpu_oracle
