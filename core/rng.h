// Counter-based random numbers: every value is a pure function of
// (seed, stream, counter), so the host and the GPU produce identical bits and
// any single element can be regenerated without generating the others.
#pragma once

#include <cstdint>

#include "core/hd.h"

namespace ulpcheck {

/// SplitMix64's finaliser: a bijective 64-bit mixer with full avalanche.
ULPCHECK_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// One 64-bit random word for element `counter` of stream `stream`.
ULPCHECK_HD inline uint64_t counterHash(uint64_t seed, uint64_t stream, uint64_t counter) {
  const uint64_t key = mix64(seed ^ mix64(stream * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL));
  return mix64(key + counter * 0xd1b54a32d192ed03ULL);
}

/// Two-dimensional counter (row, column), each below 2^32.
/// One 8-byte word's share of a buffer digest (see bytesDigest): a bijection
/// of the word for each position, so changing any one word always changes
/// the digest, and several changes cancel with probability 2^-64.
ULPCHECK_HD inline uint64_t digestTerm(uint64_t word, uint64_t index) {
  return mix64(word ^ mix64(index + 0x9e3779b97f4a7c15ULL));
}

ULPCHECK_HD inline uint64_t counterHash2(uint64_t seed, uint64_t stream, uint64_t row, uint64_t col) {
  return counterHash(seed, stream, (row << 32) ^ col);
}

}  // namespace ulpcheck
