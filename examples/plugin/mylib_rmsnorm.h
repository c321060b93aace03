// "mylib": a stand-in for a user's own norm-kernel library (what the example
// plugin puts under ulpcheck). Its API knows nothing of ulpcheck.
//
//   rstd_i = 1 / sqrt(mean_j x_ij^2 + eps),  y = x rstd w (+ b),
//   dx = rstd (w dy - xhat c),  c_i = mean_j(w_j dy_ij xhat_ij),  dw_j = sum_i dy_ij xhat_ij  (db_j = sum_i dy_ij)
#pragma once

#include <cstddef>
#include <cstdint>

namespace mylib {

enum class Dtype { F32, F16, BF16 };

struct RmsNormShape {
  Dtype dtype;
  int64_t rows, cols, stride;  // stride: elements between rows
  float eps;
};

// Host implementation: fp32 math, one pass per row, dW accumulated row by row.
// The weights (w and dw, b and db) are in `wdtype` (fp32 weights beside
// 16-bit activations, as mixed-precision training keeps them); b may be
// null (no bias; db is then not written). sum_dw_in_bf16 reproduces a known
// defect class (Liger-Kernel PR #950): the dW accumulator rounded to bf16
// after every row.
void rmsnormForwardHost(const RmsNormShape& s, Dtype wdtype, const void* x, const void* w, const void* b, void* y,
                        float* rstd);
void rmsnormBackwardHost(const RmsNormShape& s, Dtype wdtype, const void* x, const void* w, const void* dy,
                         const float* rstd, void* dx, void* dw, void* db, bool sum_dw_in_bf16 = false);
// Weights in the activation dtype, no bias.
inline void rmsnormForwardHost(const RmsNormShape& s, const void* x, const void* w, void* y, float* rstd) {
  rmsnormForwardHost(s, s.dtype, x, w, nullptr, y, rstd);
}
inline void rmsnormBackwardHost(const RmsNormShape& s, const void* x, const void* w, const void* dy, const float* rstd,
                                void* dx, void* dw, bool sum_dw_in_bf16 = false) {
  rmsnormBackwardHost(s, s.dtype, x, w, dy, rstd, dx, dw, nullptr, sum_dw_in_bf16);
}

// Fused residual add + RMSNorm (host): residual_out = x + residual, stored in
// `rdtype` (the residual's), y = RMSNorm(residual_out) w; the weights in `wdtype`.
// Two defect classes fused adds have shipped, kept to show what ulpcheck
// catches: the norm taken of the unrounded fp32 sum where the rounded one is
// promised (aiter PR #2586's class), and a residual read from memory nobody
// initialised (vLLM PR #41972's synthetic "zero" residual from empty_like).
enum class FusedAddDefect { None, NormOfUnroundedSum, UninitialisedResidual };
void fusedAddRmsnormForwardHost(const RmsNormShape& s, Dtype rdtype, Dtype wdtype, const void* x, const void* residual,
                                const void* w, void* residual_out, void* y,
                                FusedAddDefect defect = FusedAddDefect::None);
// The same as two separate steps, as a model without the fusion runs them:
// residual_out = x + residual stored in `rdtype`; then y = RMSNorm of that
// stored residual (read in `rdtype`, y in s.dtype). Bit for bit the fused
// forward's residual_out and y.
void residualAddHost(const RmsNormShape& s, Dtype rdtype, const void* x, const void* residual, void* residual_out);
void rmsnormOfResidualHost(const RmsNormShape& s, Dtype rdtype, Dtype wdtype, const void* residual, const void* w,
                           void* y);
// Its backward: the forward's residual_out and rstd again, then
// g = dresidual_out + dnorm(dy) in fp32, stored to dx (x's dtype) and
// dresidual (the residual's); dw_j = sum_i dy_ij xhat_ij.
void fusedAddRmsnormBackwardHost(const RmsNormShape& s, Dtype rdtype, Dtype wdtype, const void* x, const void* residual,
                                 const void* w, const void* dy, const void* dresidual_out, void* dx, void* dresidual,
                                 void* dw);

// Allreduce + residual add + RMSNorm across ranks, a tensor-parallel
// layer's epilogue: one rank's call. Every rank holds its own partial x and
// the same residual and w; each gets residual_out = round(round_T(sum of the
// partials) + residual) and y = RMSNorm(residual_out) w, the same bits on
// every rank. The ranks talk through their communication buffers
// (allreduceCommBytes each; every rank's mapped into every rank's process,
// zero at first, kept from call to call), with flags that reach `epoch` when
// a step is done: epoch grows by one or more every call, the same on every
// rank, so no flag is ever reset. Staging areas alternate with the epoch's
// parity: a rank one call ahead never overwrites what a slower peer still
// reads.
struct RankComm {
  int rank, ranks;
  void* const* buffers;  // [ranks]: every rank's communication buffer
  uint64_t epoch;
};
// Defect classes multi-rank kernels have shipped, kept to show what ulpcheck
// catches: each rank summing the partials from its own onwards (rank r + 1,
// ...), so ranks disagree where fp32 sums are inexact (vLLM #51290's class: a
// reduction order that is not the same everywhere); and the CUDA kernel's
// "rows finished" flag raised by one block once its first row is stored: a
// release that covers that block's stores so far while the flag promises
// every row of the rank (aiter PR #2890's class: a release and an acquire
// that do not pair over the data they guard), so a peer copies rows not
// written yet.
enum class AllreduceDefect { None, RankRelativeOrder, EarlyFinishedFlag };
size_t allreduceCommBytesHost(const RmsNormShape& s, int ranks);
// Host, one-shot: stage the partial, raise the flag in every rank's buffer,
// wait for every rank's, sum the staged partials in rank order (fp32), round,
// add, normalise every row. residual in `rdtype`, weights in `wdtype`.
void allreduceRmsnormHost(const RmsNormShape& s, Dtype rdtype, Dtype wdtype, const void* x, const void* residual,
                          const void* w, void* residual_out, void* y, const RankComm& comm,
                          AllreduceDefect defect = AllreduceDefect::None);
// CUDA, two-stage (rank r on GPU r, peers' buffers loaded and stored over
// peer access): stage the partial; flag "staged"; then one launch whose
// reduce-scatter blocks sum, add and normalise the rows this rank owns (into
// its outputs and its buffer's finished area; the last block done raises
// "finished") while its all-gather blocks wait for every rank's "finished"
// and copy the rows the peers own. Weights and residual in T.
size_t allreduceCommBytesCuda(const RmsNormShape& s, int ranks);
int allreduceRmsnormCuda(const RmsNormShape& s, const void* x, const void* residual, const void* w, void* residual_out,
                         void* y, const RankComm& comm, void* stream, AllreduceDefect defect = AllreduceDefect::None);

// CUDA implementation (when the library is built with CUDA): one 256-thread
// block per row, fp32 block reductions, dW from per-block partials summed by
// a second kernel in block order. Returns a cudaError_t as int.
size_t rmsnormBackwardWorkspaceCuda(const RmsNormShape& s);
int rmsnormForwardCuda(const RmsNormShape& s, const void* x, const void* w, void* y, float* rstd, void* stream);
// sum_partials_in_bf16 reproduces the same defect class on the GPU: the
// per-block dW partials (fp32) summed with a bf16 running total.
int rmsnormBackwardCuda(const RmsNormShape& s, const void* x, const void* w, const void* dy, const float* rstd,
                        void* dx, void* dw, void* workspace, void* stream, bool sum_partials_in_bf16 = false);
const char* cudaErrorText(int code);

}  // namespace mylib
