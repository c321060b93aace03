// The plugin: the few lines a library writes to put its kernels under
// ulpcheck (include/ulpcheck/plugin.h). Each variant maps ulpcheck's tensor
// descriptors onto mylib's own API and declares what mylib promises.
#include <ulpcheck/plugin.h>

#include <string>

#include "mylib_rmsnorm.h"

namespace {

thread_local std::string last_error;

mylib::Dtype dtypeOf(ulpcheck_dtype t) {
  return t == ULPCHECK_F32 ? mylib::Dtype::F32 : t == ULPCHECK_F16 ? mylib::Dtype::F16 : mylib::Dtype::BF16;
}

mylib::RmsNormShape shapeOf(const ulpcheck_tensor& x, float eps) {
  return mylib::RmsNormShape{dtypeOf(x.dtype), x.rows, x.cols, x.row_stride, eps};
}

// The host variants declare fp32 weights and a bias (kHostSpec): a case says
// which it is by w's dtype and by b (db) being there or null.
int hostForward(const ulpcheck_rmsnorm_forward_args* a, const ulpcheck_launch*) {
  mylib::rmsnormForwardHost(shapeOf(a->x, a->eps), dtypeOf(a->w.dtype), a->x.data, a->w.data, a->b.data, a->y.data,
                            static_cast<float*>(a->rstd.data));
  return 0;
}

template <bool kBf16Dw>
int hostBackward(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch*) {
  mylib::rmsnormBackwardHost(shapeOf(a->x, a->eps), dtypeOf(a->w.dtype), a->x.data, a->w.data, a->dy.data,
                             static_cast<const float*>(a->rstd.data), a->dx.data, a->dw.data, a->db.data, kBf16Dw);
  return 0;
}

// mylib's fused residual add + RMSNorm, declaring fp32 weights and an fp32
// residual too (kFusedAddSpec): the residual's dtype is residual's tensor dtype.
template <mylib::FusedAddDefect kDefect = mylib::FusedAddDefect::None>
int hostFusedAdd(const ulpcheck_fused_add_rmsnorm_forward_args* a, const ulpcheck_launch*) {
  mylib::fusedAddRmsnormForwardHost(shapeOf(a->x, a->eps), dtypeOf(a->residual.dtype), dtypeOf(a->w.dtype), a->x.data,
                                    a->residual.data, a->w.data, a->residual_out.data, a->y.data, kDefect);
  return 0;
}
// The unfused pipeline mylib's fused add replaces: the add, then the norm.
int hostAddThenRmsnorm(const ulpcheck_fused_add_rmsnorm_forward_args* a, const ulpcheck_launch*) {
  const mylib::RmsNormShape s = shapeOf(a->x, a->eps);
  mylib::residualAddHost(s, dtypeOf(a->residual.dtype), a->x.data, a->residual.data, a->residual_out.data);
  mylib::rmsnormOfResidualHost(s, dtypeOf(a->residual.dtype), dtypeOf(a->w.dtype), a->residual_out.data, a->w.data,
                               a->y.data);
  return 0;
}
int hostFusedAddBackward(const ulpcheck_fused_add_rmsnorm_backward_args* a, const ulpcheck_launch*) {
  mylib::fusedAddRmsnormBackwardHost(shapeOf(a->x, a->eps), dtypeOf(a->residual.dtype), dtypeOf(a->w.dtype), a->x.data,
                                     a->residual.data, a->w.data, a->dy.data, a->dresidual_out.data, a->dx.data,
                                     a->dresidual.data, a->dw.data);
  return 0;
}

// One rank's call of mylib's allreduce + residual + RMSNorm: ulpcheck's
// communication buffers and generation are mylib's RankComm.
mylib::RankComm rankCommOf(const ulpcheck_ranks& r) {
  return mylib::RankComm{r.rank, r.world_size, r.comm, r.generation};
}
template <mylib::AllreduceDefect kDefect = mylib::AllreduceDefect::None>
int hostAllreduce(const ulpcheck_allreduce_rmsnorm_args* a, const ulpcheck_launch*) {
  mylib::allreduceRmsnormHost(shapeOf(a->x, a->eps), dtypeOf(a->residual.dtype), dtypeOf(a->w.dtype), a->x.data,
                              a->residual.data, a->w.data, a->residual_out.data, a->y.data, rankCommOf(a->ranks),
                              kDefect);
  return 0;
}
size_t hostCommBytes(const ulpcheck_shape* s, int32_t ranks, void*) {
  return mylib::allreduceCommBytesHost({dtypeOf(s->dtype), s->rows, s->cols, s->row_stride, s->eps}, ranks);
}

#if defined(MYLIB_HAVE_CUDA)
int cudaStatus(int code) {
  if (code) last_error = mylib::cudaErrorText(code);
  return code;
}
size_t cudaWorkspace(const ulpcheck_shape* s, void*) {
  return mylib::rmsnormBackwardWorkspaceCuda({dtypeOf(s->dtype), s->rows, s->cols, s->row_stride, s->eps});
}
int cudaForward(const ulpcheck_rmsnorm_forward_args* a, const ulpcheck_launch* l) {
  return cudaStatus(mylib::rmsnormForwardCuda(shapeOf(a->x, a->eps), a->x.data, a->w.data, a->y.data,
                                              static_cast<float*>(a->rstd.data), l->stream));
}
template <bool kBf16Partials>
int cudaBackward(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch* l) {
  return cudaStatus(mylib::rmsnormBackwardCuda(shapeOf(a->x, a->eps), a->x.data, a->w.data, a->dy.data,
                                               static_cast<const float*>(a->rstd.data), a->dx.data, a->dw.data,
                                               l->workspace, l->stream, kBf16Partials));
}
template <mylib::AllreduceDefect kDefect = mylib::AllreduceDefect::None>
int cudaAllreduce(const ulpcheck_allreduce_rmsnorm_args* a, const ulpcheck_launch* l) {
  return cudaStatus(mylib::allreduceRmsnormCuda(shapeOf(a->x, a->eps), a->x.data, a->residual.data, a->w.data,
                                                a->residual_out.data, a->y.data, rankCommOf(a->ranks), l->stream,
                                                kDefect));
}
size_t cudaCommBytes(const ulpcheck_shape* s, int32_t ranks, void*) {
  return mylib::allreduceCommBytesCuda({dtypeOf(s->dtype), s->rows, s->cols, s->row_stride, s->eps}, ranks);
}
#endif

constexpr uint32_t kAllDtypes = ULPCHECK_DTYPE_BIT(ULPCHECK_F32) | ULPCHECK_DTYPE_BIT(ULPCHECK_F16) |
                                ULPCHECK_DTYPE_BIT(ULPCHECK_BF16);

// The specs mylib's host RMSNorm implements beyond the plain one, in the
// words of ulpcheck's Python door: weights in fp32 as well as in the
// activation dtype, and cases with a bias as well as without.
constexpr const char* kHostSpec = "fp32_weights=true bias_variants=true";
constexpr const char* kFusedAddSpec = "fp32_weights=true fp32_residual=true";

/// What every mylib variant declares: every dtype, deterministic and batch
/// invariant, fp32 accumulation; depths left 0 (unknown): ulpcheck budgets
/// for the worst any summation order does.
ulpcheck_variant variant(const char* op, const char* name, const char* description, ulpcheck_backend backend) {
  ulpcheck_variant v{};
  v.op = op;
  v.name = name;
  v.description = description;
  v.backend = backend;
  v.dtypes = kAllDtypes;
  v.contracts = ULPCHECK_DETERMINISTIC | ULPCHECK_BATCH_INVARIANT;
  v.accumulation = ULPCHECK_F32;
  return v;
}

/// A variant of mylib's RMSNorm; depths left 0 (unknown): ulpcheck budgets
/// for the worst any summation order does.
ulpcheck_variant rmsnorm(const char* name, const char* description, ulpcheck_backend backend,
                         ulpcheck_rmsnorm_forward_fn forward, ulpcheck_rmsnorm_backward_fn backward,
                         size_t (*workspace)(const ulpcheck_shape*, void*), const char* spec = nullptr) {
  ulpcheck_variant v = variant("rmsnorm", name, description, backend);
  v.workspace_bytes = workspace;
  v.rmsnorm_forward = forward;
  v.rmsnorm_backward = backward;
  v.spec = spec;
  return v;
}

/// A fused add of mylib's; `unfused` (ABI version 4): the pipeline of
/// separate steps it must equal bit for bit on residual_out and y.
ulpcheck_variant fusedAddRmsnorm(const char* name, const char* description,
                                 ulpcheck_fused_add_rmsnorm_forward_fn forward,
                                 ulpcheck_fused_add_rmsnorm_backward_fn backward,
                                 const char* unfused = "mylib_add_then_rmsnorm_host") {
  ulpcheck_variant v = variant("fused_add_rmsnorm", name, description, ULPCHECK_HOST);
  v.spec = kFusedAddSpec;
  v.fused_add_rmsnorm_forward = forward;
  v.fused_add_rmsnorm_backward = backward;  // ABI version 3; NULL: forward only
  v.unfused_pipeline = unfused;
  v.bitwise_with_unfused = "residual_out,y";
  return v;
}

/// mylib's allreduce + residual + RMSNorm (ABI version 5): one rank's call,
/// its ranks meeting in ulpcheck's communication buffers. Its summation
/// order is its own (rank order), not NCCL's: it promises ulpcheck's NCCL
/// pipeline residual_out bit for bit where the spec determines it (the
/// door limits the claim to those rows); its y comes from its own norm.
ulpcheck_variant allreduceRmsnorm(const char* name, const char* description, ulpcheck_backend backend,
                                  ulpcheck_allreduce_rmsnorm_fn run,
                                  size_t (*comm_bytes)(const ulpcheck_shape*, int32_t, void*)) {
  ulpcheck_variant v = variant("allreduce_rmsnorm", name, description, backend);
  v.allreduce_rmsnorm = run;
  v.comm_bytes = comm_bytes;
  if (backend == ULPCHECK_HOST) {
    v.spec = kFusedAddSpec;  // fp32 weights and an fp32 residual, as its fused add
  } else {
    v.unfused_pipeline = "nccl_unfused";
    v.bitwise_with_unfused = "residual_out";
  }
  return v;
}

const ulpcheck_variant kVariants[] = {
    allreduceRmsnorm("mylib_allreduce_rmsnorm_host",
                     "mylib's host allreduce + residual + RMSNorm, one process per rank: staged partials, flags, "
                     "the sum in rank order",
                     ULPCHECK_HOST, hostAllreduce<>, hostCommBytes),
    allreduceRmsnorm("mylib_allreduce_rmsnorm_host_rank_relative_order",
                     "mylib's host allreduce summing from each rank's own partial on (defect)", ULPCHECK_HOST,
                     hostAllreduce<mylib::AllreduceDefect::RankRelativeOrder>, hostCommBytes),
#if defined(MYLIB_HAVE_CUDA)
    allreduceRmsnorm("mylib_allreduce_rmsnorm_twostage",
                     "mylib's CUDA allreduce + residual + RMSNorm, rank r on GPU r: staged partials, then "
                     "reduce-scatter and all-gather blocks in one launch, flags over peer access",
                     ULPCHECK_CUDA, cudaAllreduce<>, cudaCommBytes),
    allreduceRmsnorm("mylib_allreduce_rmsnorm_twostage_early_flag",
                     "mylib's CUDA two-stage allreduce whose 'finished' flag one block raises after its first row "
                     "(defect)",
                     ULPCHECK_CUDA, cudaAllreduce<mylib::AllreduceDefect::EarlyFinishedFlag>, cudaCommBytes),
#endif
    fusedAddRmsnorm("mylib_fused_add_rmsnorm_host",
                    "mylib's host fused residual add + RMSNorm: the norm of the stored residual_out", hostFusedAdd<>,
                    hostFusedAddBackward),
    fusedAddRmsnorm("mylib_add_then_rmsnorm_host",
                    "mylib's residual add and RMSNorm as two steps: the unfused pipeline its fused add replaces",
                    hostAddThenRmsnorm, hostFusedAddBackward, nullptr),
    // Defect classes fused adds have shipped, kept to show what ulpcheck
    // catches (forward only): the norm of the unrounded fp32 sum where the
    // rounded one is promised (aiter PR #2586: y differs from the unfused
    // pipeline's, which fused_vs_unfused sees), and a residual read from
    // memory nobody wrote (vLLM PR #41972's "zero" residual from empty_like).
    fusedAddRmsnorm("mylib_fused_add_rmsnorm_host_unrounded_sum",
                    "mylib's host fused add normalising the unrounded fp32 sum, declaring the rounded one (defect)",
                    hostFusedAdd<mylib::FusedAddDefect::NormOfUnroundedSum>, nullptr),
    fusedAddRmsnorm("mylib_fused_add_rmsnorm_host_uninitialised_residual",
                    "mylib's host fused add reading a residual of its own that nobody wrote (defect)",
                    hostFusedAdd<mylib::FusedAddDefect::UninitialisedResidual>, nullptr),
    rmsnorm("mylib_rmsnorm_host", "mylib's host RMSNorm: fp32 math, serial row sums and dW", ULPCHECK_HOST, hostForward,
            hostBackward<false>, nullptr, kHostSpec),
    // A known defect class, kept to show what ulpcheck catches: the dW
    // accumulator rounded to bf16 after every row (Liger-Kernel PR #950).
    rmsnorm("mylib_rmsnorm_host_bf16_dw", "mylib's host RMSNorm with its dW accumulator rounded to bf16 (defect)",
            ULPCHECK_HOST, hostForward, hostBackward<true>, nullptr, kHostSpec),
#if defined(MYLIB_HAVE_CUDA)
    rmsnorm("mylib_rmsnorm_cuda", "mylib's CUDA RMSNorm: a 256-thread block per row, dW from per-block partials",
            ULPCHECK_CUDA, cudaForward, cudaBackward<false>, cudaWorkspace),
    rmsnorm("mylib_rmsnorm_cuda_bf16_partials",
            "mylib's CUDA RMSNorm with its per-block dW partials summed in bf16 (defect)", ULPCHECK_CUDA, cudaForward,
            cudaBackward<true>, cudaWorkspace),
#endif
};

const char* lastError() { return last_error.c_str(); }

const ulpcheck_plugin kPlugin{ULPCHECK_ABI_VERSION,
                              sizeof(ulpcheck_variant),
                              "mylib 1.0 (ulpcheck example plugin)",
                              int32_t(sizeof kVariants / sizeof kVariants[0]),
                              kVariants,
                              lastError};

}  // namespace

extern "C" ULPCHECK_PLUGIN_EXPORT const ulpcheck_plugin* ulpcheck_plugin_v1(void) { return &kPlugin; }
