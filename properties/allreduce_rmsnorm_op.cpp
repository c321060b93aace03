// The allreduce_rmsnorm op: runs a registered variant over the case's R
// ranks (each with its own partial, and its own copies of the residual and
// w) and asks the MPFR oracle for residual_out and y. Rank 0's outputs carry
// the plain names the oracle uses; rank r's are "residual_out@r" and "y@r",
// which rank_consistency compares with rank 0's.
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/cuda_ops.h"
#include "core/device.h"
#include "core/schedule_noise.h"
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm.h"
#include "kernels/allreduce_rmsnorm/allreduce_rmsnorm_spec.h"
#include "oracles/allreduce_rmsnorm.h"
#include "properties/allreduce_rmsnorm_inputs.h"
#include "properties/generators.h"
#include "properties/op.h"
#include "properties/row_op.h"
#include "properties/run_buffers.h"

namespace ulpcheck {

namespace {

// peakHostBytes: the most resident memory measured for one repro on the
// host backend (max RSS, host_fused_oneshot, --property accuracy, the fast
// oracle; 2026-11-28, each buffer released once collected), plus 25%: with
// residual_out and y streamed and buffers too large to pool, 4 bytes per
// element and 24 more per rank in fp32 (4096 x 4096 at 1, 2 and 4 ranks:
// 469,864, 862,804 and 1,649,288 KB), half that in 16 bits (bf16 8192 x
// 4096 at 2 ranks: 862,624 KB); held whole they add 80 (2048 x 2048 at 2
// ranks: 663,412 KB held, 335,512 KB streamed: residual_out, y, v's
// budgets, and the norm's y and dx while it runs), pooled buffers up to
// 3.75 of their elements per rank (1024 x 2048 at 2 ranks: 343,888 KB);
// little more per row (2^20 x 1 at 2 ranks: 222,100 KB, below the elements'
// estimate), 380 more per column (1 x 2^22 at 2 ranks: 1,756,644 KB).
constexpr double kPeakBytesPerElement = 5, kPeakBytesPerRankElement32 = 30, kPeakBytesPerRankElement16 = 15;
constexpr double kHeldReferenceBytesPerElement = 80, kPooledTensorsPerRank = 4.7;
constexpr double kPeakBytesPerRow = 8, kPeakBytesPerColumn = 480, kPeakBaseBytes = 64 << 20;

/// Whether residual_out and y are held whole: past the context's
/// max_held_reference_bytes they are streamed.
bool referenceHeldWhole(const CaseSpec& c, const ExecContext& ctx) {
  return referenceFitsHeld(c, ctx, kHeldReferenceBytesPerElement);
}

const AllreduceRmsNormKernel& kernelOf(const CaseSpec& c) {
  if (c.ranks < 1 || c.ranks > kMaxRanks)
    throw CaseParseError(fmt::format("allreduce_rmsnorm needs 1 <= ranks <= {}, got ranks={}", kMaxRanks, c.ranks));
  const AllreduceRmsNormKernel& k = registeredKernel<AllreduceRmsNormRegistry>(c);
  const std::vector<int>& counts = k.info.rank_choices;
  if (!counts.empty() && std::find(counts.begin(), counts.end(), c.ranks) == counts.end())
    throw CaseNotRunnableHere(
        fmt::format("{} runs at {} ranks, not ranks={}", c.kernel, fmt::join(counts, ", "), c.ranks));
  if (k.info.one_rank_per_gpu && c.ranks > queryDevice().count)
    throw CaseNotRunnableHere(fmt::format("{} puts one rank on each GPU: ranks={} needs {} GPUs, {} visible", c.kernel,
                                          c.ranks, c.ranks, queryDevice().count));
  return k;
}

/// The GPU of rank r: its own with one rank per GPU, else the current one.
int deviceOfRank(const AllreduceRmsNormKernel& k, int r) {
  if (k.info.backend != Backend::Cuda) return -1;
  return k.info.one_rank_per_gpu ? r : cudaops::currentDevice();
}

std::string rankName(const char* tensor, int rank) {
  return rank == 0 ? std::string(tensor) : fmt::format("{}@{}", tensor, rank);
}

/// The communication buffers of door variants (AllreduceRmsNormKernel::
/// comm_bytes): one per variant and rank, on the rank's device, zero when
/// allocated and then the variant's own from call to call (its flags and
/// staged data must survive; plugin.h promises it). One that a case needs
/// larger, or whose red zones a call damaged, is replaced by a fresh one.
class CommBuffers {
 public:
  static CommBuffers& instance() {
    static CommBuffers buffers;
    return buffers;
  }
  /// Rank r's buffer of variant `k`, at least `bytes` long.
  Buffer& of(const KernelInfo& k, int r, int device, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<Buffer>& b = held_[{k.name, r}];
    if (!b || b->bytes() < bytes || (k.backend == Backend::Cuda && b->device() != device)) {
      b.reset();
      cudaops::DeviceScope on(device);
      b = std::make_unique<Buffer>(k.backend, bytes, rankName("comm", r));
      b->fillPattern(0, 4);
    }
    return *b;
  }
  /// Reports damaged red zones of the variant's buffers into `memory` (and
  /// drops those buffers).
  void check(const KernelInfo& k, int ranks, MemoryReport& memory) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int r = 0; r < ranks; ++r) {
      const auto it = held_.find({k.name, r});
      if (it == held_.end() || !it->second) continue;
      if (const size_t bad = it->second->damagedCanaryBytes()) {
        memory.canary_bytes_damaged += bad;
        memory.details.push_back(fmt::format("{} canary bytes around its communication buffer 'comm@{}' overwritten "
                                             "(out-of-bounds write)",
                                             bad, r));
        it->second.reset();
      }
    }
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::unique_ptr<Buffer>> held_;
};

/// A multi-rank call's generation (LaunchEnv::generation): strictly
/// increasing over the process's calls, 1 first.
uint64_t nextGeneration() {
  static std::atomic<uint64_t> generation{0};
  return ++generation;
}

class AllreduceRmsNormOp final : public OpAdapter {
 public:
  std::string name() const override { return "allreduce_rmsnorm"; }
  bool multiRank() const override { return true; }
  // RMSNorm's weight specs, the residual's dtype (quack's residual_dtype) and
  // the dtype the ranks' partials are summed in (FlashInfer's fp32_acc).
  OpSpecDeclaration spec() const override {
    const SpecCode llama = kRounding.code(Rounding::Llama);
    return {{&weightDtypeField(), &roundingField(), &weightOffsetField(), &residualDtypeField(), &rankSumField()},
            {{"rounding", llama, "acc", "rounding=llama of a sum rounded after each rank is not modelled"}}};
  }
  float testSuiteEps() const override { return 1e-6f; }
  // Allreduce fusions: TensorRT-LLM's and FlashInfer's tests.
  std::vector<std::string> baselineSuites() const override { return {"trtllm_check_accuracy", "flashinfer_ar_fusion"}; }

  uint64_t peakHostBytes(const CaseSpec& c, const ExecContext& ctx) const override {
    const double per_rank = c.dtype == DType::F32 ? kPeakBytesPerRankElement32 : kPeakBytesPerRankElement16;
    const double held = referenceHeldWhole(c, ctx) ? 1.25 * kHeldReferenceBytesPerElement : 0.0;
    return linearHostBytes(
        c, kPeakBytesPerElement + per_rank * c.ranks + held + pooledBytesPerElement(c, kPooledTensorsPerRank * c.ranks),
        kPeakBytesPerRow, kPeakBytesPerColumn, kPeakBaseBytes);
  }

  std::vector<KernelInfo> kernels() const override { return registeredKernelInfos<AllreduceRmsNormRegistry>(); }

  RunResult run(const CaseSpec& c, const RowLayout& layout, const ExecContext& ctx) const override {
    const AllreduceRmsNormKernel& k = kernelOf(c);
    const int64_t M = static_cast<int64_t>(layout.size());
    const RowShape shape{c.dtype, M, c.N, c.ld, c.eps, c.spec};
    LaunchEnv env = launchEnv(c, ctx);
    env.ranks = c.ranks;
    env.generation = nextGeneration();
    AllreduceRmsNormInputData fresh;
    const AllreduceRmsNormInputData& in = caseInputs(ctx, layout, fresh,
                                                     [&] { return generateAllreduceRmsNormInputs(c, layout); });

    RunBuffers buf(k.info.backend, k.info.unprovided_outputs);
    AllreduceRmsNormArgs args;
    args.shape = shape;
    args.ranks = c.ranks;
    const size_t workspace = std::max<size_t>(k.workspace_bytes(shape, c.ranks), 1);
    for (int r = 0; r < c.ranks; ++r) {
      args.device[r] = deviceOfRank(k, r);
      cudaops::DeviceScope on(args.device[r]);  // rank r's buffers live on its GPU
      args.x[r] = buf.input(rankName("x", r), in.x[size_t(r)]);
      args.residual[r] = buf.input(rankName("residual", r), in.residual);
      args.w[r] = buf.input(rankName("w", r), in.w);
      args.residual_out[r] = buf.output(rankName("residual_out", r), residualDtype(c.dtype, c.spec), M, c.N, c.ld,
                                        true);
      args.y[r] = buf.output(rankName("y", r), c.dtype, M, c.N, c.ld, true);
      args.workspace[r] = buf.scratch(rankName("workspace", r), workspace);
    }
    if (k.comm_bytes) {
      args.comm_bytes = std::max<size_t>(k.comm_bytes(shape, c.ranks), 1);
      for (int r = 0; r < c.ranks; ++r)
        args.comm[r] = CommBuffers::instance().of(k.info, r, args.device[r], args.comm_bytes).data();
    }

    auto synchronizeRanks = [&](const char* what) {
      if (k.info.backend != Backend::Cuda) return;
      for (int r = 0; r < c.ranks; ++r) {
        cudaops::DeviceScope on(args.device[r]);
        deviceSynchronize(what);
      }
    };
    // Uploads from pageable memory may still be in flight on each rank's GPU,
    // and another GPU's kernels read them through peer access: wait first.
    if (k.info.one_rank_per_gpu) synchronizeRanks("allreduce_rmsnorm inputs");

    // Started after the inputs are in place, so the load overlaps the launches.
    ScheduleNoise noise(ctx.perturb_schedule && !k.info.remote, k.info.backend, ctx.sm_count);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      k.run(args, env);
    } catch (...) {
      // Kernels already queued on other GPUs may read these buffers: let them
      // finish before the buffers are freed.
      try {
        synchronizeRanks("allreduce_rmsnorm after a failed launch");
      } catch (...) {
      }
      throw;
    }
    synchronizeRanks("allreduce_rmsnorm");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    RunResult result = buf.collect(ctx.repeats);
    if (k.comm_bytes) CommBuffers::instance().check(k.info, c.ranks, result.memory);
    result.seconds = seconds;
    return result;
  }

  std::vector<ReferenceTensor> reference(const CaseSpec& c, const ExecContext& ctx) const override {
    const AllreduceRmsNormKernel& k = kernelOf(c);
    const RowLayout rows = identityRows(c.M);
    AllreduceRmsNormInputData fresh;
    const AllreduceRmsNormInputData& in = caseInputs(ctx, rows, fresh,
                                                     [&] { return generateAllreduceRmsNormInputs(c, rows); });
    const RowShape shape{c.dtype, c.M, c.N, c.ld, c.eps, c.spec};
    const AccuracyContract contract{k.info.contracts.accumulation, k.depths(shape, launchEnv(c, ctx)), false};
    const AllreduceRmsNormInputs inputs{.x = in.x,
                                        .residual = in.residual,
                                        .w = in.w,
                                        .eps = c.eps,
                                        .spec = c.spec,
                                        .sum_in_activation_dtype = kRankSum(c.spec) == RankSum::Activation};
    ThreadPool& pool = ctx.pool ? *ctx.pool : ThreadPool::shared();
    // Streamed rows are made again from the case's cached inputs (ctx.inputs).
    AllreduceRmsNormReference ref = ctx.inputs && !referenceHeldWhole(c, ctx)
                                        ? allreduceRmsNormReferenceStreamed(inputs, contract, pool, ctx.oracle)
                                        : allreduceRmsNormReference(inputs, contract, pool, ctx.oracle);
    return movedTensors(ref.residual_out, ref.y);
  }

  std::string describeInputs(const CaseSpec& c, const std::string& /*every output*/, int64_t row,
                             int64_t col) const override {
    auto at = [&](const DistParams& d, TensorStream s, int64_t r, int64_t j) {
      return hexFloat(sampleValue(d, c.dtype, c.seed, s, r, j));
    };
    std::string partials;
    for (int r = 0; r < c.ranks; ++r)
      partials += fmt::format("{}x{}={}", r ? " " : "", r, at(c.x, rankPartialStream(r), row, col));
    return fmt::format(
        "{} residual={} w={}", partials,
        hexFloat(sampleValue(c.x, residualDtype(c.dtype, c.spec), c.seed, TensorStream::Residual, row, col)),
        hexFloat(sampleValue(rmsNormWeightDist(c.spec), weightDtype(c.dtype, c.spec), c.seed, TensorStream::Weight, 0,
                             col)));
  }

  rc::Gen<CaseSpec> refine(CaseSpec base) const override {
    const KernelInfo* k = findKernel(base.op, base.kernel);
    std::vector<int> degrees = rankCounts(k && k->one_rank_per_gpu, queryDevice().count);
    if (k && !k->rank_choices.empty()) {
      std::erase_if(degrees, [k](int r) {
        return std::find(k->rank_choices.begin(), k->rank_choices.end(), r) == k->rank_choices.end();
      });
      if (degrees.empty()) degrees = {k->rank_choices.front()};  // skipped where it cannot run, saying why
    }
    return rc::gen::mapcat(gen::shrinkingElementOf<int>(degrees), [base](int ranks) {
      CaseSpec c = base;
      c.ranks = ranks;
      return gen::withEps(c, {1e-6f, 1e-5f});
    });
  }
};

const bool registered = registerOp(std::make_unique<AllreduceRmsNormOp>());

}  // namespace
}  // namespace ulpcheck
