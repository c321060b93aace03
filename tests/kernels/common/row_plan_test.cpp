// The code paths the row-wise kernels declare for coverage, against the
// dispatch they describe (row_cuda.cuh's withVecAndVpt, the backward grid).
#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/common/row_plan.h"

namespace ulpcheck {
namespace {

using namespace row_plan;

bool takes(const std::vector<std::string>& paths, const std::string& p) {
  return std::find(paths.begin(), paths.end(), p) != paths.end();
}

constexpr RowPathModel kRmsNormCuda{true, 1, true, 0};
constexpr RowPathModel kLayerNormCuda{true, 2, true, 0};
const LaunchEnv kH100{132, 0, nullptr};

TEST(RowPaths, RegistersEndWhereTheDispatchStopsHoldingTheRow) {
  // fp32: 16 elements per thread of a 512-thread CTA, so 8192 columns.
  EXPECT_TRUE(takes(rowPathsTaken(kRmsNormCuda, {DType::F32, 4, 8192, 8192}, kH100), "bwd registers"));
  EXPECT_TRUE(takes(rowPathsTaken(kRmsNormCuda, {DType::F32, 4, 8196, 8196}, kH100), "bwd workspace"));
  // 16-bit: 32 elements per thread; 16385 keeps the row (2048 vectors + a tail), 16392 does not.
  EXPECT_TRUE(takes(rowPathsTaken(kRmsNormCuda, {DType::BF16, 4, 16385, 16392}, kH100), "bwd registers"));
  EXPECT_TRUE(takes(rowPathsTaken(kRmsNormCuda, {DType::BF16, 4, 16392, 16392}, kH100), "bwd workspace"));
  // LayerNorm's backward holds half: its forward keeps a row its backward cannot.
  const auto ln = rowPathsTaken(kLayerNormCuda, {DType::F32, 4, 8192, 8192}, kH100);
  EXPECT_TRUE(takes(ln, "fwd registers"));
  EXPECT_TRUE(takes(ln, "bwd workspace"));
}

TEST(RowPaths, LoadsGridAndDispatchPaths) {
  // The race ulpcheck found in cuda_atomic: fp32, 8644 columns, 7 rows on 3 CTAs.
  const auto race = rowPathsTaken(kRmsNormCuda, {DType::F32, 7, 8644, 8644}, {132, 3, nullptr});
  for (const char* p : {"vector", "fwd workspace", "bwd workspace", "several rows per CTA"})
    EXPECT_TRUE(takes(race, p)) << p;
  EXPECT_TRUE(takes(rowPathsTaken(kRmsNormCuda, {DType::F32, 1, 13, 13}, kH100), "scalar"));
  EXPECT_TRUE(takes(rowPathsTaken(kRmsNormCuda, {DType::F32, 1, 13, 16}, kH100), "vector+tail"));
  EXPECT_TRUE(takes(rowPathsTaken(kRmsNormCuda, {DType::F32, 8, 13, 16}, kH100), "one row per CTA"));
  const RowPathModel large_m{false, 1, true, 32768};
  EXPECT_TRUE(takes(rowPathsTaken(large_m, {DType::F32, 32768, 2, 2}, kH100), "M >= 32768 dispatch"));
  EXPECT_FALSE(takes(rowPathsTaken(large_m, {DType::F32, 32767, 2, 2}, kH100), "M >= 32768 dispatch"));
  // Every path taken is one declared.
  for (const RowPathModel& m : {kRmsNormCuda, kLayerNormCuda, large_m, RowPathModel{}})
    for (const auto& p : rowPathsTaken(m, {DType::F16, 40000, 3, 3}, kH100))
      EXPECT_TRUE(takes(rowCodePaths(m), p)) << p;
}

}  // namespace
}  // namespace ulpcheck
