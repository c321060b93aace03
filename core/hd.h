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
