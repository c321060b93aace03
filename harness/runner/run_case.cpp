#include "harness/runner/run_case.h"

#include <algorithm>
#include <new>
#include <stdexcept>

#include <fmt/format.h>

#include "core/buffer.h"
#include "core/memory_limit.h"
#include "kernels/plugin/remote.h"

namespace ulpcheck {

const KernelInfo& kernelOf(const CaseSpec& c) { return OpAdapter::requireKernel(c.op, c.kernel); }

std::string exceedsHostMemory(const CaseSpec& spec, const ExecContext& exec) {
  const MemoryLimit& limit = hostMemoryLimit();
  const OpAdapter* op = findOp(spec.op);
  if (!limit.bytes || !op) return "";
  constexpr double kUsableFraction = 0.9;
  const uint64_t need = op->peakHostBytes(spec, exec);
  if (double(need) <= kUsableFraction * double(limit.bytes)) return "";
  return fmt::format("does not fit in host memory: the case needs about {} at its peak, this process may use {} ({}; "
                     "ULPCHECK_MAX_MEMORY sets it)",
                     formatBytes(need), formatBytes(limit.bytes), limit.source);
}

Outcome checkOne(const Property& p, const CaseSpec& spec, const ExecContext& exec, CaseContext* shared) {
  if (std::string why = exceedsHostMemory(spec, exec); !why.empty()) {
    Outcome o;
    o.verdict = Verdict::Skip;
    o.summary = std::move(why);
    return o;
  }
  try {
    if (shared) return p.check(*shared);
    CaseContext ctx(spec, *findOp(spec.op), exec);
    return p.check(ctx);
  } catch (const CudaError& e) {
    if (e.sticky) throw;
    Outcome o;
    o.verdict = Verdict::Fail;
    o.summary = fmt::format("CUDA error: {}", e.what());
    return o;
  } catch (const KernelFailure& e) {  // the kernel returned an error, or crashed or hung in its worker
    Outcome o;
    o.verdict = Verdict::Fail;
    o.fault = true;
    o.hang = e.hang;
    o.summary = e.what();
    return o;
  } catch (const CaseNotRunnableHere& e) {
    Outcome o;
    o.verdict = Verdict::Skip;
    o.summary = e.what();
    return o;
  } catch (const OutOfMemory& e) {
    Outcome o;
    o.verdict = Verdict::Skip;
    o.summary = fmt::format("does not fit in memory: {}", e.what());
    return o;
  } catch (const std::bad_alloc&) {
    Outcome o;
    o.verdict = Verdict::Skip;
    o.summary = "does not fit in host memory";
    return o;
  }
}

std::vector<ReplayResult> runCase(const CaseSpec& spec, const std::vector<std::string>& properties,
                                  const ExecContext& exec, int repeats,
                                  const std::function<void(const ReplayResult&)>& done) {
  const OpAdapter* op = findOp(spec.op);
  if (!op) throw CaseParseError(fmt::format("unknown op '{}'", spec.op));
  for (const auto& name : properties)
    if (!findProperty(name))
      throw std::invalid_argument(fmt::format("unknown property '{}' (see `ulpcheck list`)", name));
  CaseContext ctx(spec, *op, exec);
  if (const std::string why = ctx.kernel().preconditions.violation(spec.dtype, spec.M, spec.N, spec.ld); !why.empty())
    throw CaseNotRunnableHere(fmt::format("{} {}: the case has N={} ld={}", spec.kernel, why, spec.N, spec.ld));
  if (const std::string why = ctx.kernel().specs.violation(spec.op, spec.dtype, spec.spec); !why.empty())
    throw CaseNotRunnableHere(
        fmt::format("{} {}: the case's spec is {}", spec.kernel, why, specLabel(spec.op, spec.dtype, spec.spec)));
  std::vector<ReplayResult> out;
  for (const Property& p : propertyRegistry()) {
    const bool named = std::find(properties.begin(), properties.end(), p.name) != properties.end();
    const bool applies = p.appliesTo(*op, ctx.kernel()) && p.appliesTo(spec);
    if (applies && (properties.empty() || named)) out.push_back({p.name, {}, 0, 0, true});
    if (!applies && named) {  // said, not run
      ReplayResult r{p.name, {}, 0, 0, false};
      r.outcome.verdict = Verdict::Skip;
      r.outcome.summary = fmt::format("does not apply to {} on this case", spec.kernel);
      out.push_back(std::move(r));
    }
  }
  const int runs = std::max(repeats, 1);
  for (int k = 0; k < runs; ++k) {
    ctx.forgetRuns();
    // After a fault (a crash, a hang, an error return) the run's other
    // properties are not checked: they would fault the same way, and a hang
    // would cost each of them --case-timeout.
    std::string faulted_in;
    for (ReplayResult& r : out) {
      if (r.applies && !faulted_in.empty() && r.runs == 0) {
        r.outcome.verdict = Verdict::Skip;
        r.outcome.summary = fmt::format("not run: the kernel faulted on this case in {}", faulted_in);
      } else if (r.applies && faulted_in.empty()) {
        Outcome o = checkOne(*findProperty(r.property), spec, exec, &ctx);
        ++r.runs;
        if (o.fault) faulted_in = r.property;
        r.hung += o.hang;
        if (o.verdict == Verdict::Fail && r.failed++) {  // keep the first failure
        } else if (o.verdict == Verdict::Fail || !r.failed) {
          r.outcome = std::move(o);
        }
      }
      if (k == runs - 1 && done) done(r);  // final: said as soon as it is known
    }
  }
  return out;
}

}  // namespace ulpcheck
