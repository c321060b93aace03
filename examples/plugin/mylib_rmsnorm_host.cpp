#include <sched.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "mylib_rmsnorm.h"

namespace mylib {

namespace {

// The library's own 16-bit conversions (round to nearest even).
float bf16ToFloat(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float load(Dtype t, const void* p, int64_t i) {
  switch (t) {
    case Dtype::F32: return static_cast<const float*>(p)[i];
    case Dtype::F16: return float(static_cast<const _Float16*>(p)[i]);
    case Dtype::BF16: return bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
  }
  return 0.f;
}
void store(Dtype t, void* p, int64_t i, float v) {
  switch (t) {
    case Dtype::F32: static_cast<float*>(p)[i] = v; return;
    case Dtype::F16: static_cast<_Float16*>(p)[i] = _Float16(v); return;
    case Dtype::BF16: static_cast<uint16_t*>(p)[i] = floatToBf16(v); return;
  }
}
float roundBf16(float v) { return bf16ToFloat(floatToBf16(v)); }
/// v rounded to t, as storing it in a tensor of t does.
float roundTo(Dtype t, float v) {
  alignas(4) unsigned char element[4];
  store(t, element, 0, v);
  return load(t, element, 0);
}

/// Row i of y = v rstd(v) w, rounded to y's dtype: v the row's values as the
/// norm reads them (fp32), summed in column order.
void normaliseRow(const RmsNormShape& s, Dtype wdtype, const std::vector<float>& v, const void* w, void* y, int64_t i) {
  float sum_sq = 0.f;
  for (int64_t j = 0; j < s.cols; ++j) sum_sq += v[size_t(j)] * v[size_t(j)];
  const float r = 1.0f / std::sqrt(sum_sq / float(s.cols) + s.eps);
  for (int64_t j = 0; j < s.cols; ++j) store(s.dtype, y, i * s.stride + j, v[size_t(j)] * r * load(wdtype, w, j));
}

}  // namespace

void rmsnormForwardHost(const RmsNormShape& s, Dtype wdtype, const void* x, const void* w, const void* b, void* y,
                        float* rstd) {
  for (int64_t i = 0; i < s.rows; ++i) {
    float sum_sq = 0.f;
    for (int64_t j = 0; j < s.cols; ++j) {
      const float v = load(s.dtype, x, i * s.stride + j);
      sum_sq += v * v;
    }
    const float r = 1.0f / std::sqrt(sum_sq / float(s.cols) + s.eps);
    rstd[i] = r;
    for (int64_t j = 0; j < s.cols; ++j) {
      const float v = load(s.dtype, x, i * s.stride + j) * r * load(wdtype, w, j);
      store(s.dtype, y, i * s.stride + j, b ? v + load(wdtype, b, j) : v);
    }
  }
}

void rmsnormBackwardHost(const RmsNormShape& s, Dtype wdtype, const void* x, const void* w, const void* dy,
                         const float* rstd, void* dx, void* dw, void* db, bool sum_dw_in_bf16) {
  std::vector<float> dw_acc(size_t(s.cols), 0.f), db_acc(size_t(s.cols), 0.f);
  for (int64_t i = 0; i < s.rows; ++i) {
    const float r = rstd[i];
    float c = 0.f;
    for (int64_t j = 0; j < s.cols; ++j) {
      const int64_t e = i * s.stride + j;
      c += load(wdtype, w, j) * load(s.dtype, dy, e) * (load(s.dtype, x, e) * r);
    }
    c /= float(s.cols);
    for (int64_t j = 0; j < s.cols; ++j) {
      const int64_t e = i * s.stride + j;
      const float xhat = load(s.dtype, x, e) * r, g = load(s.dtype, dy, e);
      store(s.dtype, dx, e, r * (load(wdtype, w, j) * g - xhat * c));
      dw_acc[size_t(j)] += g * xhat;
      db_acc[size_t(j)] += g;
      if (sum_dw_in_bf16) dw_acc[size_t(j)] = roundBf16(dw_acc[size_t(j)]);
    }
  }
  for (int64_t j = 0; j < s.cols; ++j) {
    store(wdtype, dw, j, dw_acc[size_t(j)]);
    if (db) store(wdtype, db, j, db_acc[size_t(j)]);
  }
}

void fusedAddRmsnormForwardHost(const RmsNormShape& s, Dtype rdtype, Dtype wdtype, const void* x, const void* residual,
                                const void* w, void* residual_out, void* y, FusedAddDefect defect) {
  // The defect: a "zero" residual of its own, allocated and never written.
  std::unique_ptr<float[]> uninitialised;
  Dtype read_as = rdtype;
  if (defect == FusedAddDefect::UninitialisedResidual) {
    uninitialised.reset(new float[size_t(s.rows * s.stride)]);
    residual = uninitialised.get();
    read_as = Dtype::F32;
  }
  std::vector<float> v(size_t(s.cols));
  for (int64_t i = 0; i < s.rows; ++i) {
    for (int64_t j = 0; j < s.cols; ++j) {
      const int64_t e = i * s.stride + j;
      const float sum = load(s.dtype, x, e) + load(read_as, residual, e);
      store(rdtype, residual_out, e, sum);
      // The norm reads the stored (rounded) sum; the defect, the fp32 one.
      v[size_t(j)] = defect == FusedAddDefect::NormOfUnroundedSum ? sum : load(rdtype, residual_out, e);
    }
    normaliseRow(s, wdtype, v, w, y, i);
  }
}

void residualAddHost(const RmsNormShape& s, Dtype rdtype, const void* x, const void* residual, void* residual_out) {
  for (int64_t i = 0; i < s.rows; ++i)
    for (int64_t j = 0; j < s.cols; ++j) {
      const int64_t e = i * s.stride + j;
      store(rdtype, residual_out, e, load(s.dtype, x, e) + load(rdtype, residual, e));
    }
}

void rmsnormOfResidualHost(const RmsNormShape& s, Dtype rdtype, Dtype wdtype, const void* residual, const void* w,
                           void* y) {
  std::vector<float> v(size_t(s.cols));
  for (int64_t i = 0; i < s.rows; ++i) {
    for (int64_t j = 0; j < s.cols; ++j) v[size_t(j)] = load(rdtype, residual, i * s.stride + j);
    normaliseRow(s, wdtype, v, w, y, i);
  }
}

void fusedAddRmsnormBackwardHost(const RmsNormShape& s, Dtype rdtype, Dtype wdtype, const void* x, const void* residual,
                                 const void* w, const void* dy, const void* dresidual_out, void* dx, void* dresidual,
                                 void* dw) {
  std::vector<float> dw_acc(size_t(s.cols), 0.f), v(size_t(s.cols));
  for (int64_t i = 0; i < s.rows; ++i) {
    float sum_sq = 0.f;
    for (int64_t j = 0; j < s.cols; ++j) {
      const int64_t e = i * s.stride + j;
      // The stored (rounded) sum, as the forward's residual_out.
      v[size_t(j)] = roundTo(rdtype, load(s.dtype, x, e) + load(rdtype, residual, e));
      sum_sq += v[size_t(j)] * v[size_t(j)];
    }
    const float r = 1.0f / std::sqrt(sum_sq / float(s.cols) + s.eps);
    float c = 0.f;
    for (int64_t j = 0; j < s.cols; ++j)
      c += load(wdtype, w, j) * load(s.dtype, dy, i * s.stride + j) * (v[size_t(j)] * r);
    c /= float(s.cols);
    for (int64_t j = 0; j < s.cols; ++j) {
      const int64_t e = i * s.stride + j;
      const float xhat = v[size_t(j)] * r, d = load(s.dtype, dy, e);
      const float g = r * (load(wdtype, w, j) * d - xhat * c) + load(rdtype, dresidual_out, e);
      store(s.dtype, dx, e, g);
      store(rdtype, dresidual, e, g);
      dw_acc[size_t(j)] += d * xhat;
    }
  }
  for (int64_t j = 0; j < s.cols; ++j) store(wdtype, dw, j, dw_acc[size_t(j)]);
}

namespace {

// A rank's communication buffer: one flag per rank (the epoch its partial
// was staged at), then two staging areas, for even and odd epochs, each the
// rank's partial as compact rows in the activation dtype.
constexpr size_t kFlagsBytes = 64 * sizeof(uint64_t);

size_t elementBytes(Dtype t) { return t == Dtype::F32 ? 4 : 2; }
size_t stagingBytes(const RmsNormShape& s) { return size_t(s.rows * s.cols) * elementBytes(s.dtype); }
uint64_t* flagsOf(void* comm) { return static_cast<uint64_t*>(comm); }
void* stagingOf(void* comm, const RmsNormShape& s, uint64_t epoch) {
  return static_cast<char*>(comm) + kFlagsBytes + (epoch & 1) * stagingBytes(s);
}

}  // namespace

size_t allreduceCommBytesHost(const RmsNormShape& s, int) { return kFlagsBytes + 2 * stagingBytes(s); }

void allreduceRmsnormHost(const RmsNormShape& s, Dtype rdtype, Dtype wdtype, const void* x, const void* residual,
                          const void* w, void* residual_out, void* y, const RankComm& c, AllreduceDefect defect) {
  void* mine = stagingOf(c.buffers[c.rank], s, c.epoch);
  for (int64_t i = 0; i < s.rows; ++i)
    std::memcpy(static_cast<char*>(mine) + size_t(i * s.cols) * elementBytes(s.dtype),
                static_cast<const char*>(x) + size_t(i * s.stride) * elementBytes(s.dtype),
                size_t(s.cols) * elementBytes(s.dtype));
  // Staged: the release orders the copy before the flag a peer acquires.
  for (int p = 0; p < c.ranks; ++p) __atomic_store_n(&flagsOf(c.buffers[p])[c.rank], c.epoch, __ATOMIC_RELEASE);
  for (int p = 0; p < c.ranks; ++p)
    while (__atomic_load_n(&flagsOf(c.buffers[c.rank])[p], __ATOMIC_ACQUIRE) < c.epoch) sched_yield();

  std::vector<const void*> staged(size_t(c.ranks));
  for (int k = 0; k < c.ranks; ++k) {
    // Rank order 0, 1, ..., the same on every rank; the defect starts from this rank's own.
    const int p = defect == AllreduceDefect::RankRelativeOrder ? (c.rank + k) % c.ranks : k;
    staged[size_t(k)] = stagingOf(c.buffers[p], s, c.epoch);
  }
  std::vector<float> v(size_t(s.cols));
  for (int64_t i = 0; i < s.rows; ++i) {
    for (int64_t j = 0; j < s.cols; ++j) {
      float acc = load(s.dtype, staged[0], i * s.cols + j);  // from x_0, not 0: -0 + -0 stays -0
      for (int k = 1; k < c.ranks; ++k) acc += load(s.dtype, staged[size_t(k)], i * s.cols + j);
      // The allreduce's result is stored in T before the residual is added.
      const int64_t e = i * s.stride + j;
      store(rdtype, residual_out, e, roundTo(s.dtype, acc) + load(rdtype, residual, e));
      v[size_t(j)] = load(rdtype, residual_out, e);
    }
    normaliseRow(s, wdtype, v, w, y, i);
  }
}

}  // namespace mylib
