// Every tolerance constant of the accuracy contract, in one table, each with
// the reason it has its value. Asserts never carry literal tolerances.
#pragma once

namespace ulpcheck::tolerance {

// Safety factor K of |got - exact| <= 0.5 ulp_T + K (u_acc S + eta G): the
// per-element bounds are first-order (products of two u terms dropped, each
// below 2^-20 of the bound for depths under 2^20); K = 2 covers them with room.
inline constexpr double kBudgetSafety = 2.0;

// Relative error of the device's rsqrtf: at most 2 ulp (CUDA C Programming
// Guide, table of single-precision maximum ulp errors) = 4 u for u = 2^-24.
inline constexpr double kRsqrtUnits = 4.0;

// Underflow: a product that lands in the subnormal range carries an absolute
// error of at most half the accumulation format's smallest subnormal
// (eta = 2^-150 for fp32), which relative bounds cannot express.
inline constexpr double kUnderflowHalfUlps = 0.5;

// The oracle's own error, relative to the budget: it works at 160 bits (dW
// accumulators 256), so its results are within 2^-120 of the exact values; a
// check that the oracle error stays under 2^-100 of every budget guards this.
inline constexpr int kOraclePrecisionBits = 160;
inline constexpr int kOracleAccumulatorBits = 256;

// Power of a verdict: an element is judged with power when its budget is at
// most 1/64 of |exact| (or one output ulp, where the output is subnormal and
// the format cannot do better), so that an error of a couple of percent of
// the value shows: one CTA's partial left out of a dW summed over thousands
// of CTAs (about 1/sqrt(CTAs) of it: 1.5% at 4224 CTAs), y = beta in a
// LayerNorm, a dropped term. The final rounding alone takes at most 2^-8 of
// a normal 16-bit value, a quarter of this.
inline constexpr double kPowerErrorFraction = 0x1p-6;
// A tensor is judged with power when at least half of its nonzero elements
// are: elements where the exact value cancels to nearly zero (dx ~ 0) keep a
// budget the size of their terms, rightly, but they are few. A case with a
// tensor below this is inconclusive, not a pass.
inline constexpr double kMinTensorPower = 0.5;

// The statistical check of black-box kernels (oracles/probabilistic.h):
// the probability, per case, that a correct fp32-accumulating kernel on data
// the model fits exceeds its probabilistic budget anywhere. The issue set it:
// a CI run of thousands of cases must not cry wolf.
inline constexpr double kStatisticalFalseAlarm = 1e-6;

// The rounding-bias statistic (properties/property.h, RoundingBias;
// oracles/rounding_bias.h): it counts the elements whose computation error
// bound, before the final rounding to the output dtype, is at most this many
// ulps there, where the final rounding's direction is what a bias shows
// (truncation misses the correctly rounded value by half an ulp on average)
// and few elements may miss it rightly.
inline constexpr double kBiasSelectUlps = 0.25;

// The oracle's self-checks (Boost.Multiprecision cross-check, MPFR finite
// differences, round-to-odd) keep their agreement constants, each with its
// derivation, beside them in tests/oracles/rmsnorm_test.cpp.

}  // namespace ulpcheck::tolerance
