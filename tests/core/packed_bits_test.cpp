// A tensor's host bits at its storage width (core/packed_bits.h): a 16-bit
// tensor in 2 bytes an element, uploaded from those very bytes.
#include "core/packed_bits.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/buffer.h"
#include "core/datagen.h"

namespace ulpcheck {
namespace {

TEST(PackedBits, HoldsEachElementAtItsWidthAndReadsItBack) {
  PackedBits halves(2, 3, 0x7fc0u);
  EXPECT_EQ(halves.bytes().size(), 6u);
  halves[1] = 0x12345678u;  // a 2-byte element keeps the low 16 bits: its storage
  EXPECT_EQ(uint32_t(halves[1]), 0x5678u);
  EXPECT_EQ(halves[0], 0x7fc0u);
  halves.push_back(0xbeefu);
  EXPECT_EQ(std::vector<uint32_t>(halves.begin(), halves.end()),
            (std::vector<uint32_t>{0x7fc0u, 0x5678u, 0x7fc0u, 0xbeefu}));
  const PackedBits words{0x3f800000u, 0xdeadbeefu};
  EXPECT_EQ(words.width(), 4);
  EXPECT_EQ(words[1], 0xdeadbeefu);
  // Bytes as a device holds them, little endian.
  PackedBits built(2, 2);
  built[0] = 0x1234u;
  built[1] = 0x5678u;
  EXPECT_EQ(PackedBits::fromBytes(2, {0x34, 0x12, 0x78, 0x56}), built);
  EXPECT_FALSE(PackedBits::fromBytes(4, {0x34, 0x12, 0x78, 0x56}) == built);
}

TEST(PackedBits, AGeneratedMatrixIsUploadedFromItsOwnBytesAndOneBuiltWideIsPackedOnce) {
  // A bf16 matrix generated at 2 bytes an element: its upload is its bits' bytes, not a copy.
  const HostMatrix m = generateHost(DistParams{}, DType::BF16, 7, TensorStream::X, identityRows(3), 5, 8, 0);
  EXPECT_EQ(m.bits.width(), 2);
  EXPECT_EQ(&m.packedOnce(), &m.bits.bytes());
  EXPECT_EQ(m.packedDigest(), bytesDigest(m.bits.bytes().data(), m.bits.bytes().size()));
  // The same elements built one uint32 each pack to the same bytes.
  HostMatrix wide{DType::BF16, 3, 5, 8, {}};
  for (uint32_t b : m.bits) wide.bits.push_back(b);
  EXPECT_EQ(wide.bits.width(), 4);
  EXPECT_EQ(wide.packedOnce(), m.bits.bytes());
  EXPECT_EQ(wide.packedDigest(), m.packedDigest());
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(wide.value(r, c), m.value(r, c)) << r << " " << c;
}

}  // namespace
}  // namespace ulpcheck
