// The rmsnorm op: runs a registered variant's forward then backward (on the
// rstd its own forward saved, as training does) and asks the MPFR oracle for
// y, rstd, dx and dw (and db under a bias).
#include <fmt/format.h>

#include "core/datagen.h"
#include "core/device.h"
#include "kernels/rmsnorm/rmsnorm.h"
#include "oracles/rmsnorm.h"
#include "properties/accuracy.h"
#include "properties/generators.h"
#include "properties/op.h"
#include "properties/rmsnorm_gpu_judge.h"
#include "properties/rmsnorm_inputs.h"
#include "properties/row_op.h"
#include "properties/run_buffers.h"

namespace ulpcheck {

namespace {

// peakHostBytes: the most resident memory measured for one repro on the
// host backend (max RSS, host_separate, --property accuracy, the fast
// oracle; 2026-11-28, each buffer released once collected), plus 25%:
// with y and dx streamed and buffers too large to pool, 28 bytes per
// element in fp32 (8192 x 4096: 933,520 KB; 4096 x 4096: 474,488 KB), 14
// in 16 bits (bf16 8192 x 8192: 938,108 KB) -- the case's inputs, their
// buffers and its outputs'; y and dx held whole add their 40 bytes (48
// under a bias), pooled buffers up to 3 of their elements (fp32 4096 x
// 2048 streamed: 322,056 KB; 2048 x 2048 held: 338,356 KB; bf16 held:
// 267,072 KB); 47 more per row at 2^20 x 1 (139,732 KB), 362 more per
// column at 1 x 2^22 (1,813,800 KB: the oracle's column sums and MPFR
// weights are per column), 14 MB for the process.
constexpr double kPeakBytesPerElement32 = 35, kPeakBytesPerElement16 = 18, kPooledTensors = 3.75;
constexpr double kPeakBytesPerRow = 59, kPeakBytesPerColumn = 453;
constexpr double kPeakBaseBytes = 32 << 20;

/// What the case's y and dx take held whole, per element (exact value and
/// budget each, dx's magnitude, and y's under a bias): past the context's
/// max_held_reference_bytes they are streamed.
double heldReferenceBytes(const CaseSpec& c) { return kRmsBias(c.spec) ? 48.0 : 40.0; }
bool referenceHeldWhole(const CaseSpec& c, const ExecContext& ctx) {
  return referenceFitsHeld(c, ctx, heldReferenceBytes(c));
}

const RmsNormKernel& kernelOf(const CaseSpec& c) { return registeredKernel<RmsNormRegistry>(c); }

class RmsNormOp final : public OpAdapter {
 public:
  std::string name() const override { return "rmsnorm"; }
  OpSpecDeclaration spec() const override {
    const SpecCode llama = kRounding.code(Rounding::Llama);
    // Llama's backward rounds x-hat; rebuilt from a rounded rstd it would be
    // round_T(x round_T(r)), a spec no library ships and the oracle does not
    // model. Rounded x-hat times w, plus b: no library ships it either.
    return {{&weightDtypeField(), &roundingField(), &weightOffsetField(), &savedStatsField(), &rmsBiasField()},
            {{"rounding", llama, "stats", "'stats' in the activation dtype with rounding=llama is not modelled"},
             {"rounding", llama, "bias", "'bias' with rounding=llama is not modelled"}}};
  }
  float testSuiteEps() const override { return 1e-6f; }
  std::vector<std::string> baselineSuites() const override {
    return {"torch_assert_close", "quack_atol", "trtllm_check_accuracy"};
  }

  uint64_t peakHostBytes(const CaseSpec& c, const ExecContext& ctx) const override {
    const double held = referenceHeldWhole(c, ctx) ? 1.25 * heldReferenceBytes(c) : 0.0;
    return linearHostBytes(c,
                           (c.dtype == DType::F32 ? kPeakBytesPerElement32 : kPeakBytesPerElement16) + held +
                               pooledBytesPerElement(c, kPooledTensors),
                           kPeakBytesPerRow, kPeakBytesPerColumn, kPeakBaseBytes);
  }

  std::vector<KernelInfo> kernels() const override { return registeredKernelInfos<RmsNormRegistry>(); }

  RunResult run(const CaseSpec& c, const RowLayout& layout, const ExecContext& ctx) const override {
    const RmsNormKernel& k = kernelOf(c);
    const int64_t M = static_cast<int64_t>(layout.size());
    const RowShape shape{c.dtype, M, c.N, c.ld, c.eps, c.spec};
    const LaunchEnv env = launchEnv(c, ctx);
    RmsNormInputData fresh;
    const RmsNormInputData& in = caseInputs(ctx, layout, fresh, [&] { return generateRmsNormInputs(c, layout); });

    RunBuffers buf(k.info.backend, k.info.unprovided_outputs);
    const void* x = buf.input("x", in.x);
    const void* w = buf.input("w", in.w);
    const void* dy = buf.input("dy", in.dy);
    const void* b = in.b ? buf.input("b", *in.b) : nullptr;
    void* y = buf.output("y", c.dtype, M, c.N, c.ld, true);
    auto* rstd = static_cast<float*>(buf.output("rstd", DType::F32, M, 1, 1, true));
    void* dx = buf.output("dx", c.dtype, M, c.N, c.ld, true);
    void* dw = buf.output("dw", shape.wdtype(), 1, c.N, c.N, false);
    void* db = in.b ? buf.output("db", shape.wdtype(), 1, c.N, c.N, false) : nullptr;
    void* workspace = buf.scratch("workspace", std::max<size_t>(k.workspace_bytes(shape, env), 1));

    return runVariant(k.info, ctx, buf, "rmsnorm forward + backward", [&] {
      k.forward(RmsNormForwardArgs{shape, x, w, y, rstd, b}, env);
      if (k.backward) k.backward(RmsNormBackwardArgs{shape, x, w, dy, rstd, dx, dw, workspace, db}, env);
    });
  }

  std::vector<ReferenceTensor> reference(const CaseSpec& c, const ExecContext& ctx) const override {
    const RmsNormKernel& k = kernelOf(c);
    const RowLayout rows = identityRows(c.M);
    RmsNormInputData fresh;
    const RmsNormInputData& in = caseInputs(ctx, rows, fresh, [&] { return generateRmsNormInputs(c, rows); });
    const RowShape shape{c.dtype, c.M, c.N, c.ld, c.eps, c.spec};
    const AccuracyContract contract{k.info.contracts.accumulation, k.depths(shape, launchEnv(c, ctx)),
                                    k.info.contracts.column_reduction_ftz};
    // Streamed rows are made again from the case's cached inputs (ctx.inputs).
    const bool stream = ctx.inputs && !referenceHeldWhole(c, ctx);
    return referenceWithStatisticalBudgets(c, k.info, contract, [&](const AccuracyContract& at) {
      const RmsNormInputs inputs{in.x, in.w, in.dy, c.eps, c.spec, in.b ? &*in.b : nullptr};
      ThreadPool& pool = ctx.pool ? *ctx.pool : ThreadPool::shared();
      RmsNormReference ref = stream ? rmsnormReferenceStreamed(inputs, at, pool, ctx.oracle)
                                    : rmsnormReference(inputs, at, pool, ctx.oracle);
      std::vector<ReferenceTensor> out = movedTensors(ref.y, ref.rstd, ref.dx, ref.dw);
      if (kRmsBias(c.spec)) out.push_back(std::move(ref.db));
      return out;
    });
  }

  std::optional<Outcome> accuracyOnGpu(const CaseSpec& c, const ExecContext& ctx, const RunResult* outputs,
                                       OutputDigests* digests = nullptr) const override {
    const RmsNormKernel& k = kernelOf(c);
    if (!rmsnormGpuJudgeApplies(c, k.info)) return std::nullopt;
    return rmsnormAccuracyOnGpu(
        c, k, ctx,
        [&](const std::string& tensor, int64_t row, int64_t col) { return describeInputs(c, tensor, row, col); },
        outputs, 1.0, digests);
  }

  std::string describeInputs(const CaseSpec& c, const std::string& tensor, int64_t row, int64_t col) const override {
    auto at = [&](const DistParams& d, TensorStream s, int64_t r, int64_t j) {
      return hexFloat(sampleValue(d, c.dtype, c.seed, s, r, j));
    };
    const std::string w = hexFloat(
        sampleValue(rmsNormWeightDist(c.spec), weightDtype(c.dtype, c.spec), c.seed, TensorStream::Weight, 0, col));
    if (tensor == "dw") return fmt::format("w[{}]={} (sum over {} rows)", col, w, c.M);
    if (tensor == "db") return fmt::format("dy of column {} (sum over {} rows)", col, c.M);
    const std::string b = kRmsBias(c.spec)
                              ? " b=" + hexFloat(sampleValue(kRmsNormBiasDist, weightDtype(c.dtype, c.spec), c.seed,
                                                             TensorStream::Bias, 0, col))
                              : "";
    if (tensor == "rstd") return fmt::format("row {} of x ({} columns)", row, c.N);
    return fmt::format("x={} w={}{} dy={}", at(c.x, TensorStream::X, row, col), w, b,
                       at(rmsNormGradDist(c), TensorStream::GradOut, row, col));
  }

  rc::Gen<CaseSpec> refine(CaseSpec base) const override {
    // eps of the models in use; shrinking goes to the first.
    const std::vector<float> eps{1e-6f, 1e-5f, 1e-12f, 1e-3f};
    // A dW summed in an order no one fixes (atomics: arrival order) has only
    // the depth bound, ~ D u sum|dy xhat|, which past a few thousand rows is
    // beyond 1/64 of dW: such cases are inconclusive by construction.
    const RowShape shape{base.dtype, base.M, base.N, base.ld, base.eps, base.spec};
    if (base.M > 2048 && kernelOf(base).depths(shape, LaunchEnv{132, base.ctas, nullptr}).col_orders.empty()) {
      CaseSpec usual = base;
      usual.M = base.M % 2048 + 1;
      return rc::gen::mapcat(gen::mostly(usual, base), [eps](CaseSpec c) { return gen::withEps(std::move(c), eps); });
    }
    return gen::withEps(std::move(base), eps);
  }
};

const bool registered = registerOp(std::make_unique<RmsNormOp>());

}  // namespace
}  // namespace ulpcheck
