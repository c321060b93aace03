// The rmsnorm_quant op: runs a registered variant's forward on x, w and
// (quant=static) the scale, and asks the oracle for y_q's admissible fp8
// values and, under quant=token, the scales'.
#include <algorithm>

#include <fmt/format.h>

#include "core/device.h"
#include "kernels/rmsnorm_quant/rmsnorm_quant.h"
#include "oracles/rmsnorm_quant.h"
#include "properties/generators.h"
#include "properties/op.h"
#include "properties/rmsnorm_quant_inputs.h"
#include "properties/row_op.h"
#include "properties/run_buffers.h"

namespace ulpcheck {

namespace {

// peakHostBytes, measured (max RSS of `repro ... --property accuracy` on
// host_rmsnorm_quant, the fast oracle, 2026-11-29): rmsnorm's oracle at an
// fp32 y (with its unread backward), then y_q's exact values, budgets and
// admissible values held whole: fp32 2048 x 4096 731,668 KB (89 bytes an
// element), bf16 4096 x 4096 1,348,500 KB (82), bf16 1 x 2^20 406,348 KB
// (about 300 a column beyond the elements), bf16 262144 x 4 102,836 KB.
constexpr double kPeakBytesPerElement = 100, kPeakBytesPerRow = 64, kPeakBytesPerColumn = 400;
constexpr double kPeakBaseBytes = 64 << 20;

const RmsNormQuantKernel& kernelOf(const CaseSpec& c) { return registeredKernel<RmsNormQuantRegistry>(c); }

class RmsNormQuantOp final : public OpAdapter {
 public:
  std::string name() const override { return "rmsnorm_quant"; }
  OpSpecDeclaration spec() const override {
    return {{&weightDtypeField(), &weightOffsetField(), &quantScaleField(), &fp8FormatField(), &fp8OverflowField(),
             &scaledInTField(), &scaleInverseField()},
            {}};
  }
  // FlashInfer's test_norm.py (eps 1e-6), whose rmsnorm_quant check is
  // allclose(rtol=1, atol=1).
  float testSuiteEps() const override { return 1e-6f; }
  std::vector<std::string> baselineSuites() const override { return {"flashinfer_quant"}; }

  uint64_t peakHostBytes(const CaseSpec& c, const ExecContext&) const override {
    return linearHostBytes(c, kPeakBytesPerElement, kPeakBytesPerRow, kPeakBytesPerColumn, kPeakBaseBytes);
  }

  std::vector<KernelInfo> kernels() const override { return registeredKernelInfos<RmsNormQuantRegistry>(); }

  RunResult run(const CaseSpec& c, const RowLayout& layout, const ExecContext& ctx) const override {
    return runWithFp8Poisons(c, ctx,
                             [&](const ExecContext& x, uint32_t poison) { return runOnce(c, layout, x, poison); });
  }

  std::vector<ReferenceTensor> reference(const CaseSpec& c, const ExecContext& ctx) const override {
    const RmsNormQuantKernel& k = kernelOf(c);
    const RowLayout rows = identityRows(c.M);
    RmsNormQuantInputData fresh;
    const RmsNormQuantInputData& in = caseInputs(ctx, rows, fresh, [&] { return generateRmsNormQuantInputs(c, rows); });
    const RowShape shape{c.dtype, c.M, c.N, c.ld, c.eps, c.spec};
    const AccuracyContract contract{k.info.contracts.accumulation, k.depths(shape, launchEnv(c, ctx)),
                                    k.info.contracts.column_reduction_ftz};
    const RmsNormQuantInputs inputs{.x = in.x, .w = in.w, .eps = c.eps, .spec = c.spec, .output = quantizedOutputOf(c)};
    ThreadPool& pool = ctx.pool ? *ctx.pool : ThreadPool::shared();
    QuantizedReference ref = rmsnormQuantReference(inputs, contract, pool, ctx.oracle);
    if (inputs.output.per_token) return movedTensors(ref.y, ref.scale);
    return movedTensors(ref.y);
  }

  std::string describeInputs(const CaseSpec& c, const std::string& tensor, int64_t row, int64_t col) const override {
    if (tensor == "scale") return describeComputedScale(c, row, col);
    const DType wt = weightDtype(c.dtype, c.spec);
    return fmt::format("x={} w={}{}", hexFloat(sampleValue(c.x, c.dtype, c.seed, TensorStream::X, row, col)),
                       hexFloat(sampleValue(rmsNormWeightDist(c.spec), wt, c.seed, TensorStream::Weight, 0, col)),
                       quantScaleOfElement(c, row, col));
  }

  rc::Gen<CaseSpec> refine(CaseSpec base) const override {
    // eps of the models in use (FlashInfer's default 1e-6); shrinking goes to the first.
    return gen::withEps(std::move(base), {1e-6f, 1e-5f});
  }

 private:
  RunResult runOnce(const CaseSpec& c, const RowLayout& layout, const ExecContext& ctx, uint32_t poison) const {
    const RmsNormQuantKernel& k = kernelOf(c);
    const int64_t M = static_cast<int64_t>(layout.size());
    const RowShape shape{c.dtype, M, c.N, c.ld, c.eps, c.spec};
    const LaunchEnv env = launchEnv(c, ctx);
    RmsNormQuantInputData fresh;
    const RmsNormQuantInputData& in = caseInputs(ctx, layout, fresh,
                                                 [&] { return generateRmsNormQuantInputs(c, layout); });

    RunBuffers buf(k.info.backend, k.info.unprovided_outputs);
    RmsNormQuantArgs args;
    args.shape = shape;
    args.x = buf.input("x", in.x);
    args.w = buf.input("w", in.w);
    const QuantizedBuffers q = quantizedBuffers(buf, c, M, in.scale, poison);
    args.y = q.y;
    args.static_scale = q.static_scale;
    args.scale = q.scale;

    return runVariant(k.info, ctx, buf, "rmsnorm_quant", [&] { k.forward(args, env); });
  }
};

const bool registered = registerOp(std::make_unique<RmsNormQuantOp>());

}  // namespace
}  // namespace ulpcheck
