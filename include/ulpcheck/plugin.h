/* ulpcheck plugin ABI, version 7: how a shared library puts its own norm
 * kernels under ulpcheck's properties without editing ulpcheck.
 *
 * A plugin is a shared library that exports one C function,
 *
 *     const ulpcheck_plugin* ulpcheck_plugin_v1(void);
 *
 * returning a table of variants (one per kernel configuration the library
 * wants verified), each naming its op, its backend, the dtypes and tensors it
 * supports, its contracts (deterministic? batch invariant? accumulation
 * precision, reduction depths if known), its preconditions, and entry points
 * that take tensor descriptors, a stream and a workspace. ulpcheck generates
 * the inputs, calls the entry points, and judges every output element.
 *
 *     ulpcheck list --plugin ./libmylib_ulpcheck.so
 *     ulpcheck run  --plugin ./libmylib_ulpcheck.so --kernel mylib_rmsnorm
 *
 * This header is C99 and depends on nothing but <stddef.h> and <stdint.h>:
 * no C++, RapidCheck or JSON types cross it. ABI rules: fields are only ever
 * appended; a plugin states the version it was built against and the size of
 * its variant struct, and ulpcheck refuses one it cannot read. A plugin built
 * against version 1 (no `spec`, no bias tensors) loads and runs unchanged:
 * ulpcheck reads its table with version 1's variant size and hands it the
 * plain spec only.
 *
 * Version 2 appends the spec a variant implements (ulpcheck_variant::spec):
 * the same options, in the same words, as a Python variant declares
 * (python/ulpcheck), e.g. "fp32_weights=true bias_variants=true". ulpcheck
 * then generates cases of each declared spec and tells the variant which one
 * a call is by its tensors: w's dtype (and dw's, the bias's) is the weights'
 * dtype, rstd's (and mean's) the saved statistics', and a tensor the case
 * lacks (a bias, LayerNorm's beta) has data NULL.
 *
 * Version 3 appends fused add + RMSNorm's backward
 * (ulpcheck_variant::fused_add_rmsnorm_backward); a version 2 plugin's
 * fused add variants are forward only.
 *
 * Version 4 appends a fused variant's unfused pipeline and the outputs it
 * equals bit for bit (ulpcheck_variant::unfused_pipeline,
 * bitwise_with_unfused), for the fused_vs_unfused property.
 *
 * Version 5 appends allreduce + residual add + RMSNorm across ranks (op
 * "allreduce_rmsnorm": ulpcheck_variant::allreduce_rmsnorm, comm_bytes,
 * rank_counts): the multi-rank door. Each rank runs in a worker process of
 * its own, as in a tensor-parallel job (CUDA: rank r on GPU r; the host:
 * one process per rank), and ulpcheck calls every rank at once. What the
 * ranks communicate through is ulpcheck's: each rank gets a communication
 * buffer of comm_bytes(shape, world_size) bytes, allocated by ulpcheck on
 * its device (host: shared memory), and every rank sees every rank's
 * buffer mapped into its own process (ulpcheck_ranks::comm; on the GPU
 * through CUDA IPC with peer access enabled, so a kernel on GPU r loads and
 * stores GPU s's buffer directly over NVLink or PCIe). A buffer is zero
 * when first allocated and then kept from call to call (ulpcheck never
 * writes it again: flags and staged data survive), so a flag protocol needs
 * no reset: ulpcheck_ranks::generation is the call's epoch, the same on
 * every rank and strictly increasing over every call of a run (wait for a
 * peer's flag to reach it). Pointers are valid for the call only. A rank
 * that fails, faults or does not return fails the case on every rank, and
 * every rank's process is restarted (the buffers are kept).
 *
 * Version 6 appends RMSNorm with its output quantized to FP8 (op
 * "rmsnorm_quant": ulpcheck_variant::rmsnorm_quant) and the FP8 dtypes of
 * its output tensor (ULPCHECK_E4M3, ULPCHECK_E5M2: output dtypes only, a
 * byte an element, never a variant's activation dtype).
 *
 * Version 7 appends fused residual add + RMSNorm with its output quantized
 * to FP8 (op "fused_add_rmsnorm_quant": ulpcheck_variant::
 * fused_add_rmsnorm_quant; FlashInfer's fused_add_rmsnorm_quant, vLLM's
 * fused_add_rms_norm_static_fp8_quant).
 *
 * The specs (what the outputs must equal, up to a rounding-error budget):
 *   RMSNorm   rstd_i = 1 / sqrt(mean_j x_ij^2 + eps)      (fp32, rows x 1)
 *             y_ij   = x_ij rstd_i w_j
 *             dx_ij  = rstd_i (w_j dy_ij - xhat_ij c_i),  xhat = x rstd,  c_i = mean_j(w_j dy_ij xhat_ij)
 *             dw_j   = sum_i dy_ij xhat_ij
 *   LayerNorm mean_i = mean_j x_ij,  rstd_i = 1 / sqrt(var_i + eps)   (both fp32, rows x 1; biased variance)
 *             y_ij   = (x_ij - mean_i) rstd_i gamma_j + beta_j
 *             dx_ij  = rstd_i (a_ij - mean_j a_ij - xhat_ij mean_j(a_ij xhat_ij)),  a = gamma dy
 *             dgamma_j = sum_i dy_ij xhat_ij,  dbeta_j = sum_i dy_ij
 * Every tensor of a case has the activation dtype except the saved
 * statistics (fp32). The backward receives the statistics the variant's own
 * forward saved.
 */
#ifndef ULPCHECK_PLUGIN_H
#define ULPCHECK_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ULPCHECK_ABI_VERSION 7u

/* (Version 6: ULPCHECK_E4M3 (float8_e4m3fn: max 448, NaN, no Inf) and
 * ULPCHECK_E5M2 (float8_e5m2), the quantized ops' y only.) */
typedef enum {
  ULPCHECK_F32 = 0,
  ULPCHECK_F16 = 1,
  ULPCHECK_BF16 = 2,
  ULPCHECK_E4M3 = 3,
  ULPCHECK_E5M2 = 4
} ulpcheck_dtype;
#define ULPCHECK_DTYPE_BIT(t) (1u << (unsigned)(t))

typedef enum { ULPCHECK_HOST = 0, ULPCHECK_CUDA = 1 } ulpcheck_backend;

/* A row-major matrix (a vector is 1 x cols). data is a host pointer for
 * ULPCHECK_HOST variants and a device pointer for ULPCHECK_CUDA ones. */
typedef struct {
  void* data;
  ulpcheck_dtype dtype;
  int64_t rows, cols;
  int64_t row_stride; /* elements from one row to the next, >= cols */
} ulpcheck_tensor;

/* Where and with what a call runs. */
typedef struct {
  void* stream;    /* cudaStream_t for CUDA variants (may be the default stream); NULL on the host */
  int device;      /* the CUDA device of every pointer; -1 on the host */
  void* workspace; /* workspace_bytes(shape) bytes (NULL if 0); contents undefined on entry */
  size_t workspace_bytes;
  int sm_count;    /* the device's multiprocessors (the host: 0) */
  void* user_data; /* the variant's own user_data */
} ulpcheck_launch;

/* The shape of a call: M rows of N elements, row stride ld (elements). */
typedef struct {
  ulpcheck_dtype dtype;
  int64_t rows, cols, row_stride;
  float eps;
} ulpcheck_shape;

typedef struct {
  ulpcheck_tensor x, w;    /* inputs: M x N; 1 x N */
  ulpcheck_tensor y, rstd; /* outputs: M x N; M x 1 fp32 */
  float eps;
  /* Version 2: y_ij += b_j where the case has a bias (bias_variants);
   * b.data is NULL otherwise. 1 x N in w's dtype. */
  ulpcheck_tensor b;
} ulpcheck_rmsnorm_forward_args;

typedef struct {
  ulpcheck_tensor x, w, dy, rstd; /* inputs; rstd as the forward saved it */
  ulpcheck_tensor dx, dw;         /* outputs: M x N; 1 x N */
  float eps;
  /* Version 2: db_j = sum_i dy_ij where the case has a bias; db.data is
   * NULL otherwise. 1 x N in w's dtype. */
  ulpcheck_tensor db;
} ulpcheck_rmsnorm_backward_args;

typedef struct {
  ulpcheck_tensor x, gamma, beta; /* inputs */
  ulpcheck_tensor y, mean, rstd;  /* outputs; mean and rstd M x 1 fp32 */
  float eps;
} ulpcheck_layernorm_forward_args;

typedef struct {
  ulpcheck_tensor x, gamma, dy, mean, rstd; /* inputs; statistics as the forward saved them */
  ulpcheck_tensor dx, dgamma, dbeta;        /* outputs */
  float eps;
} ulpcheck_layernorm_backward_args;

/* Version 2: fused residual add + RMSNorm (op "fused_add_rmsnorm"):
 *   residual_out = x + residual, rounded to the residual's dtype (the
 *   activation dtype, or fp32 where the variant declares fp32_residual)
 *   y = x-hat (offset + w) of residual_out, or with sum=fp32 of the fp32 sum
 *       before its rounding (FlashInfer's, quack's) */
typedef struct {
  ulpcheck_tensor x, residual, w;  /* inputs: M x N; M x N in the residual's dtype; 1 x N */
  ulpcheck_tensor residual_out, y; /* outputs: M x N in the residual's dtype; M x N */
  float eps;
} ulpcheck_fused_add_rmsnorm_forward_args;

/* Entry points return 0 on success; anything else is a failing case, with
 * the plugin's last_error() message. A CUDA entry point only enqueues work
 * on the stream; ulpcheck synchronises and checks for errors. */
typedef int (*ulpcheck_rmsnorm_forward_fn)(const ulpcheck_rmsnorm_forward_args*, const ulpcheck_launch*);
typedef int (*ulpcheck_rmsnorm_backward_fn)(const ulpcheck_rmsnorm_backward_args*, const ulpcheck_launch*);
typedef int (*ulpcheck_layernorm_forward_fn)(const ulpcheck_layernorm_forward_args*, const ulpcheck_launch*);
typedef int (*ulpcheck_layernorm_backward_fn)(const ulpcheck_layernorm_backward_args*, const ulpcheck_launch*);
typedef int (*ulpcheck_fused_add_rmsnorm_forward_fn)(const ulpcheck_fused_add_rmsnorm_forward_args*,
                                                     const ulpcheck_launch*);

/* Version 3: fused add + RMSNorm's backward, given y's gradient dy and the
 * gradient reaching residual_out along the residual stream, dresidual_out:
 *   g         = dresidual_out + dnorm(dy), one fp32 sum (dnorm: RMSNorm's dx
 *               at residual_out, with the rstd of what the forward normalised)
 *   dx        = g in the activation dtype, dresidual = g in the residual's
 *   dw_j      = sum_i dy_ij xhat_ij
 * It gets the forward's inputs, not its outputs: it recomputes what it saves. */
typedef struct {
  ulpcheck_tensor x, residual, w, dy, dresidual_out; /* inputs; residual, dresidual_out in the residual's dtype */
  ulpcheck_tensor dx, dresidual, dw;                 /* outputs: M x N; M x N in the residual's dtype; 1 x N */
  float eps;
} ulpcheck_fused_add_rmsnorm_backward_args;
typedef int (*ulpcheck_fused_add_rmsnorm_backward_fn)(const ulpcheck_fused_add_rmsnorm_backward_args*,
                                                      const ulpcheck_launch*);

/* Version 5: allreduce + residual add + RMSNorm, one rank's call (op
 * "allreduce_rmsnorm"). Every rank r holds its own partial x_r and the same
 * residual and w; every rank must store the same bits:
 *   s            = sum_r x_r, rounded to the activation dtype T (the
 *                  allreduce's result: any summation order of the fp32
 *                  sum is within the budget, NCCL's included)
 *   residual_out = s + residual, rounded to the residual's dtype (T, or fp32
 *                  where the variant declares fp32_residual)
 *   y            = RMSNorm forward of residual_out, weight offset applied */
#define ULPCHECK_MAX_RANKS 8
typedef struct {
  int32_t rank, world_size;
  uint64_t generation;            /* the call's epoch: same on every rank, increasing */
  void* comm[ULPCHECK_MAX_RANKS]; /* every rank's communication buffer, mapped here; [rank] is this rank's */
  size_t comm_bytes;              /* the size of each (0: the variant asked for none; comm[] NULL) */
} ulpcheck_ranks;

typedef struct {
  ulpcheck_tensor x, residual, w;  /* this rank's inputs: M x N; M x N in the residual's dtype; 1 x N */
  ulpcheck_tensor residual_out, y; /* this rank's outputs: M x N in the residual's dtype; M x N */
  float eps;
  ulpcheck_ranks ranks;
} ulpcheck_allreduce_rmsnorm_args;
typedef int (*ulpcheck_allreduce_rmsnorm_fn)(const ulpcheck_allreduce_rmsnorm_args*, const ulpcheck_launch*);

/* Version 6: RMSNorm with its output quantized to FP8 (op "rmsnorm_quant"),
 * forward only. With the spec the variant declares (its options below):
 *   y    = x rstd (offset + w)                      in fp32
 *   v    = y, or y rounded to x's dtype             scaled=activation
 *   s    = static_scale's value                     quant=static (the default)
 *        = max(fl(amax / fmax), fl(1 / (512 fmax))) quant=token: amax the row's
 *                                                   largest |v|, fmax 448 (E4M3)
 *                                                   or 57344 (E5M2); stored to
 *                                                   scale, one per row
 *        = the same per group of 128 (64) columns   quant=group128 (group64); the
 *                                                   last group shorter where it
 *                                                   does not divide N
 *   y_q  = fp8(fl(v * fl(1/s)))                     inverse=exact (the default);
 *          an approximate 1/s (inverse=approx, rcp.approx) or fl(v / s)
 *          (inverse=divide); rounded to nearest even, then past the largest
 *          finite value that value (overflow=satfinite, the default: cvt
 *          .satfinite) or NaN / +-Inf (overflow=nonfinite)
 * y_q's dtype is ULPCHECK_E4M3 (fp8=e4m3, the default) or ULPCHECK_E5M2. */
typedef struct {
  ulpcheck_tensor x, w;         /* inputs: M x N; 1 x N in the weights' dtype */
  ulpcheck_tensor static_scale; /* input: 1 x 1 fp32 under quant=static; data NULL under quant=token */
  ulpcheck_tensor y;            /* output: M x N in the fp8 dtype, row stride x's */
  ulpcheck_tensor scale;        /* output: M x groups fp32 under quant=token (1 group) or group128 / group64
                                   (ceil(N / 128), ceil(N / 64)); data NULL under quant=static */
  float eps;
} ulpcheck_rmsnorm_quant_args;
typedef int (*ulpcheck_rmsnorm_quant_fn)(const ulpcheck_rmsnorm_quant_args*, const ulpcheck_launch*);

/* Version 7: fused residual add + RMSNorm quantized to FP8 (op
 * "fused_add_rmsnorm_quant"), forward only:
 *   residual_out = x + residual, in fp32, rounded to the residual's dtype
 *                  (fused_add_rmsnorm's; x's dtype, or fp32 where the
 *                  variant declares fp32_residual=true)
 *   y            = the RMSNorm of residual_out (sum=rounded, the default)
 *                  or of the fp32 sum (sum=fp32: FlashInfer's), in fp32
 *   y_q, scale   = rmsnorm_quant's chain on y (the same options)
 * x is not written. */
typedef struct {
  ulpcheck_tensor x, residual, w; /* inputs: M x N; M x N in the residual's dtype; 1 x N in the weights' dtype */
  ulpcheck_tensor static_scale;   /* input: 1 x 1 fp32 under quant=static; data NULL otherwise */
  ulpcheck_tensor residual_out;   /* output: M x N in the residual's dtype */
  ulpcheck_tensor y;              /* output: M x N in the fp8 dtype, row stride x's */
  ulpcheck_tensor scale;          /* output: M x groups fp32 under quant=token or group...; data NULL under static */
  float eps;
} ulpcheck_fused_add_rmsnorm_quant_args;
typedef int (*ulpcheck_fused_add_rmsnorm_quant_fn)(const ulpcheck_fused_add_rmsnorm_quant_args*,
                                                   const ulpcheck_launch*);

/* Contracts: what the properties hold the variant to. */
#define ULPCHECK_DETERMINISTIC (1u << 0)                 /* repeated runs give identical bits */
#define ULPCHECK_BATCH_INVARIANT (1u << 1)               /* a row's outputs do not depend on M or where the row sits */
#define ULPCHECK_COLUMN_SUM_FLUSHES_SUBNORMALS (1u << 2) /* e.g. dW by fp32 atomicAdd (PTX red.add.f32) */
/* The next three are LayerNorm's: a variant of an op without a mean (the
 * RMSNorms, fused or not) that declares one is refused when it loads. */
/* LayerNorm: the mean first, then the sum of (x - mean)^2 with that one mean
 * subtracted from every x. Without it the budget allows running means
 * (Welford, Chan's merges), whose variance may err far more. */
#define ULPCHECK_TWO_PASS_STATISTICS (1u << 3)
/* LayerNorm: the mean is a plain fp32 sum of the row's values, in any order,
 * divided by N (within 2 ulp) or multiplied by fl(1/N); not a sum of x / N,
 * not a running mean. A row whose sum is exact then has a mean within
 * 4 u |mean|: constant rows and 16-bit rows of large mean are judged with power. */
#define ULPCHECK_MEAN_OF_PLAIN_SUM (1u << 4)
/* LayerNorm: y = (x - mean) rstd gamma + beta is formed from the very mean and
 * rstd the forward stores (x - mean and each product rounded once in fp32), a
 * two-pass variance from that stored mean, and the backward rebuilds x-hat as
 * (x - mean) rstd from the statistics it is given. y, rstd and dx are then
 * also judged about what the stored statistics give: rows of large mean and
 * near-constant rows are judged with power. Not for a kernel that folds the
 * mean into a bias (x * (rstd gamma) + (beta - mean rstd gamma)). */
#define ULPCHECK_USES_SAVED_STATISTICS (1u << 5)

/* Preconditions: cases that break them are not generated. */
#define ULPCHECK_NEEDS_CONTIGUOUS_ROWS (1u << 0) /* row_stride == cols */
#define ULPCHECK_NEEDS_ALIGNED_ROWS (1u << 1)    /* every row starts 16-byte aligned */

typedef struct {
  /* Identity. name must be unique among every variant ulpcheck knows. */
  const char* op; /* "rmsnorm", "layernorm", (version 2) "fused_add_rmsnorm", (version 5) "allreduce_rmsnorm",
                     (version 6) "rmsnorm_quant", (version 7) "fused_add_rmsnorm_quant" */
  const char* name;
  const char* description;
  ulpcheck_backend backend;

  /* Supported activation dtypes (ULPCHECK_DTYPE_BIT of each). */
  uint32_t dtypes;
  uint32_t contracts;
  ulpcheck_dtype accumulation; /* the precision its sums accumulate in (the budget's unit roundoff) */
  /* The longest chain of additions from a term to the result of a row sum
   * (over N) and of a column sum (over M), if the library knows them for
   * every shape; 0: unknown, and ulpcheck assumes the worst any summation
   * order can do (N and M). */
  int64_t row_depth, col_depth;

  uint32_t preconditions;
  int64_t max_cols; /* 0: no limit */

  /* Workspace the backward needs for a shape (NULL: none). */
  size_t (*workspace_bytes)(const ulpcheck_shape* shape, void* user_data);

  /* The op's entry points; the ones of other ops stay NULL. Both forward
   * and backward are required in ABI version 1. */
  ulpcheck_rmsnorm_forward_fn rmsnorm_forward;
  ulpcheck_rmsnorm_backward_fn rmsnorm_backward;
  ulpcheck_layernorm_forward_fn layernorm_forward;
  ulpcheck_layernorm_backward_fn layernorm_backward;

  void* user_data; /* handed back in ulpcheck_launch */

  /* ---- ABI version 2 ---- */
  /* The specs the variant implements beyond the plain one, as the Python
   * door's options (python/ulpcheck/ops/<op>.py), space-separated
   * option=value items; NULL or "": the plain spec only. RMSNorm and
   * LayerNorm take
   *   fp32_weights=true      weights (w, dw; gamma, beta and theirs) in fp32 as well
   *                          as in the activation dtype
   *   rounding=llama         x rstd rounded to x's dtype before the weight (HF Llama)
   *   weight_offset=1.0      y = xhat (offset + w) (Gemma: 1)
   *   stats=activation       rstd (and mean) saved rounded to the activation dtype,
   *                          not fp32 (still written to, and read from, the fp32
   *                          rstd and mean arrays: their values are then values
   *                          of the activation dtype)
   * and RMSNorm bias_variants=true (cases with a bias as well as without),
   * LayerNorm affine_variants=true (cases without beta, and without either);
   * fused_add_rmsnorm takes fp32_weights, weight_offset,
   * fp32_residual=true (an fp32 residual and residual_out as well) and
   * sum=fp32 (its norm reads the fp32 sum); allreduce_rmsnorm takes
   * fp32_weights, weight_offset, fp32_residual and allreduce_acc=activation
   * (the ranks' partials added in the activation dtype one rank at a time,
   * in rank order, each add rounded, rather than summed in fp32 and rounded
   * once: FlashInfer's fp32_acc=False); rmsnorm_quant (version 6) takes
   * fp32_weights, weight_offset and the one value it implements of each of
   * quant=static|token|group128|group64, fp8=e4m3|e5m2, overflow=satfinite|nonfinite,
   * scaled=fp32|activation and inverse=exact|approx|divide;
   * fused_add_rmsnorm_quant (version 7) takes fused_add_rmsnorm's and
   * rmsnorm_quant's.
   * A value ulpcheck cannot read, or an option the op does not have, refuses
   * the plugin saying which. */
  const char* spec;
  /* fused_add_rmsnorm's forward entry point. */
  ulpcheck_fused_add_rmsnorm_forward_fn fused_add_rmsnorm_forward;

  /* ---- ABI version 3 ---- */
  /* fused_add_rmsnorm's backward (NULL: the variant is forward only; its
   * workspace, if any, is workspace_bytes'). */
  ulpcheck_fused_add_rmsnorm_backward_fn fused_add_rmsnorm_backward;

  /* ---- ABI version 4 ---- */
  /* A fused variant's unfused pipeline: the name of another variant of the
   * same op (in this plugin, or ulpcheck's own) that computes the same spec
   * as separate steps, as a library without the fusion runs them; and the
   * outputs this one promises to equal it on, bit for bit, comma-separated
   * ("residual_out,y"). The fused_vs_unfused property runs both on every
   * case and compares those outputs: what a fusion that skips a rounding
   * the separate steps make breaks (aiter PR #2586), however small the
   * difference. NULL: not a fused variant (bitwise_with_unfused is then
   * ignored); with a pipeline, at least one output is required. */
  const char* unfused_pipeline;
  const char* bitwise_with_unfused;

  /* ---- ABI version 5 ---- */
  /* allreduce_rmsnorm's entry point: one rank's call (its launch's device is
   * the rank's own GPU; workspace_bytes, if any, is per rank and per call). */
  ulpcheck_allreduce_rmsnorm_fn allreduce_rmsnorm;
  /* The communication buffer each rank needs for a shape and world size
   * (NULL: none); ulpcheck grows it, zeroed, where a case needs more. */
  size_t (*comm_bytes)(const ulpcheck_shape* shape, int32_t world_size, void* user_data);
  /* The world sizes it runs at, bit r for r ranks (1u << 2 | 1u << 4: 2 and
   * 4); 0: any of 1 to ULPCHECK_MAX_RANKS. A CUDA variant runs one rank per
   * GPU, so at most as many ranks as the machine has GPUs. */
  uint32_t rank_counts;

  /* ---- ABI version 6 ---- */
  /* rmsnorm_quant's entry point. */
  ulpcheck_rmsnorm_quant_fn rmsnorm_quant;

  /* ---- ABI version 7 ---- */
  /* fused_add_rmsnorm_quant's entry point. */
  ulpcheck_fused_add_rmsnorm_quant_fn fused_add_rmsnorm_quant;
} ulpcheck_variant;

typedef struct {
  uint32_t abi_version;  /* ULPCHECK_ABI_VERSION */
  uint32_t variant_size; /* sizeof(ulpcheck_variant) */
  const char* name;      /* the library and its version, e.g. "mylib 1.4.2" */
  int32_t num_variants;
  const ulpcheck_variant* variants;
  /* The message of the last failing entry point call on this thread (may be NULL). */
  const char* (*last_error)(void);
} ulpcheck_plugin;

/* The symbol ulpcheck looks up. */
typedef const ulpcheck_plugin* (*ulpcheck_plugin_entry_fn)(void);
#define ULPCHECK_PLUGIN_ENTRY "ulpcheck_plugin_v1"

/* Gives the entry point default visibility (exported even where a library
 * builds with -fvisibility=hidden). It does not give it C linkage: in C++,
 * declare it extern "C" as well, or its symbol is C++-mangled
 * (_Z18ulpcheck_plugin_v1v) and ulpcheck, which looks up ulpcheck_plugin_v1,
 * refuses the plugin saying so:
 *
 *     extern "C" ULPCHECK_PLUGIN_EXPORT const ulpcheck_plugin* ulpcheck_plugin_v1(void) { return &table; }
 */
#if defined(_WIN32)
#define ULPCHECK_PLUGIN_EXPORT __declspec(dllexport)
#else
#define ULPCHECK_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
}
#endif

#endif /* ULPCHECK_PLUGIN_H */
