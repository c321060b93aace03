// Buffers find out-of-bounds writes on either side (their red zones).
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

}  // namespace
}  // namespace ulpcheck
