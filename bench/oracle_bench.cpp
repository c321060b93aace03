// Oracle throughput: reference elements per second of the RMSNorm or
// LayerNorm oracle, the certified fast path against MPFR only, on the same
// inputs in one run (their references compared bitwise), with the share of
// elements the fast path sent back to MPFR.
//   oracle_bench [--op rmsnorm|layernorm] [--threads T] [--spec KEY=VALUE ...] [--fast-only] MxN [MxN ...]
// (--fast-only: no MPFR run, for shapes where it would take minutes.)
// Inputs are a case's (properties/rmsnorm_inputs.h, layernorm_inputs.h):
// dtype bf16 unless a --spec says otherwise (e.g. --spec dtype=fp16 --spec wdtype=fp32).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/buffer.h"  // poisonBits, used by layernorm_inputs.h
#include "core/case_spec.h"
#include "core/parallel.h"
#include "oracles/layernorm.h"
#include "oracles/rmsnorm.h"
#include "properties/layernorm_inputs.h"
#include "properties/rmsnorm_inputs.h"

using namespace ulpcheck;

namespace {

double seconds(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// One timed pass of the oracle: seconds, and (elements, fell back) counts.
struct Timing {
  double fast = NAN, mpfr = NAN;
  double elements = 0;
  int64_t fell_back = 0;
};

/// Times fast(&counts), then (unless fast_only) mpfr(), and compares their
/// references bitwise (tensors(reference) lists them).
template <typename Fast, typename Mpfr, typename Tensors>
Timing timeBoth(const char* op, bool fast_only, Fast fast, Mpfr mpfr, Tensors tensors) {
  FastOracleCounts counts;
  Timing t;
  auto t0 = std::chrono::steady_clock::now();
  const auto fast_ref = fast(&counts);
  t.fast = seconds(t0);
  if (!fast_only) {
    t0 = std::chrono::steady_clock::now();
    const auto mpfr_ref = mpfr();
    t.mpfr = seconds(t0);
    auditReferences(op, tensors(mpfr_ref), tensors(fast_ref));
  }
  t.fell_back = counts.fell_back.load() + counts.mpfr_only.load();
  return t;
}

Timing timeRmsNorm(const CaseSpec& c, ThreadPool& pool, bool fast_only) {
  const RmsNormInputData in = generateRmsNormInputs(c, identityRows(c.M));
  const RmsNormInputs inputs{in.x, in.w, in.dy, c.eps, c.spec, in.b ? &*in.b : nullptr};
  const AccuracyContract contract{DType::F32, ReductionDepths{c.N, c.M}};
  Timing t = timeBoth(
      "rmsnorm", fast_only, [&](FastOracleCounts* n) { return rmsnormReferenceFast(inputs, contract, pool, n); },
      [&] { return rmsnormReferenceMpfr(inputs, contract, pool); },
      [](const RmsNormReference& r) {
        return std::vector<const ReferenceTensor*>{&r.y, &r.rstd, &r.dx, &r.dw};
      });
  t.elements = double(c.M) * double(2 * c.N + 1) + double(c.N);
  return t;
}

Timing timeLayerNorm(const CaseSpec& c, ThreadPool& pool, bool fast_only) {
  const LayerNormInputData in = generateLayerNormInputs(c, identityRows(c.M));
  const LayerNormInputs inputs{in.x, in.gamma, in.beta, in.dy, c.eps, c.spec};
  // ulpcheck's own kernels' contract: a rounded-quotient mean, two-pass statistics.
  AccuracyContract contract{DType::F32, ReductionDepths{c.N, c.M}};
  contract.depths.mean_is_rounded_quotient = contract.depths.two_pass_statistics = true;
  Timing t = timeBoth(
      "layernorm", fast_only, [&](FastOracleCounts* n) { return layernormReferenceFast(inputs, contract, pool, n); },
      [&] { return layernormReferenceMpfr(inputs, contract, pool); },
      [](const LayerNormReference& r) { return layernormTensors(r); });
  t.elements = double(c.M) * double(2 * c.N + 2) + 2.0 * double(c.N);
  return t;
}

}  // namespace

int main(int argc, char** argv) try {
  unsigned threads = 0;
  bool fast_only = false;
  std::string op = "rmsnorm";
  std::string extra;
  std::vector<std::pair<long, long>> shapes;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--op" && a + 1 < argc) {
      op = argv[++a];
      if (op != "rmsnorm" && op != "layernorm") {
        std::fprintf(stderr, "oracle_bench: --op takes rmsnorm or layernorm, not '%s'\n", op.c_str());
        return 2;
      }
    } else if (arg == "--threads" && a + 1 < argc) {
      threads = unsigned(std::stoul(argv[++a]));
    } else if (arg == "--fast-only") {
      fast_only = true;
    } else if (arg == "--spec" && a + 1 < argc) {
      extra += std::string(" ") + argv[++a];
    } else {
      long M = 0, N = 0;
      if (std::sscanf(arg.c_str(), "%ldx%ld", &M, &N) != 2 || M <= 0 || N <= 0) {
        std::fprintf(stderr,
                     "oracle_bench: '%s' is not MxN (usage: oracle_bench [--op rmsnorm|layernorm] [--threads T] "
                     "[--spec K=V] [--fast-only] MxN ...)\n",
                     arg.c_str());
        return 2;
      }
      shapes.emplace_back(M, N);
    }
  }
  if (shapes.empty()) shapes = {{256, 4096}, {2048, 4096}, {64, 65536}};
  ThreadPool pool(threads);
  fmt::print("# {} oracle, {} threads; elements = {}\n", op, pool.size(),
             op == "rmsnorm" ? "y + rstd + dx + dw" : "y + mean + rstd + dx + dgamma + dbeta");
  fmt::print("{:>14} {:>12} {:>14} {:>14} {:>8} {:>12}  {}\n", "shape", "elements", "mpfr elem/s", "fast elem/s",
             "speedup", "fell back", "case");
  for (const auto& [M, N] : shapes) {
    const bool dtype_given = extra.find(" dtype=") != std::string::npos;
    const std::string kernel = op == "rmsnorm" ? "host_separate" : "host_twopass";
    const std::string text = fmt::format("op={} kernel={} M={} N={} seed=0x5eed{}{}", op, kernel, M, N,
                                         dtype_given ? "" : " dtype=bf16", extra);
    const CaseSpec c = parseCaseString(text);
    const Timing t = op == "rmsnorm" ? timeRmsNorm(c, pool, fast_only) : timeLayerNorm(c, pool, fast_only);
    fmt::print("{:>14} {:>12.0f} {:>14.3g} {:>14.3g} {:>7.1f}x {:>12}  {}\n", fmt::format("{}x{}", M, N), t.elements,
               t.elements / t.mpfr, t.elements / t.fast, t.mpfr / t.fast, fmt::format("{}", t.fell_back),
               toCaseString(c));
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "oracle_bench: %s\n", e.what());
  return 1;
}
