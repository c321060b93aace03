// The defects CUDA mutants (kernels/<op>/cuda_bug_*.cu) switch on in the
// production kernels, each reproducing a documented real bug. Two kinds:
//
//   KernelDefect  compiled into the kernel (a template argument), so the
//                 correct variants, which instantiate kNone, carry no trace
//                 of the defect, not even a branch;
//   LaunchDefects decisions of the host-side launch code (plan, workspace
//                 sizing, error checks), read at run time.
//
// The host ports have their own Defects (rmsnorm_host.h, ...): the host
// mutants reproduce the classes that exist without a GPU.
#pragma once

namespace ulpcheck::cuda_defects {

/// Bits of the kernels' `unsigned D` template argument.
enum KernelDefect : unsigned {
  kNone = 0,
  // The block reduction uses one shared slot for consecutive reductions with
  // no barrier between one reduction's reads and the next one's writes (the
  // correct kernel alternates two slots, which makes that barrier
  // unnecessary): a warp that finishes early overwrites its slot while
  // slower warps still sum it. A shared-memory race.
  kReductionSlotReusedWithoutBarrier = 1u << 0,
  // The last-CTA dW reduction takes its atomic ticket without the
  // __threadfence that publishes the CTA's partials first (quack PR #109's
  // pattern without its fence): the last CTA may sum stale partials.
  kNoFenceBeforeTicket = 1u << 1,
  // RMSNorm forward rounds each x^2 to fp16 before accumulating it
  // (PyTorch #133085): overflow past |x| = 256, and 11-bit terms.
  kXSquaredInFp16 = 1u << 2,
  // RMSNorm forward saves rstd rounded to bf16 and normalises with it
  // (Helion PR #2273).
  kRstdInBf16 = 1u << 3,
  // LayerNorm forward loads the row tail as one masked vector and counts the
  // masked lanes (zeros) in the variance (Liger #518; quack 9310d47 showed it
  // only with x ~ 1000, where each lane adds mean^2).
  kVarianceCountsMaskedLanes = 1u << 4,
  // Fused allreduce adds the residual to the fp32 rank sum, skipping the
  // round trip through the activation dtype the unfused pipeline makes
  // (aiter PR #2586).
  kNoRoundTripBeforeResidual = 1u << 5,
  // The atomic dW epilogue of the workspace path (rows too wide for
  // registers) adds the CTA's partial columns strided by thread, so a thread
  // adds columns another warp accumulated, with no barrier after that warp's
  // last stores: it may add a partial still missing the CTA's last row. This
  // was ulpcheck's own cuda_atomic, found by a default campaign on the H100
  // (M=7 N=8644 fp32, 3 CTAs: dW 1e5x over budget in 1 run of 3).
  kAtomicEpilogueReadsPeersPartials = 1u << 6,
  // LayerNorm forward takes the variance in one pass as E[x^2] - E[x]^2 in
  // fp32: two numbers of size mean^2 subtracted, so every digit is lost once
  // |mean| / std nears 2^12 (PyTorch #51102 at mean 2000; TVM PR #19643;
  // onnxruntime #28463). The two-pass variance loses only second-order terms.
  kOnePassVariance = 1u << 7,
  // The last-CTA dW reduction of grids of more than 1024 CTAs leaves the
  // last CTA's partial out (an off-by-one in the loop bound of the path for
  // large grids): a missing partial among thousands, which a budget of
  // depth * u * sum|terms| at that depth (~9% of |dW|) does not see.
  kLastBlockDropsPartialOnLargeGrid = 1u << 8,
  // RMSNorm under rounding=llama multiplies the weight by x-hat as computed
  // in fp32, not rounded to the activation dtype first (vLLM PR #42379: its
  // kernel multiplied in fp32 where its spec rounds first).
  kLlamaXhatUnrounded = 1u << 9,
  // RMSNorm forms offset + w in the activation dtype, not in fp32 (the
  // Gemma weight bug shown on vLLM PR #29810: bf16 1 + 15.8125 = 16.75).
  kOffsetInActivationDtype = 1u << 10,
  // RMSNorm forward converts y from fp32 to a 16-bit T by truncation (round
  // toward zero), not to nearest: CK's default fp32 -> bf16 conversion,
  // which biased every output of aiter's kernels (aiter #5151).
  kYStoredTruncated = 1u << 11,
  // The FP8-quantizing RMSNorm gathers a per-token or per-group |y| max
  // across warps in shared memory and reads it with no barrier after the
  // warps' updates (vLLM PR #54111: a shared-memory race in the group-64
  // scale's max reduction): a warp that gets there first reads a partial
  // max, a smaller scale, so its elements and the stored scale depend on
  // the warps' timing.
  kGroupMaxReadWithoutBarrier = 1u << 12,
  // The FP8-quantizing RMSNorm skips one element's store (the last of the
  // last row): it keeps what the buffer held.
  kFp8StoreSkipped = 1u << 13,
};

/// Host-side launch defects; all false is the correct launch code.
struct LaunchDefects {
  // Rows addressed as if contiguous: stride N instead of ld (quack #88).
  bool ignore_row_stride = false;
  // Forward CTA size picked from the batch: at most 256 threads once
  // M >= 256 (vLLM's "max_block_size = num_tokens < 256 ? 1024 : 256",
  // vLLM #48271): a row's reduction order depends on the batch it is in.
  bool threads_from_m = false;
  // The dW partials scratch sized with N where the CTA count (set by M)
  // belongs (PyTorch PR #192016): out-of-bounds writes once M > N.
  bool scratch_sized_by_n = false;
  // Backward CTA size not capped at the kernel's launch bound, and no launch
  // checked (Paddle PR #74055): wide rows fail to launch, dx is never written.
  bool unchecked_launch = false;
  // dW partials summed in bf16 on the dispatch path taken only for
  // M >= 32768 (Liger PR #950).
  bool dw_bf16_at_large_m = false;
  // dgamma and dbeta written to each other's outputs once M >= 256
  // (torch-xpu-ops PR #4790: one shape regime's kernel swapped them).
  bool swap_dgamma_dbeta_at_large_m = false;
};

/// LaunchDefects with one defect on: `only(&LaunchDefects::ignore_row_stride)`
/// (the CUDA sources are C++17: no designated initialisers).
inline LaunchDefects only(bool LaunchDefects::*defect) {
  LaunchDefects d;
  d.*defect = true;
  return d;
}

/// What a CUDA mutant declares when it registers: the bug it reproduces
/// (KernelInfo::bug), the property that must catch it (KernelInfo::caught_by)
/// and its launch defects; its kernel defects go in the template argument.
/// A correct variant registers with the empty spec.
struct MutantSpec {
  const char* bug = "";
  const char* caught_by = "";
  LaunchDefects launch;
};

/// The M from which the large-M dispatch paths of LaunchDefects apply.
constexpr long long kLargeMPath = 32768;

}  // namespace ulpcheck::cuda_defects
