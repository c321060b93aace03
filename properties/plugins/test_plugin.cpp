// Plugins for the plugin suite (properties/cpu/plugin_test.cpp), one per
// TEST_PLUGIN_KIND: a well-formed one whose variants exercise preconditions
// and error returns, and malformed ones that must be refused clearly. The
// kernels are the example library's host RMSNorm (examples/plugin).
#include <ulpcheck/plugin.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "../../examples/plugin/mylib_rmsnorm.h"

#define KIND_GOOD 1
#define KIND_BAD_ABI 2
#define KIND_BAD_OP 3
#define KIND_NO_ENTRY 4
#define KIND_TAKEN_NAME 5

namespace {

mylib::RmsNormShape shapeOf(const ulpcheck_tensor& x, float eps) {
  const mylib::Dtype t = x.dtype == ULPCHECK_F32 ? mylib::Dtype::F32 : x.dtype == ULPCHECK_F16 ? mylib::Dtype::F16
                                                                                                 : mylib::Dtype::BF16;
  return mylib::RmsNormShape{t, x.rows, x.cols, x.row_stride, eps};
}

int forward(const ulpcheck_rmsnorm_forward_args* a, const ulpcheck_launch*) {
  mylib::rmsnormForwardHost(shapeOf(a->x, a->eps), a->x.data, a->w.data, a->y.data, static_cast<float*>(a->rstd.data));
  return 0;
}

/// Contiguous rows only: anything else would be read wrongly, so the
/// precondition must keep such cases away.
int backwardContiguous(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch*) {
  mylib::RmsNormShape s = shapeOf(a->x, a->eps);
  s.stride = s.cols;
  mylib::rmsnormBackwardHost(s, a->x.data, a->w.data, a->dy.data, static_cast<const float*>(a->rstd.data), a->dx.data,
                             a->dw.data);
  return 0;
}

/// Fails past 64 rows, as a library out of its own scratch would.
int backwardFailsPast64Rows(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch*) {
  if (a->x.rows > 64) return 3;
  mylib::rmsnormBackwardHost(shapeOf(a->x, a->eps), a->x.data, a->w.data, a->dy.data,
                             static_cast<const float*>(a->rstd.data), a->dx.data, a->dw.data);
  return 0;
}

/// The correct backward, except in one shape regime (a few percent of
/// generated cases) where the kernel faults the way external kernels do.
int correctBackward(const ulpcheck_rmsnorm_backward_args* a) {
  mylib::rmsnormBackwardHost(shapeOf(a->x, a->eps), a->x.data, a->w.data, a->dy.data,
                             static_cast<const float*>(a->rstd.data), a->dx.data, a->dw.data);
  return 0;
}
int backwardSegfaultsAtN7(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch*) {
  if (a->x.cols == 7) *static_cast<volatile float*>(nullptr) = 1.f;  // an illegal address
  return correctBackward(a);
}
int backwardAbortsAtN3(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch*) {
  if (a->x.cols == 3) std::abort();  // a failed assertion
  return correctBackward(a);
}
/// "Hangs" at N = 5: sleeps against a deadline of two minutes, never forever.
int backwardHangsAtN5(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch*) {
  if (a->x.cols == 5) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return correctBackward(a);
}

const char* lastError() { return "scratch too small for more than 64 rows"; }

ulpcheck_variant variant(const char* op, const char* name, uint32_t preconditions, int64_t max_cols,
                         ulpcheck_rmsnorm_backward_fn backward) {
  ulpcheck_variant v{};
  v.op = op;
  v.name = name;
  v.description = "test plugin variant";
  v.backend = ULPCHECK_HOST;
  v.dtypes = ULPCHECK_DTYPE_BIT(ULPCHECK_F32) | ULPCHECK_DTYPE_BIT(ULPCHECK_BF16);
  v.contracts = ULPCHECK_DETERMINISTIC | ULPCHECK_BATCH_INVARIANT;
  v.accumulation = ULPCHECK_F32;
  v.preconditions = preconditions;
  v.max_cols = max_cols;
  v.rmsnorm_forward = forward;
  v.rmsnorm_backward = backward;
  return v;
}

#if TEST_PLUGIN_KIND == KIND_GOOD
const ulpcheck_variant kVariants[] = {
    variant("rmsnorm", "test_rmsnorm_contiguous", ULPCHECK_NEEDS_CONTIGUOUS_ROWS, 512, backwardContiguous),
    variant("rmsnorm", "test_rmsnorm_fails_past_64_rows", 0, 0, backwardFailsPast64Rows),
    variant("rmsnorm", "test_rmsnorm_segfaults_at_n7", 0, 0, backwardSegfaultsAtN7),
    variant("rmsnorm", "test_rmsnorm_aborts_at_n3", 0, 0, backwardAbortsAtN3),
    variant("rmsnorm", "test_rmsnorm_hangs_at_n5", 0, 0, backwardHangsAtN5)};
#elif TEST_PLUGIN_KIND == KIND_BAD_OP
const ulpcheck_variant kVariants[] = {variant("softmax", "test_softmax", 0, 0, backwardContiguous)};
#elif TEST_PLUGIN_KIND == KIND_TAKEN_NAME
const ulpcheck_variant kVariants[] = {variant("rmsnorm", "host_separate", 0, 0, backwardContiguous)};
#else
const ulpcheck_variant kVariants[] = {variant("rmsnorm", "test_rmsnorm_other", 0, 0, backwardContiguous)};
#endif

const ulpcheck_plugin kPlugin{TEST_PLUGIN_KIND == KIND_BAD_ABI ? 99u : ULPCHECK_ABI_VERSION,
                              sizeof(ulpcheck_variant), "ulpcheck test plugin",
                              int32_t(sizeof kVariants / sizeof kVariants[0]), kVariants, lastError};

}  // namespace

#if TEST_PLUGIN_KIND != KIND_NO_ENTRY
extern "C" ULPCHECK_PLUGIN_EXPORT const ulpcheck_plugin* ulpcheck_plugin_v1(void) { return &kPlugin; }
#else
extern "C" ULPCHECK_PLUGIN_EXPORT const ulpcheck_plugin* some_other_symbol(void) { return &kPlugin; }
#endif
