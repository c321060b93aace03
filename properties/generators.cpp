#include "properties/generators.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "properties/op.h"

namespace ulpcheck {

const char* tierName(Tier t) {
  switch (t) {
    case Tier::Smoke: return "smoke";
    case Tier::Default: return "default";
    case Tier::Nightly: return "nightly";
  }
  return "?";
}

int64_t maxElements(Tier t) {
  switch (t) {
    case Tier::Smoke: return int64_t{1} << 13;
    case Tier::Default: return int64_t{1} << 18;
    case Tier::Nightly: return int64_t{1} << 28;
  }
  return 0;
}

namespace gen {

namespace {
template <typename T>
rc::Gen<T> just(T v) {
  return rc::gen::just(v);
}

/// 2^k (1 + f/16) with k shrinking toward 0 and f toward 0: exact, simple values first.
rc::Gen<double> scale(std::vector<int> exponents) {
  return rc::gen::map(
      rc::gen::tuple(shrinkingElementOf<int>(std::move(exponents)), rc::gen::inRange(0, 16)),
      [](const std::tuple<int, int>& t) { return std::ldexp(1.0 + std::get<1>(t) / 16.0, std::get<0>(t)); });
}

std::vector<int> centredExponents(int lo, int hi) {  // 0, -1, 1, -2, 2, ... within [lo, hi]
  std::vector<int> out{0};
  for (int k = 1; k <= std::max(-lo, hi); ++k) {
    if (-k >= lo) out.push_back(-k);
    if (k <= hi) out.push_back(k);
  }
  return out;
}

rc::Gen<DistParams> withSigma(Dist kind, std::vector<int> exponents) {
  return rc::gen::map(scale(std::move(exponents)), [kind](double sigma) { return DistParams{kind, sigma, 0.0}; });
}
}  // namespace

rc::Gen<uint64_t> seed() {
  return [](const rc::Random& random, int) {
    const uint64_t v = rc::Random(random).next();
    return rc::shrinkable::shrinkRecur(v, [](uint64_t x) { return rc::shrink::towards<uint64_t>(x, 0); });
  };
}

rc::Gen<int64_t> columns(Tier tier) {
  // Vector widths are 4 (fp32) and 8 (fp16/bf16) elements: edges around their
  // multiples, the tail path (N % vec != 0), powers of two, primes.
  // N = 1 and 2 stay in the list below, rarer: there dx cancels completely
  // in RMSNorm (N = 1) and LayerNorm (N = 2), whose budgets then rightly
  // cannot see dx = 0 (the accuracy verdict is inconclusive by construction).
  std::vector<std::pair<size_t, rc::Gen<int64_t>>> alts = {
      {3, rc::gen::inRange<int64_t>(3, 18)},
      {4, shrinkingElementOf<int64_t>({1,    2,    3,    4,    5,    7,    8,    9,    12,   15,   16,   17,   24,  31,
                                       32,   33,   63,   64,   65,   127,  128,  129,  255,  256,  257,  511,  512, 513,
                                       1000, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 8193})},
      {2, shrinkingElementOf<int64_t>({2,   3,   5,   7,   11,   13,   19,   23,   29,   37,   61,   67,    97,
                                       131, 251, 509, 521, 1021, 1031, 2039, 2053, 4093, 4099, 8209, 12289, 16381})},
      {3, rc::gen::inRange<int64_t>(1, 4097)},
      {1, rc::gen::inRange<int64_t>(4097, 16385)},
      // Rows too wide for the CUDA kernels' registers (row_plan.h's
      // keepsRowInRegisters), which take the workspace path: fp32 past 8192
      // (8196 with 128-bit vectors), 16-bit past 16384 (16392 vectorised),
      // LayerNorm's backward past half that. Uniform N reached the 16-bit
      // path almost never, and ulpcheck's own cuda_atomic race lived there.
      {1, shrinkingElementOf<int64_t>({8193, 8196, 8200, 12289, 16385, 16392, 16400, 20000, 24576, 32768})},
  };
  if (tier == Tier::Smoke) alts.erase(alts.begin() + 3, alts.end());
  if (tier == Tier::Nightly)
    alts.push_back({2, shrinkingElementOf<int64_t>({16384, 16385, 24576, 32767, 32768, 65536, 65537, 131072})});
  return shrinkingWeightedOneOf(std::move(alts));
}

rc::Gen<int64_t> rows(Tier tier) {
  // 132 and 264 bracket one and two CTAs per SM of an H100's backward grid.
  std::vector<std::pair<size_t, rc::Gen<int64_t>>> alts = {
      {4, rc::gen::inRange<int64_t>(1, 10)},
      {3,
       shrinkingElementOf<int64_t>({1,   2,   3,   4,   7,   8,   9,   15,  16,  17,  31,  32,  33,  63,  64,  65,
                                    127, 128, 129, 131, 132, 133, 255, 256, 257, 263, 264, 265, 511, 512, 513, 1025})},
      {2, rc::gen::inRange<int64_t>(1, 1025)},
      {1, rc::gen::inRange<int64_t>(1, 65537)},
  };
  if (tier == Tier::Smoke) alts.erase(alts.begin() + 2, alts.end());
  if (tier == Tier::Nightly)
    alts.push_back({2, shrinkingElementOf<int64_t>({32768, 65535, 65536, 65537, 100003, 131072})});
  return shrinkingWeightedOneOf(std::move(alts));
}

rc::Gen<std::pair<int64_t, int64_t>> shape(Tier tier) {
  // Kernels switch dispatch paths at large M (Liger-Kernel PR #950's bf16 dW
  // path ran only for M >= 32768, which no test reached). Independent M and N
  // under the tier's element cap almost never give such M, so one draw in ten
  // pairs M at and around those thresholds with the narrow rows that let it fit.
  const int64_t cap = maxElements(tier);
  std::vector<int64_t> large_m;
  for (int64_t m : {int64_t{32768}, int64_t{32767}, int64_t{32769}, int64_t{65536}, int64_t{65537}})
    if (m <= cap) large_m.push_back(m);
  auto independent = rc::gen::tuple(rows(tier), columns(tier));
  if (large_m.empty())
    return rc::gen::map(independent, [](const std::tuple<int64_t, int64_t>& t) {
      return std::pair{std::get<0>(t), std::get<1>(t)};
    });
  auto large_batch = rc::gen::tuple(shrinkingElementOf(large_m), rc::gen::inRange<int64_t>(3, 9));
  return rc::gen::map(shrinkingWeightedOneOf<std::tuple<int64_t, int64_t>>({{9, independent}, {1, large_batch}}),
                      [](const std::tuple<int64_t, int64_t>& t) {
                        return std::pair{std::get<0>(t), std::get<1>(t)};
                      });
}

rc::Gen<DistParams> distribution() {
  // Sigma bounds keep every value finite in fp16 (validateCase).
  const auto sigmas = centredExponents(-10, 6);
  // |mean| / sigma = 2^k: 2^16 and 2^20 are rarer, since there no fp32
  // kernel knows a LayerNorm's statistics to 1/64 (the verdict is
  // inconclusive by construction) and 16-bit rows are constant.
  auto ratio = shrinkingWeightedOneOf<int>(
      {{2, shrinkingElementOf<int>({8, 4, 6, 10, 12})}, {1, shrinkingElementOf<int>({16, 20})}});
  auto large_mean = rc::gen::map(
      rc::gen::tuple(scale({10, 6, 7, 8, 9, 11, 12}), ratio, shrinkingElementOf<bool>({false, true})),
      [](const std::tuple<double, int, bool>& t) {
        const double mean = std::get<2>(t) ? -std::get<0>(t) : std::get<0>(t);
        return DistParams{Dist::LargeMean, std::ldexp(std::fabs(mean), -std::get<1>(t)), mean};
      });
  return shrinkingWeightedOneOf<DistParams>({
      {4, withSigma(Dist::Normal, sigmas)},
      {1, withSigma(Dist::ConstantRows, sigmas)},
      {1, withSigma(Dist::ZeroRows, sigmas)},
      {1, withSigma(Dist::SignedZeros, sigmas)},
      {2, large_mean},
      {2, withSigma(Dist::OutlierChannels, centredExponents(-10, 4))},
      {1, just(DistParams{Dist::Subnormal, 1.0, 0.0})},
      {1, just(DistParams{Dist::NearOverflow, 1.0, 0.0})},
  });
}

rc::Gen<CaseSpec> withEps(CaseSpec base, std::vector<float> values) {
  return rc::gen::map(shrinkingElementOf<float>(std::move(values)), [base](float eps) {
    CaseSpec c = base;
    c.eps = eps;
    return c;
  });
}

rc::Gen<CaseSpec> mostly(CaseSpec usual, CaseSpec rare) {
  return shrinkingWeightedOneOf<CaseSpec>({{7, just(std::move(usual))}, {1, just(std::move(rare))}});
}

namespace {

/// One of weighted codes, shrinking toward the first; a single one drawn as just it.
rc::Gen<SpecCode> weightedCodes(const std::vector<SpecDraw>& draws) {
  if (draws.size() == 1) return just(draws[0].code);
  std::vector<std::pair<size_t, rc::Gen<SpecCode>>> weighted;
  for (const SpecDraw& d : draws) weighted.push_back({d.weight, just(d.code)});
  return shrinkingWeightedOneOf<SpecCode>(std::move(weighted));
}

/// The values of a spec's draw slots, drawn as rc::gen::tuple draws its
/// elements: one split of the random per slot, in slot order, and shrinks
/// that exhaust the first slot's before the next's. So the same seeds draw
/// (and shrink to) the same specs as the tuple of fields drawn here before
/// fields were descriptors, and a new field's slot leaves the others' draws.
class SlotsShrinkable {
 public:
  explicit SlotsShrinkable(std::vector<rc::Shrinkable<SpecCode>> slots) : slots_(std::move(slots)) {}
  std::vector<SpecCode> value() const {
    std::vector<SpecCode> v;
    for (const auto& s : slots_) v.push_back(s.value());
    return v;
  }
  rc::Seq<rc::Shrinkable<std::vector<SpecCode>>> shrinks() const {
    std::vector<rc::Seq<rc::Shrinkable<std::vector<SpecCode>>>> per_slot;
    for (size_t i = 0; i < slots_.size(); ++i)
      per_slot.push_back(rc::seq::map(slots_[i].shrinks(), [slots = slots_, i](rc::Shrinkable<SpecCode>&& s) {
        auto shrunk = slots;
        shrunk[i] = std::move(s);
        return rc::makeShrinkable<SlotsShrinkable>(std::move(shrunk));
      }));
    return rc::seq::join(rc::seq::fromContainer(std::move(per_slot)));
  }

 private:
  std::vector<rc::Shrinkable<SpecCode>> slots_;
};

rc::Gen<std::vector<SpecCode>> drawSlots(std::vector<rc::Gen<SpecCode>> slots) {
  return rc::Gen<std::vector<SpecCode>>([slots = std::move(slots)](const rc::Random& random, int size) {
    rc::Random r = random;
    std::vector<rc::Shrinkable<SpecCode>> drawn;
    for (const auto& g : slots) drawn.push_back(g(r.split(), size));
    return rc::makeShrinkable<SlotsShrinkable>(std::move(drawn));
  });
}

}  // namespace

rc::Gen<CaseSpec> withSpec(CaseSpec base) {
  const SpecSupport& can = OpAdapter::requireKernel(base.op, base.kernel).specs;
  const OpSpecDeclaration declared = specOf(base.op);
  // Each field of the op's spec draws from the values the variant declares
  // (SpecField::draws: fp32 weights beside 16-bit activations in half the
  // cases of a variant that takes them; another rounding point, an offset,
  // statistics in the activation dtype, a bias, an fp32 residual in 1 of 4
  // where the variant also implements the default), each shrinking toward
  // the default, or toward the first the variant lists.
  std::vector<rc::Gen<SpecCode>> slots(size_t(specDrawSlots()), just(SpecCode(0)));
  for (const SpecField* f : declared.fields) {
    const std::vector<SpecCode>& codes = can.of(f->key);
    slots[size_t(f->draw_slot)] = weightedCodes(f->draws ? f->draws(codes, base.dtype) : firstMostly(codes));
  }
  return rc::gen::map(drawSlots(std::move(slots)), [base, declared](const std::vector<SpecCode>& codes) {
    CaseSpec c = base;
    for (const SpecField* f : declared.fields) c.spec.setCode(f->key, codes[size_t(f->draw_slot)]);
    // A combination the op's rules exclude (case_spec.cpp) keeps the second field's default.
    for (const SpecRule& r : declared.rules)
      if (c.spec.code(r.when).value_or(0) == r.when_code) c.spec.setCode(r.then, 0);
    return c;
  });
}

rc::Gen<CaseSpec> caseSpec(const CaseOptions& o) {
  const OpAdapter* op = findOp(o.op);
  if (!op) throw std::invalid_argument("unknown op '" + o.op + "'");
  // Every variant asked for is known before anything is drawn: the error
  // comes here, where the options are made, not at whichever draw picks it.
  for (const std::string& kernel : o.kernels) OpAdapter::requireKernel(o.op, kernel);
  const int64_t max_elements = maxElements(o.tier);
  // Row padding in elements; kAlignRows pads to a multiple of 8 elements
  // (16 bytes at 16-bit, 32 at fp32), which is what sends an N that is not a
  // multiple of the vector width down the vectorised path with a scalar tail
  // (unaligned rows take the scalar path throughout).
  constexpr int64_t kAlignRows = -1;
  auto padding = shrinkingWeightedOneOf<int64_t>(
      {{6, just<int64_t>(0)}, {2, just(kAlignRows)}, {3, shrinkingElementOf<int64_t>({1, 3, 8, 64})}});
  auto ctas = shrinkingWeightedOneOf<int>({{1, just(0)}, {1, rc::gen::inRange(1, 6)}});
  auto base = rc::gen::map(
      rc::gen::tuple(shape(o.tier), shrinkingElementOf(o.dtypes), distribution(), shrinkingElementOf(o.kernels),
                     padding, shrinkingElementOf<double>({1.0, 0.5, 2.0, 0x1p-4, 0x1p4}), ctas, seed()),
      [o, max_elements, kAlignRows](const auto& t) {
        CaseSpec c;
        c.op = o.op;
        c.N = std::get<0>(t).second;
        c.M = std::min(std::get<0>(t).first, std::max<int64_t>(1, max_elements / c.N));
        c.dtype = std::get<1>(t);
        c.x = std::get<2>(t);
        c.kernel = std::get<3>(t);
        c.ld = std::get<4>(t) == kAlignRows ? (c.N + 7) / 8 * 8 : c.N + std::get<4>(t);
        // A kernel's layout preconditions (a plugin's): what it cannot take is not generated.
        const LayoutPreconditions& pre = OpAdapter::requireKernel(c.op, c.kernel).preconditions;
        c.M = std::max(c.M, pre.min_rows);
        if (!pre.violation(c.dtype, c.M, c.N, c.ld).empty()) {
          if (!pre.col_choices.empty()) {
            c.N = pre.col_choices[size_t(c.N) % pre.col_choices.size()];
            c.ld = std::max(c.ld, c.N);
          }
          if (pre.max_cols > 0 && c.N > pre.max_cols) c.N = 1 + (c.N - 1) % pre.max_cols;
          if (pre.aligned_rows) {
            const int64_t per16 = 16 / storageBytes(c.dtype);
            if (pre.contiguous_rows && pre.col_choices.empty()) c.N = std::max<int64_t>(per16, c.N / per16 * per16);
            c.ld = (std::max(c.ld, c.N) + per16 - 1) / per16 * per16;
          }
          if (pre.contiguous_rows) c.ld = c.N;
          c.M = std::max(std::min(c.M, std::max<int64_t>(1, max_elements / c.ld)), pre.min_rows);
        }
        c.ctas = std::get<6>(t);
        c.seed = std::get<7>(t);
        return c;
      });
  return rc::gen::mapcat(base, [op](const CaseSpec& c) {
    return rc::gen::mapcat(withSpec(c), [op](const CaseSpec& d) { return op->refine(d); });
  });
}

}  // namespace gen
}  // namespace ulpcheck
