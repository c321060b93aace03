// RapidCheck generators of CaseSpecs. Shapes are weighted toward the edges
// where kernels break (1, odd, prime, vector width +- 1, powers of two, the
// SM count), value distributions toward the regimes that break norms. Every
// choice shrinks toward its first (simplest) alternative, so a failure
// shrinks to a small shape, a simple distribution, fp32.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <rapidcheck.h>

#include "core/case_spec.h"

namespace ulpcheck {

enum class Tier {
  Smoke,    // tiny shapes: the ctest default on CPU
  Default,  // up to 2^18 elements per case: the default `ulpcheck run`
  Nightly,  // M up to 131072 and N up to 131072
};
const char* tierName(Tier t);
int64_t maxElements(Tier t);

namespace gen {

/// Picks an element uniformly; shrinks toward the first.
template <typename T>
rc::Gen<T> shrinkingElementOf(std::vector<T> values) {
  return [values](const rc::Random& random, int) {
    const size_t i = static_cast<size_t>(rc::Random(random).next() % values.size());
    return rc::shrinkable::map(
        rc::shrinkable::shrinkRecur(i, [](size_t x) { return rc::shrink::towards<size_t>(x, 0); }),
        [values](size_t k) { return values[k]; });
  };
}

/// Picks an alternative by weight; shrinks toward the first alternative, then
/// within the chosen one. (rc::gen::weightedOneOf never shrinks the choice.)
template <typename T>
rc::Gen<T> shrinkingWeightedOneOf(std::vector<std::pair<size_t, rc::Gen<T>>> alternatives) {
  size_t total = 0;
  for (const auto& a : alternatives) total += a.first;
  rc::Gen<size_t> index = [alternatives, total](const rc::Random& random, int) {
    size_t pick = static_cast<size_t>(rc::Random(random).next() % total), i = 0;
    while (pick >= alternatives[i].first) pick -= alternatives[i++].first;
    return rc::shrinkable::shrinkRecur(i, [](size_t x) { return rc::shrink::towards<size_t>(x, 0); });
  };
  return rc::gen::mapcat(index, [alternatives](size_t i) { return alternatives[i].second; });
}

/// A full-range 64-bit seed that shrinks toward 0.
rc::Gen<uint64_t> seed();
rc::Gen<int64_t> columns(Tier tier);
rc::Gen<int64_t> rows(Tier tier);
/// (M, N): rows and columns drawn independently, or now and then a large-M
/// dispatch threshold with rows narrow enough to fit the tier.
rc::Gen<std::pair<int64_t, int64_t>> shape(Tier tier);
rc::Gen<DistParams> distribution();

struct CaseOptions {
  std::string op = "rmsnorm";
  std::vector<std::string> kernels;  // at least one
  std::vector<DType> dtypes{DType::F32, DType::F16, DType::BF16};
  Tier tier = Tier::Default;
};

/// `base` with eps drawn from `values` (shrinking toward the first).
rc::Gen<CaseSpec> withEps(CaseSpec base, std::vector<float> values);

/// `base` with a spec (weight dtype, rounding, offset) drawn from those its
/// kernel implements, shrinking toward the plain spec.
rc::Gen<CaseSpec> withSpec(CaseSpec base);

/// `usual` seven times in eight, `rare` otherwise (shrinking toward usual):
/// how an op spends few cases on a regime whose accuracy verdict is
/// inconclusive by construction, without leaving it untested.
rc::Gen<CaseSpec> mostly(CaseSpec usual, CaseSpec rare);

/// Cases of one op over the given kernels and dtypes (each case valid for its
/// dtype: validateCase holds).
rc::Gen<CaseSpec> caseSpec(const CaseOptions& options);

}  // namespace gen
}  // namespace ulpcheck
