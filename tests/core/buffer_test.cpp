// Buffers find out-of-bounds writes on either side (their red zones), and
// poison every element of every storage width (fp32, 16-bit, fp8's byte).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/buffer.h"

namespace ulpcheck {
namespace {

TEST(Buffer, RedZonesCatchWritesOnEitherSide) {
  Buffer b(Backend::Host, 100, "t");
  b.fillPattern(poisonBits(DType::BF16), 2);
  EXPECT_EQ(b.damagedCanaryBytes(), 0u);
  std::vector<uint8_t> payload = b.downloadAll();
  for (size_t i = 0; i + 1 < payload.size(); i += 2) EXPECT_EQ(payload[i] | (payload[i + 1] << 8), 0x7fad);
  static_cast<char*>(b.data())[100] = 1;  // one past the end
  EXPECT_EQ(b.damagedCanaryBytes(), 1u);
  static_cast<char*>(b.data())[-3] = 1;  // before the start
  EXPECT_EQ(b.damagedCanaryBytes(), 2u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 256, 0u);
}

TEST(Buffer, PoisonFillsEveryElementOfEveryWidth) {
  for (const DType t : {DType::F32, DType::BF16, DType::E4M3}) {
    const int width = storageBytes(t);
    Buffer b(Backend::Host, size_t(12 * width), "t");
    b.fillPattern(poisonBits(t), width);
    const std::vector<uint8_t> payload = b.downloadAll();
    for (size_t i = 0; i < payload.size(); ++i)
      EXPECT_EQ(payload[i], uint8_t(poisonBits(t) >> (8 * (i % size_t(width))))) << dtypeName(t) << " byte " << i;
  }
}

}  // namespace
}  // namespace ulpcheck
