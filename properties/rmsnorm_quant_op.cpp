// The rmsnorm_quant op: runs a registered variant's forward on x, w and
// (quant=static) the scale, and asks the oracle for y_q's admissible fp8
// values and, under quant=token, the scales'.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "core/device.h"
#include "core/schedule_noise.h"
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

// An unwritten fp8 element holds E4M3's NaN (the dtype's poison); where the
// spec overflows to non-finite values that is a legal output, so a run
// that leaves any runs again poisoned with -0 (recountUnwritten).
constexpr uint32_t kSecondFp8Poison = 0x80;

const RmsNormQuantKernel& kernelOf(const CaseSpec& c) { return registeredKernel<RmsNormQuantRegistry>(c); }

/// The spec's chain, for the oracle (oracles/fp8_quant.h).
fp8_quant::QuantSpec quantSpecOf(const Spec& spec, DType activations) {
  fp8_quant::QuantSpec q;
  q.format = kFp8Format(spec);
  q.overflow = kFp8Overflow(spec);
  if (kScaledInT(spec) && activations != DType::F32) q.y_rounded_to = activations;
  const ScaleInverse inverse = kScaleInverse(spec);
  q.apply = inverse == ScaleInverse::Divide ? fp8_quant::Apply::Divide : fp8_quant::Apply::Reciprocal;
  // rcp.approx.ftz.f32 and fast-math division: within 2^-23 (PTX ISA).
  q.reciprocal_error = inverse == ScaleInverse::Approx ? 0x1p-23 : 0.0;
  return q;
}

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
    const uint32_t poison = poisonBits(quantDtype(c.spec));
    RunResult r = runOnce(c, layout, ctx, poison);
    if (r.memory.unwritten > 0 && kFp8Overflow(c.spec) == Fp8Overflow::NonFinite) {
      ExecContext again = ctx;
      again.repeats = nullptr;
      recountUnwritten(r, poison, runOnce(c, layout, again, kSecondFp8Poison), kSecondFp8Poison, "y");
    }
    return r;
  }

  std::vector<ReferenceTensor> reference(const CaseSpec& c, const ExecContext& ctx) const override {
    const RmsNormQuantKernel& k = kernelOf(c);
    const RowLayout rows = identityRows(c.M);
    RmsNormQuantInputData fresh;
    const RmsNormQuantInputData& in = caseInputs(ctx, rows, fresh, [&] { return generateRmsNormQuantInputs(c, rows); });
    const RowShape shape{c.dtype, c.M, c.N, c.ld, c.eps, c.spec};
    const AccuracyContract contract{k.info.contracts.accumulation, k.depths(shape, launchEnv(c, ctx)),
                                    k.info.contracts.column_reduction_ftz};
    const Fp8Format format = kFp8Format(c.spec);
    RmsNormQuantInputs inputs{.x = in.x,
                              .w = in.w,
                              .eps = c.eps,
                              .spec = c.spec,
                              .quant = quantSpecOf(c.spec, c.dtype),
                              .per_token = std::nullopt,
                              .static_scale = float(in.scale.value(0, 0))};
    if (kQuantScale(c.spec) != QuantScale::Static) {
      inputs.per_token = fp8_quant::PerTokenScale{.fmax = fp8MaxFinite(format), .min_scale = minTokenScale(format)};
      inputs.group_columns = scaleGroupColumns(c.spec, c.N);
    }
    ThreadPool& pool = ctx.pool ? *ctx.pool : ThreadPool::shared();
    RmsNormQuantReference ref = rmsnormQuantReference(inputs, contract, pool, ctx.oracle);
    if (inputs.per_token) return movedTensors(ref.y, ref.scale);
    return movedTensors(ref.y);
  }

  std::string describeInputs(const CaseSpec& c, const std::string& tensor, int64_t row, int64_t col) const override {
    const DType wt = weightDtype(c.dtype, c.spec);
    const int64_t group = scaleGroupColumns(c.spec, c.N);
    if (tensor == "scale")
      return fmt::format("the largest |y| of row {}, columns {}..{}", row, col * group,
                         std::min(c.N, (col + 1) * group) - 1);
    const std::string scale = group ? fmt::format(" (the scale of row {}, columns {}..)", row, col / group * group)
                                    : fmt::format(" scale={}", hexFloat(staticQuantScale(c)));
    return fmt::format("x={} w={}{}", hexFloat(sampleValue(c.x, c.dtype, c.seed, TensorStream::X, row, col)),
                       hexFloat(sampleValue(rmsNormWeightDist(c.spec), wt, c.seed, TensorStream::Weight, 0, col)),
                       scale);
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
    args.y = buf.output("y", quantDtype(c.spec), M, c.N, c.ld, true, poison);
    if (kQuantScale(c.spec) == QuantScale::Static)
      args.static_scale = static_cast<const float*>(buf.input("static_scale", in.scale));
    else
      args.scale = static_cast<float*>(
          buf.output("scale", DType::F32, M, scaleGroups(c.spec, c.N), scaleGroups(c.spec, c.N), true));

    // Started after the inputs are in place, so the load overlaps the launch.
    ScheduleNoise noise(ctx.perturb_schedule && !k.info.remote, k.info.backend, ctx.sm_count);
    const auto t0 = std::chrono::steady_clock::now();
    k.forward(args, env);
    const std::string unchecked = k.info.backend == Backend::Cuda ? synchronizeVariant("rmsnorm_quant") : "";
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    RunResult r = buf.collect(ctx.repeats);
    r.memory.unchecked_launch = unchecked;
    r.seconds = seconds;
    return r;
  }
};

const bool registered = registerOp(std::make_unique<RmsNormQuantOp>());

}  // namespace
}  // namespace ulpcheck
