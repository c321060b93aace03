// Value distributions of the inputs, as pure functions of (seed, tensor, row,
// column). Only exactly rounded double operations (integer sums, one multiply,
// one add, each written with explicit round-to-nearest on the GPU so no FMA is
// contracted) are used, so host and GPU produce identical bits.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/dtype.h"
#include "core/rng.h"

namespace ulpcheck {

/// Value regimes that break norm kernels. Order matters: shrinking moves a
/// failing case toward the first (simplest) regimes.
enum class Dist : uint8_t {
  Normal = 0,       // mean + sigma * z
  ConstantRows,     // every element of a row equal (variance 0)
  ZeroRows,         // about half the rows (never row 0) all +0, the rest normal
  SignedZeros,      // half the elements +0 or -0, the rest normal
  LargeMean,        // mean >> sigma: catastrophic cancellation in x - mean
  OutlierChannels,  // one column in 32 scaled by 2^8
  Subnormal,        // every element a random subnormal of the format
  NearOverflow,     // |x| in [2^14, 65504]: x^2 overflows fp16
  kCount
};

const char* distName(Dist d);
std::optional<Dist> parseDist(std::string_view name);

struct DistParams {
  Dist kind = Dist::Normal;
  double sigma = 1.0;  // both exact doubles; the case string carries them in hex
  double mean = 0.0;
};

namespace detail {
#if defined(__CUDA_ARCH__)
__device__ inline double mulRn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline double addRn(double a, double b) { return __dadd_rn(a, b); }
#else
inline double mulRn(double a, double b) { return a * b; }  // built with -ffp-contract=off
inline double addRn(double a, double b) { return a + b; }
#endif

/// Approximately standard normal: the Irwin-Hall sum of four 32-bit uniforms,
/// centred and scaled to unit variance (|z| < 3.47). Exact up to the last multiply.
ULPCHECK_HD inline double standardNormalish(uint64_t h1, uint64_t h2) {
  const uint64_t s = (h1 & 0xffffffffULL) + (h1 >> 32) + (h2 & 0xffffffffULL) + (h2 >> 32);
  const double centred = static_cast<double>(static_cast<int64_t>(s) - (int64_t{1} << 33));  // exact
  // Var(sum of 4 U(0, 2^32)) = 4 * 2^64 / 12, so z = centred * sqrt(3) / 2^32.
  return mulRn(centred, 0x1.bb67ae8584caap-32);
}
}  // namespace detail

/// Stream ids per input tensor, so each tensor draws independent values. Rank
/// r of a multi-rank op draws its partial input from stream RankPartial + r.
enum class TensorStream : uint64_t {
  X = 1,
  Weight = 2,
  GradOut = 3,
  Residual = 4,
  Bias = 5,
  ResidualGrad = 6,  // the gradient reaching a fused add's residual_out
  QuantScale = 7,    // a quantizing norm's static scale
  RankPartial = 32,
  RowFeature = 100,
  ColFeature = 101
};

/// The value (already rounded to `t`) of element (row, col) of a tensor.
ULPCHECK_HD inline double sampleValue(const DistParams& p, DType t, uint64_t seed, TensorStream stream, uint64_t row,
                                      uint64_t col) {
  const uint64_t s = static_cast<uint64_t>(stream);
  const uint64_t h1 = counterHash2(seed, 2 * s, row, col);
  const uint64_t h2 = counterHash2(seed, 2 * s + 1, row, col);
  const double z = detail::standardNormalish(h1, h2);
  const double normal = detail::addRn(p.mean, detail::mulRn(p.sigma, z));
  // Row and column features are hashed only by the regimes that use them.
  const auto row_bits = [&] {
    return counterHash(seed, static_cast<uint64_t>(TensorStream::RowFeature) + 16 * s, row);
  };
  const auto col_bits = [&] {
    return counterHash(seed, static_cast<uint64_t>(TensorStream::ColFeature) + 16 * s, col);
  };
  double raw = normal;
  switch (p.kind) {
    case Dist::Normal:
    case Dist::LargeMean: break;
    case Dist::ConstantRows: {
      const uint64_t r2 = counterHash(seed, 2 * s + 7, row);
      raw = detail::addRn(p.mean, detail::mulRn(p.sigma, detail::standardNormalish(row_bits(), r2)));
      break;
    }
    case Dist::ZeroRows: {
      // A zero row is a padding token: zero in every tensor of the op (the
      // choice ignores the stream), and row 0 never is, so a case always has
      // a row that exercises the arithmetic.
      const uint64_t token_bits = counterHash(seed, static_cast<uint64_t>(TensorStream::RowFeature), row);
      raw = (row == 0 || (token_bits & 1)) ? normal : 0.0;
      break;
    }
    case Dist::SignedZeros: raw = (h1 & 1) ? normal : ((h2 & 1) ? -0.0 : 0.0); break;
    case Dist::OutlierChannels: raw = (col_bits() % 32 == 0) ? detail::mulRn(normal, 256.0) : normal; break;
    case Dist::Subnormal: {
      const int mant_bits = formatOf(t).precision - 1;
      const uint64_t fraction = 1 + (h1 % ((uint64_t{1} << mant_bits) - 1));  // nonzero
      const double v = std::ldexp(static_cast<double>(fraction), formatOf(t).emin - mant_bits);
      raw = (h2 & 1) ? -v : v;
      break;
    }
    case Dist::NearOverflow: {
      const double u = std::ldexp(static_cast<double>(h1 >> 11), -53);  // [0, 1), exact
      const double v = detail::addRn(16384.0, detail::mulRn(u, 65504.0 - 16384.0));
      raw = (h2 & 1) ? -v : v;
      break;
    }
    default: break;
  }
  return roundToFormat(t, raw);
}

}  // namespace ulpcheck
