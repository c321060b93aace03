// The fused_add_rmsnorm op: runs a registered variant's forward on x, the
// residual and w, and its backward where it has one (on dy and
// dresidual_out as well), and asks the oracle (allreduce_rmsnorm's at one
// rank; rmsnorm's for the backward) for residual_out and y, and dx,
// dresidual and dw.
#include <algorithm>

#include <fmt/format.h>

#include "core/device.h"
#include "kernels/fused_add_rmsnorm/fused_add_rmsnorm.h"
#include "oracles/fused_add_rmsnorm.h"
#include "properties/accuracy.h"
#include "properties/fused_add_rmsnorm_inputs.h"
#include "properties/generators.h"
#include "properties/op.h"
#include "properties/row_op.h"
#include "properties/run_buffers.h"

namespace ulpcheck {

namespace {

// peakHostBytes, plus 25%: a forward alone as allreduce_rmsnorm's at one
// rank (its oracle is this op's; 2026-11-28: 28 bytes per element in fp32,
// 14 in 16 bits, with residual_out and y streamed; 80 more held whole);
// forward and backward measured (max RSS, host_fused_add, --property
// accuracy, the fast oracle; 2026-11-28, each buffer released once
// collected): streamed, buffers too large to pool, 64 bytes per element in
// fp32 (4096 x 4096: 1,064,420 KB), 36 in bf16 (8192 x 4096: 1,195,788 KB);
// held whole 88 more (fp32 2048 x 2048: 732,016 KB held, 371,664 KB
// streamed); pooled buffers up to 6 of their elements (fp32 2048 x 4096:
// 731,360 KB; bf16 4096 x 4096: 731,980 KB; fp32 1024 x 1024 held:
// 196,660 KB); little more per row (2^20 x 1: 246,476 KB, below the
// elements' estimate), 462 more per column (1 x 2^22: 2,305,224 KB).
constexpr double kPeakBytesPerElement32 = 35, kPeakBytesPerElement16 = 18, kHeldBytesPerElement = 80;
constexpr double kPooledTensors = 4.7, kPeakBytesPerRow = 8, kPeakBytesPerColumn = 480;
constexpr double kBackwardPeakBytesPerElement32 = 80, kBackwardPeakBytesPerElement16 = 45;
constexpr double kBackwardHeldBytesPerElement = 88, kBackwardPooledTensors = 7.5;
constexpr double kBackwardBytesPerRow = 12, kBackwardBytesPerColumn = 100;
constexpr double kPeakBaseBytes = 64 << 20;

const FusedAddRmsNormKernel& kernelOf(const CaseSpec& c) { return registeredKernel<FusedAddRmsNormRegistry>(c); }

/// What the case's per-row reference tensors take held whole, per element
/// (residual_out and y, and with a backward dx and dresidual; with what the
/// oracle holds beside them while it runs, measured above): past the
/// context's max_held_reference_bytes they are streamed.
double heldReferenceBytes(const CaseSpec& c) {
  return kernelOf(c).backward ? kBackwardHeldBytesPerElement : kHeldBytesPerElement;
}
bool referenceHeldWhole(const CaseSpec& c, const ExecContext& ctx) {
  return referenceFitsHeld(c, ctx, heldReferenceBytes(c));
}

class FusedAddRmsNormOp final : public OpAdapter {
 public:
  std::string name() const override { return "fused_add_rmsnorm"; }
  OpSpecDeclaration spec() const override {
    // (Under res=fp32 both sums are the fp32 one: sum=fp32 says it again.)
    // Llama's x-hat rounding after the add (vLLM's fused_add_rms_norm, Liger's
    // llama mode) is modelled on residual_out in T: the norm of the rounded sum.
    const SpecCode llama = kRounding.code(Rounding::Llama);
    return {{&weightDtypeField(), &roundingField(), &weightOffsetField(), &residualDtypeField(), &normedSumField()},
            {{"rounding", llama, "res", "rounding=llama with an fp32 residual is not modelled"},
             {"rounding", llama, "sum", "rounding=llama of the fp32 sum is not modelled"}}};
  }
  float testSuiteEps() const override { return 1e-6f; }
  // FlashInfer's test_norm.py (rtol = atol = 1e-3 for fused_add_rmsnorm) and torch's defaults.
  std::vector<std::string> baselineSuites() const override { return {"torch_assert_close", "quack_atol"}; }

  uint64_t peakHostBytes(const CaseSpec& c, const ExecContext& ctx) const override {
    const bool f32 = c.dtype == DType::F32, backward = kernelOf(c).backward != nullptr;
    const double held = referenceHeldWhole(c, ctx) ? 1.25 * heldReferenceBytes(c) : 0.0;
    if (!backward)
      return linearHostBytes(
          c, (f32 ? kPeakBytesPerElement32 : kPeakBytesPerElement16) + held + pooledBytesPerElement(c, kPooledTensors),
          kPeakBytesPerRow, kPeakBytesPerColumn, kPeakBaseBytes);
    return linearHostBytes(c,
                           (f32 ? kBackwardPeakBytesPerElement32 : kBackwardPeakBytesPerElement16) + held +
                               pooledBytesPerElement(c, kBackwardPooledTensors),
                           kPeakBytesPerRow + kBackwardBytesPerRow, kPeakBytesPerColumn + kBackwardBytesPerColumn,
                           kPeakBaseBytes);
  }

  std::vector<KernelInfo> kernels() const override { return registeredKernelInfos<FusedAddRmsNormRegistry>(); }

  RunResult run(const CaseSpec& c, const RowLayout& layout, const ExecContext& ctx) const override {
    const FusedAddRmsNormKernel& k = kernelOf(c);
    const int64_t M = static_cast<int64_t>(layout.size());
    const RowShape shape{c.dtype, M, c.N, c.ld, c.eps, c.spec};
    const LaunchEnv env = launchEnv(c, ctx);
    FusedAddRmsNormInputData fresh;
    const FusedAddRmsNormInputData& in = caseInputs(ctx, layout, fresh,
                                                    [&] { return generateFusedAddRmsNormInputs(c, layout); });

    RunBuffers buf(k.info.backend, k.info.unprovided_outputs);
    FusedAddRmsNormArgs args;
    args.shape = shape;
    args.x = buf.input("x", in.x);
    args.residual = buf.input("residual", in.residual);
    args.w = buf.input("w", in.w);
    args.residual_out = buf.output("residual_out", residualDtype(c.dtype, c.spec), M, c.N, c.ld, true);
    args.y = buf.output("y", c.dtype, M, c.N, c.ld, true);
    FusedAddRmsNormBackwardArgs grads;
    if (k.backward) {
      const FusedAddRmsNormGradients& g = in.gradients(c);
      const DType rt = residualDtype(c.dtype, c.spec);
      grads = FusedAddRmsNormBackwardArgs{
          .shape = shape,
          .x = args.x,
          .residual = args.residual,
          .w = args.w,
          .dy = buf.input("dy", g.dy),
          .dresidual_out = buf.input("dresidual_out", g.dresidual_out),
          .dx = buf.output("dx", c.dtype, M, c.N, c.ld, true),
          .dresidual = buf.output("dresidual", rt, M, c.N, c.ld, true),
          .dw = buf.output("dw", shape.wdtype(), 1, c.N, c.N, false),
          .workspace = buf.scratch("workspace", std::max<size_t>(k.workspace_bytes(shape, env), 1))};
    }

    return runVariant(k.info, ctx, buf, "fused_add_rmsnorm", [&] {
      k.forward(args, env);
      if (k.backward) k.backward(grads, env);
    });
  }

  std::vector<ReferenceTensor> reference(const CaseSpec& c, const ExecContext& ctx) const override {
    const FusedAddRmsNormKernel& k = kernelOf(c);
    const RowLayout rows = identityRows(c.M);
    FusedAddRmsNormInputData fresh;
    const FusedAddRmsNormInputData& in = caseInputs(ctx, rows, fresh,
                                                    [&] { return generateFusedAddRmsNormInputs(c, rows); });
    const RowShape shape{c.dtype, c.M, c.N, c.ld, c.eps, c.spec};
    const AccuracyContract contract{k.info.contracts.accumulation, k.depths(shape, launchEnv(c, ctx)),
                                    k.info.contracts.column_reduction_ftz};
    const FusedAddRmsNormInputs inputs{in.x, in.residual, in.w, c.eps, c.spec, kNormedSum(c.spec) == NormedSum::Fp32};
    ThreadPool& pool = ctx.pool ? *ctx.pool : ThreadPool::shared();
    // Streamed rows are made again from the case's cached inputs (ctx.inputs).
    const bool stream = ctx.inputs && !referenceHeldWhole(c, ctx);
    // A black box (Liger's, quack's, FlashInfer's) is also held to the
    // probabilistic budget where the case's values fit its model, as rmsnorm's.
    return referenceWithStatisticalBudgets(c, k.info, contract, [&](const AccuracyContract& at) {
      AllreduceRmsNormReference ref = fusedAddRmsNormReference(inputs, at, pool, ctx.oracle, stream);
      if (!k.backward) return movedTensors(ref.residual_out, ref.y);
      const FusedAddRmsNormGradients& g = in.gradients(c);
      FusedAddRmsNormBackwardReference back = fusedAddRmsNormBackwardReference(inputs, g.dy, g.dresidual_out, ref, at,
                                                                               pool, ctx.oracle, stream);
      return movedTensors(ref.residual_out, ref.y, back.dx, back.dresidual, back.dw);
    });
  }

  std::string describeInputs(const CaseSpec& c, const std::string& tensor, int64_t row, int64_t col) const override {
    const DType rt = residualDtype(c.dtype, c.spec), wt = weightDtype(c.dtype, c.spec);
    const std::string w = hexFloat(sampleValue(rmsNormWeightDist(c.spec), wt, c.seed, TensorStream::Weight, 0, col));
    if (tensor == "dw") return fmt::format("w[{}]={} (sum over {} rows)", col, w, c.M);
    const std::string forward = fmt::format(
        "x={} residual={} w={}", hexFloat(sampleValue(c.x, c.dtype, c.seed, TensorStream::X, row, col)),
        hexFloat(sampleValue(c.x, rt, c.seed, TensorStream::Residual, row, col)), w);
    if (tensor != "dx" && tensor != "dresidual") return forward;
    return fmt::format("{} dy={} dresidual_out={}", forward,
                       hexFloat(sampleValue(rmsNormGradDist(c), c.dtype, c.seed, TensorStream::GradOut, row, col)),
                       hexFloat(sampleValue(rmsNormGradDist(c), rt, c.seed, TensorStream::ResidualGrad, row, col)));
  }

  rc::Gen<CaseSpec> refine(CaseSpec base) const override {
    // eps of the models in use (FlashInfer's default 1e-6); shrinking goes to the first.
    return gen::withEps(std::move(base), {1e-6f, 1e-5f});
  }
};

const bool registered = registerOp(std::make_unique<FusedAddRmsNormOp>());

}  // namespace
}  // namespace ulpcheck
