// The fused_add_rmsnorm_quant op: runs a registered variant's forward on x,
// the residual, w and (quant=static) the scale, and asks the oracle
// (oracles/fused_add_rmsnorm_quant.h) for residual_out, y_q's admissible fp8
// values and, under quant=token or group, the scales'. Its inputs are
// fused_add_rmsnorm's (the same streams), its quantized outputs
// rmsnorm_quant's (properties/rmsnorm_quant_inputs.h).

#include <fmt/format.h>

#include "core/device.h"
#include "kernels/fused_add_rmsnorm_quant/fused_add_rmsnorm_quant.h"
#include "oracles/fused_add_rmsnorm_quant.h"
#include "properties/fused_add_rmsnorm_inputs.h"
#include "properties/generators.h"
#include "properties/op.h"
#include "properties/rmsnorm_quant_inputs.h"
#include "properties/row_op.h"
#include "properties/run_buffers.h"

namespace ulpcheck {

namespace {

// peakHostBytes: rmsnorm_quant's measured figures (its oracle, held whole,
// is this op's after the add), plus the fused add's residual_out reference
// and its v held beside it (allreduce_rmsnorm's at one rank: 28 bytes an
// element in fp32).
constexpr double kPeakBytesPerElement = 130, kPeakBytesPerRow = 64, kPeakBytesPerColumn = 400;
constexpr double kPeakBaseBytes = 64 << 20;

const FusedAddRmsNormQuantKernel& kernelOf(const CaseSpec& c) {
  return registeredKernel<FusedAddRmsNormQuantRegistry>(c);
}

class FusedAddRmsNormQuantOp final : public OpAdapter {
 public:
  std::string name() const override { return "fused_add_rmsnorm_quant"; }
  OpSpecDeclaration spec() const override {
    return {{&weightDtypeField(), &weightOffsetField(), &residualDtypeField(), &normedSumField(), &quantScaleField(),
             &fp8FormatField(), &fp8OverflowField(), &scaledInTField(), &scaleInverseField()},
            {}};
  }
  // FlashInfer's test_norm.py (eps 1e-6), whose fused_add_rmsnorm_quant
  // check is allclose(rtol=1, atol=1) on y_q (and 1e-3 on the residual).
  float testSuiteEps() const override { return 1e-6f; }
  std::vector<std::string> baselineSuites() const override { return {"flashinfer_quant"}; }

  uint64_t peakHostBytes(const CaseSpec& c, const ExecContext&) const override {
    return linearHostBytes(c, kPeakBytesPerElement, kPeakBytesPerRow, kPeakBytesPerColumn, kPeakBaseBytes);
  }

  std::vector<KernelInfo> kernels() const override { return registeredKernelInfos<FusedAddRmsNormQuantRegistry>(); }

  RunResult run(const CaseSpec& c, const RowLayout& layout, const ExecContext& ctx) const override {
    return runWithFp8Poisons(c, ctx,
                             [&](const ExecContext& x, uint32_t poison) { return runOnce(c, layout, x, poison); });
  }

  std::vector<ReferenceTensor> reference(const CaseSpec& c, const ExecContext& ctx) const override {
    const FusedAddRmsNormQuantKernel& k = kernelOf(c);
    const RowLayout rows = identityRows(c.M);
    FusedAddRmsNormInputData fresh;
    const FusedAddRmsNormInputData& in = caseInputs(ctx, rows, fresh,
                                                    [&] { return generateFusedAddRmsNormInputs(c, rows); });
    const RowShape shape{c.dtype, c.M, c.N, c.ld, c.eps, c.spec};
    const AccuracyContract contract{k.info.contracts.accumulation, k.depths(shape, launchEnv(c, ctx)),
                                    k.info.contracts.column_reduction_ftz};
    const FusedAddRmsNormInputs inputs{.x = in.x,
                                       .residual = in.residual,
                                       .w = in.w,
                                       .eps = c.eps,
                                       .spec = c.spec,
                                       .fp32_sum = kNormedSum(c.spec) == NormedSum::Fp32};
    const QuantizedOutput out = quantizedOutputOf(c);
    ThreadPool& pool = ctx.pool ? *ctx.pool : ThreadPool::shared();
    FusedAddRmsNormQuantReference ref = fusedAddRmsNormQuantReference(inputs, out, contract, pool, ctx.oracle);
    if (out.per_token) return movedTensors(ref.residual_out, ref.quantized.y, ref.quantized.scale);
    return movedTensors(ref.residual_out, ref.quantized.y);
  }

  std::string describeInputs(const CaseSpec& c, const std::string& tensor, int64_t row, int64_t col) const override {
    if (tensor == "scale") return describeComputedScale(c, row, col);
    const DType rt = residualDtype(c.dtype, c.spec), wt = weightDtype(c.dtype, c.spec);
    return fmt::format("x={} residual={} w={}{}",
                       hexFloat(sampleValue(c.x, c.dtype, c.seed, TensorStream::X, row, col)),
                       hexFloat(sampleValue(c.x, rt, c.seed, TensorStream::Residual, row, col)),
                       hexFloat(sampleValue(rmsNormWeightDist(c.spec), wt, c.seed, TensorStream::Weight, 0, col)),
                       tensor == "y" ? quantScaleOfElement(c, row, col) : "");
  }

  rc::Gen<CaseSpec> refine(CaseSpec base) const override {
    // eps of the models in use (FlashInfer's default 1e-6); shrinking goes to the first.
    return gen::withEps(std::move(base), {1e-6f, 1e-5f});
  }

 private:
  RunResult runOnce(const CaseSpec& c, const RowLayout& layout, const ExecContext& ctx, uint32_t poison) const {
    const FusedAddRmsNormQuantKernel& k = kernelOf(c);
    const int64_t M = static_cast<int64_t>(layout.size());
    const RowShape shape{c.dtype, M, c.N, c.ld, c.eps, c.spec};
    const LaunchEnv env = launchEnv(c, ctx);
    FusedAddRmsNormInputData fresh;
    const FusedAddRmsNormInputData& in = caseInputs(ctx, layout, fresh,
                                                    [&] { return generateFusedAddRmsNormInputs(c, layout); });

    RunBuffers buf(k.info.backend, k.info.unprovided_outputs);
    FusedAddRmsNormQuantArgs args;
    args.shape = shape;
    args.x = buf.input("x", in.x);
    args.residual = buf.input("residual", in.residual);
    args.w = buf.input("w", in.w);
    args.residual_out = buf.output("residual_out", residualDtype(c.dtype, c.spec), M, c.N, c.ld, true);
    const HostMatrix static_scale = staticQuantScaleInput(c);
    const QuantizedBuffers q = quantizedBuffers(buf, c, M, static_scale, poison);
    args.y = q.y;
    args.static_scale = q.static_scale;
    args.scale = q.scale;

    return runVariant(k.info, ctx, buf, "fused_add_rmsnorm_quant", [&] { k.forward(args, env); });
  }
};

const bool registered = registerOp(std::make_unique<FusedAddRmsNormQuantOp>());

}  // namespace
}  // namespace ulpcheck
