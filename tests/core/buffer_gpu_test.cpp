// Device buffers poison every element of every storage width (fp32, 16-bit,
// fp8's byte: cudaops::fillPattern), as host buffers do.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "tests/support/test_support.h"

namespace ulpcheck {
namespace {

TEST(DeviceBuffer, PoisonFillsEveryElementOfEveryWidth) {
  ULPCHECK_REQUIRE_GPU();
  for (const DType t : {DType::F32, DType::BF16, DType::E4M3}) {
    const int width = storageBytes(t);
    Buffer b(Backend::Cuda, size_t(1000 * width), "t");
    b.fillPattern(poisonBits(t), width);
    const std::vector<uint8_t> payload = b.downloadAll();
    ASSERT_EQ(payload.size(), size_t(1000 * width));
    for (size_t i = 0; i < payload.size(); ++i)
      ASSERT_EQ(payload[i], uint8_t(poisonBits(t) >> (8 * (i % size_t(width))))) << dtypeName(t) << " byte " << i;
    EXPECT_EQ(b.damagedCanaryBytes(), 0u);
  }
}

}  // namespace
}  // namespace ulpcheck
