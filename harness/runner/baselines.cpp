#include "harness/runner/baselines.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "core/datagen.h"
#include "core/device.h"

namespace ulpcheck {

namespace {

// ---------------------------------------------------------------------------
// The suites' fixed cases: shapes of their parametrisations, randn inputs
// (Normal(0, 1) here), one seed: a suite runs the same cases every time.

CaseSpec randnCase(const OpAdapter& op, DType t, int64_t M, int64_t N) {
  CaseSpec c;
  c.op = op.name();
  c.dtype = t;
  c.M = M;
  c.N = N;
  c.ld = N;
  c.eps = op.testSuiteEps();
  c.x = DistParams{Dist::Normal, 1.0, 0.0};
  c.seed = 0;
  c.ranks = op.multiRank() ? 2 : 1;
  return c;
}

std::vector<CaseSpec> grid(const OpAdapter& op, std::initializer_list<DType> dtypes,
                           std::initializer_list<std::pair<int64_t, int64_t>> shapes) {
  std::vector<CaseSpec> out;
  for (DType t : dtypes)
    for (auto [M, N] : shapes) out.push_back(randnCase(op, t, M, N));
  return out;
}

constexpr std::initializer_list<DType> kAll = {DType::F32, DType::F16, DType::BF16};

// PyTorch's own norm tests (OpInfo samples): small shapes, every dtype.
std::vector<CaseSpec> torchCases(const OpAdapter& op) { return grid(op, kAll, {{5, 5}, {3, 64}, {64, 1024}}); }

// quack's norm tests: a few odd token counts against hidden sizes.
std::vector<CaseSpec> quackCases(const OpAdapter& op) {
  return grid(op, kAll, {{1, 192}, {37, 192}, {199, 192}, {1, 4096}, {37, 4096}});
}

// TensorRT-LLM's norm and allreduce-fusion tests: decode-sized batches at hidden 4096.
std::vector<CaseSpec> trtllmCases(const OpAdapter& op) {
  return grid(op, {DType::F16, DType::BF16}, {{1, 4096}, {16, 4096}, {128, 4096}});
}

// FlashInfer's allreduce-fusion test: bf16, token counts at hidden 4096.
std::vector<CaseSpec> flashinferCases(const OpAdapter& op) {
  return grid(op, {DType::BF16}, {{1, 4096}, {16, 4096}, {128, 4096}});
}

// FlashInfer's test_norm.py for its quantizing norms (rmsnorm_quant,
// fused_add_rmsnorm_quant): 16-bit activations, batches against hidden sizes.
std::vector<CaseSpec> flashinferQuantCases(const OpAdapter& op) {
  return grid(op, {DType::F16, DType::BF16}, {{1, 111}, {19, 1024}, {99, 4096}});
}

// ---------------------------------------------------------------------------
// The suites' rules, element by element against the reference.

struct Tolerance {
  double atol, rtol;
};

/// torch.isclose with equal_nan=False: NaN is never close; equal infinities are.
bool isClose(double got, double ref, Tolerance tol) {
  if (std::isnan(got) || std::isnan(ref)) return false;
  if (std::isinf(got) || std::isinf(ref)) return got == ref;
  return std::fabs(got - ref) <= tol.atol + tol.rtol * std::fabs(ref);
}

/// Every element close (assert_close / allclose); names the first that is not.
bool allClose(const OutputTensor& got, const ReferenceTensor& ref, Tolerance tol, std::string& why) {
  for (int64_t r = 0; r < ref.rows; ++r)
    for (int64_t c = 0; c < ref.cols; ++c) {
      const double g = got.value(r, c), want = ref.correctlyRounded(r * ref.cols + c);
      if (!isClose(g, want, tol)) {
        why = fmt::format("{}[{},{}] = {} vs {} (atol {:g}, rtol {:g})", ref.name, r, c, g, want, tol.atol, tol.rtol);
        return false;
      }
    }
  return true;
}

Tolerance torchDefaults(DType t) {
  switch (t) {
    case DType::F32: return {1e-5, 1.3e-6};
    case DType::F16: return {1e-5, 1e-3};
    case DType::BF16: return {1e-5, 1.6e-2};
    case DType::E4M3:
    case DType::E5M2: break;  // rmsnorm_quant's FP8 is tested by FlashInfer's own rule (flashinfer_quant)
  }
  throw std::invalid_argument(std::string("torch_assert_close: no default tolerance for ") + dtypeName(t));
}

bool torchAssertClose(const OutputTensor& got, const ReferenceTensor& ref, std::string& why) {
  return allClose(got, ref, torchDefaults(ref.dtype), why);
}

// quack: assert_close with a per-dtype atol (and rtol 1e-3) against an fp32 reference.
bool quackAtol(const OutputTensor& got, const ReferenceTensor& ref, std::string& why) {
  const double atol = ref.dtype == DType::BF16 ? 1e-1 : ref.dtype == DType::F16 ? 1e-2 : 1e-4;
  return allClose(got, ref, {atol, 1e-3}, why);
}

// TensorRT-LLM's check_accuracy: at least 99% of elements within
// atol 0.05 + rtol 0.15; its `diff > tol` comparison lets NaN through.
bool trtllmCheckAccuracy(const OutputTensor& got, const ReferenceTensor& ref, std::string& why) {
  int64_t bad = 0;
  const int64_t n = ref.rows * ref.cols;
  for (int64_t r = 0; r < ref.rows; ++r)
    for (int64_t c = 0; c < ref.cols; ++c) {
      const double g = got.value(r, c), want = ref.correctlyRounded(r * ref.cols + c);
      bad += std::fabs(g - want) > 0.05 + 0.15 * std::fabs(want);  // false for NaN
    }
  if (double(bad) > 0.01 * double(n)) {
    why = fmt::format("{}: {} of {} elements outside atol 0.05 + rtol 0.15 (more than 1%)", ref.name, bad, n);
    return false;
  }
  return true;
}

// FlashInfer's allreduce-fusion test: allclose with atol 0.8, rtol 1e-2 in bf16.
bool flashinferAllclose(const OutputTensor& got, const ReferenceTensor& ref, std::string& why) {
  return allClose(got, ref, {0.8, 1e-2}, why);
}

// FlashInfer's rmsnorm_quant test: y_q.float() allclose to the reference's
// with rtol 1 and atol 1 (an all-zero output passes wherever |ref| <= 1 +
// |ref|, that is everywhere; only NaN, Inf or a sign-and-size error fails).
bool flashinferQuantAllclose(const OutputTensor& got, const ReferenceTensor& ref, std::string& why) {
  return allClose(got, ref, {1.0, 1.0}, why);
}

}  // namespace

const std::vector<Baseline>& baselines() {
  static const std::vector<Baseline> all = {
      {"torch_assert_close", "torch.testing.assert_close defaults (fp32 1.3e-6/1e-5, fp16 1e-3/1e-5, bf16 1.6e-2/1e-5)",
       torchCases, torchAssertClose},
      {"quack_atol", "quack: per-dtype atol (bf16 1e-1, fp16 1e-2, fp32 1e-4), rtol 1e-3", quackCases, quackAtol},
      {"trtllm_check_accuracy", "TensorRT-LLM check_accuracy: atol 0.05, rtol 0.15, 99% of elements, NaN passes",
       trtllmCases, trtllmCheckAccuracy},
      {"flashinfer_ar_fusion", "FlashInfer allreduce fusion, bf16: allclose atol 8e-1, rtol 1e-2", flashinferCases,
       flashinferAllclose},
      {"flashinfer_quant", "FlashInfer rmsnorm_quant / fused_add_rmsnorm_quant: allclose atol 1, rtol 1",
       flashinferQuantCases, flashinferQuantAllclose},
  };
  return all;
}

std::vector<CaseSpec> baselineCases(const Baseline& b, const OpAdapter& op) {
  const std::vector<std::string> suites = op.baselineSuites();
  if (std::find(suites.begin(), suites.end(), b.name) == suites.end()) return {};
  return b.cases(op);
}

BaselineVerdict runBaseline(const Baseline& b, const KernelInfo& kernel, const ExecContext& exec) {
  BaselineVerdict v;
  const OpAdapter* op = findOp(kernel.op);
  if (!op) return v;
  for (CaseSpec c : baselineCases(b, *op)) {
    if (!kernel.supports(c.dtype)) continue;
    c.kernel = kernel.name;
    v.applies = true;
    try {
      const RunResult run = op->run(c, identityRows(c.M), exec);
      ExecContext whole = exec;  // the suites' rules read the reference's arrays: held, never streamed
      whole.max_held_reference_bytes = UINT64_MAX;
      for (const ReferenceTensor& ref : op->reference(c, whole)) {
        // As the properties judge (CaseContext::reference): only the outputs
        // the variant produces (a Python RMSNorm may save no rstd).
        if (!kernel.provides(ref.name)) continue;
        const OutputTensor* got = run.find(ref.name);
        std::string why = got ? "" : fmt::format("no output '{}'", ref.name);
        if (!got || !b.accepts(*got, ref, why)) {
          v.caught = true;
          v.detail = fmt::format("{}: {}", toCaseString(c), why);
          return v;
        }
      }
    } catch (const CaseNotRunnableHere&) {
      continue;
    } catch (const CudaError& e) {
      if (e.sticky) throw;  // the GPU context is gone: the matrix run ends
      v.caught = true;
      v.detail = fmt::format("{}: {}", toCaseString(c), e.what());
      return v;
    } catch (const std::exception& e) {  // the suite's test would have errored: caught
      v.caught = true;
      v.detail = fmt::format("{}: {}", toCaseString(c), e.what());
      return v;
    }
  }
  v.detail = v.applies ? "every case within tolerance" : "the suite has no case for this op";
  return v;
}

}  // namespace ulpcheck
