// Oracle throughput: reference elements per second of the RMSNorm oracle,
// the certified fast path against MPFR only, on the same inputs in one run,
// with the share of elements the fast path sent back to MPFR.
//   oracle_bench [--threads T] [--spec KEY=VALUE ...] [--fast-only] MxN [MxN ...]
// (--fast-only: no MPFR run, for shapes where it would take minutes.)
// Inputs are a case's (properties/rmsnorm_inputs.h): dtype bf16 unless a
// --spec says otherwise (e.g. --spec dtype=fp16 --spec wdtype=fp32).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "harness/core/case_spec.h"
#include "harness/core/parallel.h"
#include "oracles/rmsnorm.h"
#include "properties/rmsnorm_inputs.h"

using namespace ulpcheck;

namespace {

double seconds(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) try {
  unsigned threads = 0;
  bool fast_only = false;
  std::string extra;
  std::vector<std::pair<long, long>> shapes;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--threads" && a + 1 < argc) {
      threads = unsigned(std::stoul(argv[++a]));
    } else if (arg == "--fast-only") {
      fast_only = true;
    } else if (arg == "--spec" && a + 1 < argc) {
      extra += std::string(" ") + argv[++a];
    } else {
      long M = 0, N = 0;
      if (std::sscanf(arg.c_str(), "%ldx%ld", &M, &N) != 2 || M <= 0 || N <= 0) {
        std::fprintf(stderr, "oracle_bench: '%s' is not MxN (usage: oracle_bench [--threads T] [--spec K=V] MxN ...)\n",
                     arg.c_str());
        return 2;
      }
      shapes.emplace_back(M, N);
    }
  }
  if (shapes.empty()) shapes = {{256, 4096}, {2048, 4096}, {64, 65536}};
  ThreadPool pool(threads);
  fmt::print("# RMSNorm oracle, {} threads; elements = y + rstd + dx + dw\n", pool.size());
  fmt::print("{:>14} {:>12} {:>14} {:>14} {:>8} {:>12}  {}\n", "shape", "elements", "mpfr elem/s", "fast elem/s",
             "speedup", "fell back", "case");
  for (const auto& [M, N] : shapes) {
    const bool dtype_given = extra.find(" dtype=") != std::string::npos;
    const std::string text =
        fmt::format("op=rmsnorm kernel=host_separate M={} N={} seed=0x5eed{}{}", M, N, dtype_given ? "" : " dtype=bf16", extra);
    const CaseSpec c = parseCaseString(text);
    const RmsNormInputData in = generateRmsNormInputs(c, identityRows(c.M));
    const RmsNormInputs inputs{in.x, in.w, in.dy, c.eps, c.spec, in.b ? &*in.b : nullptr};
    const AccuracyContract contract{DType::F32, ReductionDepths{c.N, c.M}};
    FastOracleCounts counts;
    auto t0 = std::chrono::steady_clock::now();
    const RmsNormReference fast = rmsnormReferenceFast(inputs, contract, pool, &counts);
    const double t_fast = seconds(t0);
    double t_mpfr = NAN;
    if (!fast_only) {
      t0 = std::chrono::steady_clock::now();
      const RmsNormReference slow = rmsnormReferenceMpfr(inputs, contract, pool);
      t_mpfr = seconds(t0);
      auditReferences("rmsnorm", {&slow.y, &slow.rstd, &slow.dx, &slow.dw}, {&fast.y, &fast.rstd, &fast.dx, &fast.dw});
    }
    const double elements = double(M) * double(2 * N + 1) + double(N);
    fmt::print("{:>14} {:>12.0f} {:>14.3g} {:>14.3g} {:>7.1f}x {:>12}  {}\n", fmt::format("{}x{}", M, N), elements,
               elements / t_mpfr, elements / t_fast, t_mpfr / t_fast,
               fmt::format("{}", counts.fell_back.load() + counts.mpfr_only.load()), toCaseString(c));
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "oracle_bench: %s\n", e.what());
  return 1;
}
