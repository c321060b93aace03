// Host-port building blocks shared by the row-wise norm ops: element access
// in the storage dtype, the CUDA block all-reduce and per-thread column order
// replayed sequentially, and the three ways of finishing a column reduction
// from per-CTA partials, each in the order its CUDA counterpart adds.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "kernels/common/row_launch.h"
#include "kernels/common/row_plan.h"

namespace ulpcheck::row_host {

using namespace row_plan;

/// Element i's bits at the dtype's width. One memcpy of a constant size per
/// width: a size the compiler cannot tell (storageBytes of a run-time dtype,
/// 1, 2 or 4) became a byte loop that slowed the host ports 2.5-fold.
inline uint32_t elementBits(const void* base, DType t, int64_t i) {
  const char* p = static_cast<const char*>(base);
  switch (storageBytes(t)) {
    case 4: {
      uint32_t w;
      std::memcpy(&w, p + 4 * i, 4);
      return w;
    }
    case 2: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return h;
    }
    default: return static_cast<uint8_t>(p[i]);
  }
}

inline void setElementBits(void* base, DType t, int64_t i, uint32_t bits) {
  char* p = static_cast<char*>(base);
  switch (storageBytes(t)) {
    case 4: std::memcpy(p + 4 * i, &bits, 4); return;
    case 2: {
      const uint16_t h = static_cast<uint16_t>(bits);
      std::memcpy(p + 2 * i, &h, 2);
      return;
    }
    default: p[i] = static_cast<char>(bits);
  }
}

inline float load(const void* base, DType t, int64_t i) {
  return static_cast<float>(decodeBits(t, elementBits(base, t, i)));
}

inline void store(void* base, DType t, int64_t i, float v) {
  // float -> double is exact: one RNE rounding to t
  setElementBits(base, t, i, doubleToBits(t, v));
}

/// A statistic as the forward saves it: fp32, or rounded to the activation
/// dtype under stats=T (core/norm_spec.h), as a kernel storing it in a
/// T tensor does; the forward's own y uses the fp32 value.
inline float savedStat(const RowShape& s, float v) {
  return statsInActivationDtype(s.spec) ? static_cast<float>(roundToFormat(s.dtype, v)) : v;
}

inline float flushSubnormal(float v) { return std::fabs(v) < 0x1p-126f ? std::copysign(0.f, v) : v; }

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

/// The CUDA blockAllReduce: butterfly inside each warp, then warp totals in order.
inline float blockAllReduce(std::vector<float>& per_thread) {
  const size_t threads = per_thread.size();
  std::vector<float> next(threads);
  for (int o = 16; o > 0; o >>= 1) {
    for (size_t l = 0; l < threads; ++l) next[l] = per_thread[l] + per_thread[l ^ size_t(o)];
    per_thread.swap(next);
  }
  float total = 0.f;
  for (size_t w = 0; w < threads; w += kWarp) total += per_thread[w];
  return total;
}

/// Visits thread t's columns in the order the CUDA thread accumulates them:
/// its vectors v = 0..vpt-1 (elements k = 0..vec-1 each), then its tail element.
template <typename Fn>
void forThreadColumns(const RowPlan& p, int t, bool include_tail, Fn&& fn) {
  for (int v = 0; v < p.vpt; ++v) {
    const int64_t vi = int64_t(v) * p.threads + t;
    if (vi >= p.nvec) continue;
    for (int k = 0; k < p.vec; ++k) fn(vi * p.vec + k);
  }
  if (include_tail && t < p.tail) fn(p.nvec * p.vec + t);
}

/// Column `col` of the sum over `ctas` rows of partials (row stride pld), in
/// the order of `strategy`: Separate as sumPartialsKernel (kDwGroups
/// interleaved chains, then the group sums in order); LastBlock serially in
/// CTA order; Atomic serially from CTA `first` on (an arrival order),
/// flushing subnormals as red.add.f32 does.
inline float sumPartials(const float* partial, int64_t pld, int64_t ctas, int64_t col, DwStrategy strategy,
                         int64_t first = 0) {
  float total = 0.f;
  if (strategy == DwStrategy::Separate) {
    float group_sum[kDwGroups];
    for (int g = 0; g < kDwGroups; ++g) {
      float a = 0.f;
      for (int64_t c = g; c < ctas; c += kDwGroups) a += partial[c * pld + col];
      group_sum[g] = a;
    }
    for (float g : group_sum) total += g;
    return total;
  }
  const bool ftz = strategy == DwStrategy::Atomic;
  for (int64_t k = 0; k < ctas; ++k) {
    const float v = partial[((first + k) % ctas) * pld + col];
    total = ftz ? flushSubnormal(total + flushSubnormal(v)) : total + v;
  }
  return total;
}

}  // namespace ulpcheck::row_host
