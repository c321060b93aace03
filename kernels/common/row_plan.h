// The launch plan of the row-wise norm kernels (rmsnorm, layernorm), shared
// by the CUDA kernels and their host ports so both follow the same algorithm:
// which thread owns which columns, in what order each thread accumulates, how
// many CTAs share the column (dW) reduction.
//
// A row is split into `nvec` 128-bit vectors of `vec` elements plus a scalar
// tail of N % vec elements (one per thread). Thread t owns vectors t,
// t + threads, ..., t + (vpt-1)*threads, and tail element t. The CTA size
// depends on N only, never on M: that is what makes every row's result
// independent of the batch it is in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/accuracy.h"
#include "core/dtype.h"
#include "core/hd.h"
#include "kernels/common/row_launch.h"
#include "kernels/registry.h"

namespace ulpcheck::row_plan {

constexpr int kMaxThreads = 512;
constexpr int kWarp = 32;
constexpr int kDwGroups = 8;            // second dW stage: thread rows summing interleaved CTAs
constexpr int kDwColumnsPerBlock = 32;  // second dW stage: columns per CTA

struct RowPlan {
  int vec = 1;       // elements per vector load (16 bytes / element size; 1 if rows are not 16-byte aligned)
  int threads = 32;  // CTA size, a multiple of 32
  int vpt = 1;       // vectors per thread: a power of two
  int64_t nvec = 0;  // full vectors per row
  int tail = 0;      // N - nvec * vec, < vec
  ULPCHECK_HD int warps() const { return threads / kWarp; }
};

/// `max_threads` other than kMaxThreads is only ever a mutant's (cuda_defects.h).
ULPCHECK_HD inline RowPlan planRow(DType t, int64_t N, int64_t ld, bool pointers_aligned,
                                   int max_threads = kMaxThreads) {
  RowPlan p;
  const int bytes = storageBytes(t);
  p.vec = (pointers_aligned && (ld * bytes) % 16 == 0) ? 16 / bytes : 1;
  p.nvec = N / p.vec;
  p.tail = static_cast<int>(N - p.nvec * p.vec);
  const int64_t want = p.nvec > p.tail ? p.nvec : p.tail;  // the tail needs `tail` threads
  const int64_t rounded = (want + kWarp - 1) / kWarp * kWarp;
  p.threads = static_cast<int>(rounded < kWarp ? kWarp : rounded > max_threads ? max_threads : rounded);
  int vpt = 1;
  while (int64_t(vpt) * p.threads < p.nvec) vpt *= 2;
  p.vpt = vpt;
  return p;
}

/// How many elements of a row a CUDA thread may hold in registers (x, dy and
/// w as packed vectors plus fp32 dW accumulators) within the 128 registers a
/// 512-thread CTA allows per thread; a kernel with more per-element state
/// (LayerNorm's backward) holds half.
ULPCHECK_HD constexpr int registerElements(int storage_bytes) { return storage_bytes == 2 ? 32 : 16; }

/// Whether the CUDA kernels keep a thread's columns in registers across the
/// passes over a row (row_cuda.cuh's withVecAndVpt: vpt 1..16 within
/// `max_elements`), or take the workspace path that reloads them (and keeps
/// RMSNorm's dW partials in the workspace).
ULPCHECK_HD inline bool keepsRowInRegisters(const RowPlan& p, int max_elements) {
  return p.vpt <= 16 && p.vpt * p.vec <= max_elements;
}

/// Depth of the row reduction: each thread's serial chain (vpt*vec terms plus
/// its tail element), the 5-level warp butterfly, the serial pass over warps.
ULPCHECK_HD inline int64_t rowDepth(const RowPlan& p) { return int64_t(p.vpt) * p.vec + 1 + 5 + p.warps(); }

/// CTAs of the backward grid: enough to fill the device with this CTA size,
/// never more than there are rows. Each CTA owns rows cta, cta + C, ...
ULPCHECK_HD inline int64_t backwardCtas(const RowPlan& p, int64_t M, int sm_count, int override_ctas) {
  int64_t c = override_ctas > 0 ? override_ctas : int64_t(sm_count) * (1024 / p.threads);
  if (c > M) c = M;
  return c < 1 ? 1 : c;
}

/// How the backward finishes dW from the per-CTA partial sums.
enum class DwStrategy {
  Separate,   // a second kernel sums the partials in a fixed order (kDwGroups interleaved chains)
  LastBlock,  // the last CTA to finish (atomic ticket) sums them serially in CTA order
  Atomic,     // each CTA atomically adds its partial into an fp32 dW: arrival order, nondeterministic
};

/// Depth of the dW column reduction: a CTA's serial chain over its rows, then
/// for Separate each of kDwGroups serial chains over every G-th partial and
/// the serial pass over the G group sums; for LastBlock and Atomic one serial
/// chain over all C partials (in CTA order, or in arrival order).
ULPCHECK_HD inline int64_t dwColDepth(int64_t M, int64_t ctas, DwStrategy strategy) {
  const int64_t per_cta = (M + ctas - 1) / ctas;
  return strategy == DwStrategy::Separate ? per_cta + (ctas + kDwGroups - 1) / kDwGroups + kDwGroups : per_cta + ctas;
}

/// Row stride of the fp32 dW partials: a multiple of 8 so every vector of
/// partials is 16-byte aligned.
ULPCHECK_HD inline int64_t partialLd(int64_t N) { return (N + 7) / 8 * 8; }

/// The plan of a launch depends on whether its pointers are 16-byte aligned;
/// what sizes workspaces and budgets takes the larger of the two possibilities.
inline int64_t maxBackwardCtas(const RowShape& s, const LaunchEnv& env) {
  int64_t ctas = 1;
  for (bool aligned : {false, true}) {
    const int64_t c = backwardCtas(planRow(s.dtype, s.N, s.ld, aligned), s.M, env.sm_count, env.ctas_override);
    ctas = c > ctas ? c : ctas;
  }
  return ctas;
}

/// The reduction depths of a launch whose column sums finish as `strategy`
/// (and whose CTAs have at most `max_threads` threads).
inline ReductionDepths reductionDepths(const RowShape& s, const LaunchEnv& env, DwStrategy strategy,
                                       int max_threads = kMaxThreads) {
  ReductionDepths d;
  d.mean_is_rounded_quotient = true;  // row_cuda/row_host: fdiv(sum, N)
  d.two_pass_statistics = true;
  // LayerNorm's y, variance and backward x-hat from the stored mean and rstd
  // (layernorm_cuda.cuh, layernorm_host.cpp); RMSNorm's oracle reads none of it.
  d.uses_saved_statistics = true;
  for (bool aligned : {false, true}) {
    const RowPlan p = planRow(s.dtype, s.N, s.ld, aligned, max_threads);
    const int64_t ctas = backwardCtas(p, s.M, env.sm_count, env.ctas_override);
    const int64_t col = dwColDepth(s.M, ctas, strategy);
    d.row = rowDepth(p) > d.row ? rowDepth(p) : d.row;
    d.col = col > d.col ? col : d.col;
    // Separate: sumPartialsKernel's kDwGroups chains; LastBlock: one chain in
    // CTA order; Atomic: arrival order, not fixed.
    const ColumnOrder order{ctas, strategy == DwStrategy::Separate ? kDwGroups : 1};
    if (strategy != DwStrategy::Atomic && (d.col_orders.empty() || !(d.col_orders.back() == order)))
      d.col_orders.push_back(order);
  }
  return d;
}

/// The code paths of a family of row-wise kernels, for coverage
/// (KernelInfo::code_paths). The harness passes 16-byte aligned buffers, so
/// a launch takes the vector path exactly when its row stride is a multiple
/// of 16 bytes.
struct RowPathModel {
  bool register_split = false;   // CUDA: a row in registers, or the workspace path (host ports replay one order)
  int bwd_register_divisor = 1;  // the backward holds 1/divisor of registerElements (LayerNorm's: 2)
  bool backward = true;          // a backward grid whose CTAs may own several rows
  int64_t large_m_from = 0;      // a mutant's dispatch path taken from this M on (0: none)
};

inline std::vector<std::string> rowCodePaths(const RowPathModel& m) {
  std::vector<std::string> out{"scalar", "vector", "vector+tail"};
  if (m.register_split) {
    for (const char* p : {"fwd registers", "fwd workspace"}) out.push_back(p);
    if (m.backward)
      for (const char* p : {"bwd registers", "bwd workspace"}) out.push_back(p);
  }
  if (m.backward)
    for (const char* p : {"one row per CTA", "several rows per CTA"}) out.push_back(p);
  if (m.large_m_from) out.push_back("M >= " + std::to_string(m.large_m_from) + " dispatch");
  return out;
}

inline std::vector<std::string> rowPathsTaken(const RowPathModel& m, const RowShape& s, const LaunchEnv& env) {
  const RowPlan p = planRow(s.dtype, s.N, s.ld, true);
  std::vector<std::string> out{p.vec == 1 ? "scalar" : p.tail ? "vector+tail" : "vector"};
  const int elements = registerElements(storageBytes(s.dtype));
  if (m.register_split) {
    out.push_back(keepsRowInRegisters(p, elements) ? "fwd registers" : "fwd workspace");
    if (m.backward)
      out.push_back(keepsRowInRegisters(p, elements / m.bwd_register_divisor) ? "bwd registers" : "bwd workspace");
  }
  if (m.backward)
    out.push_back(backwardCtas(p, s.M, env.sm_count, env.ctas_override) < s.M ? "several rows per CTA"
                                                                              : "one row per CTA");
  if (m.large_m_from && s.M >= m.large_m_from) out.push_back("M >= " + std::to_string(m.large_m_from) + " dispatch");
  return out;
}

/// `info` declaring the code paths of `model`.
inline KernelInfo withRowPaths(KernelInfo info, const RowPathModel& model) {
  info.code_paths = rowCodePaths(model);
  info.paths_taken = [model](const RowShape& s, const LaunchEnv& e) { return rowPathsTaken(model, s, e); };
  return info;
}

}  // namespace ulpcheck::row_plan
