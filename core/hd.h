// Marks functions that compile for both the host and the GPU, so the data
// generator and the float formats give the same bits on either side.
#pragma once

#if defined(__CUDACC__)
#define ULPCHECK_HD __host__ __device__
#else
#define ULPCHECK_HD
#endif

// Forces inlining where the compiler's heuristics would not: the double-word
// operations (oracles/double_word.h), a few flops each, called per element
// from the oracles' long row loops, where GCC at -O3 left them as calls.
// (Inlining changes no rounding: -ffp-contract=off, no -ffast-math.)
#if defined(__GNUC__) || defined(__clang__)
#define ULPCHECK_ALWAYS_INLINE __attribute__((always_inline))
#else
#define ULPCHECK_ALWAYS_INLINE
#endif

// Keeps a rare path out of its callers' loops: the FP8 and overflow
// branches of core/dtype.h's per-element conversions (decodeBits and
// roundToFormat run per element in generation, the oracle and the judge).
#if defined(__CUDA_ARCH__)
#define ULPCHECK_NOINLINE __noinline__
#elif defined(__GNUC__) || defined(__clang__)
#define ULPCHECK_NOINLINE __attribute__((noinline))
#else
#define ULPCHECK_NOINLINE
#endif
#if defined(__GNUC__) || defined(__clang__) || defined(__CUDACC__)
#define ULPCHECK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define ULPCHECK_UNLIKELY(x) (x)
#endif
