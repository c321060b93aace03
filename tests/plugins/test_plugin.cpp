// Plugins for the plugin and robustness suites (tests/kernels/plugin/plugin_loader_test.cpp,
// robustness_test.cpp), one per TEST_PLUGIN_KIND: a well-formed one whose
// variants exercise preconditions, error returns and faults, and malformed or
// hostile ones that must be refused clearly or judged without ulpcheck dying.
// The kernels are the example library's host RMSNorm (examples/plugin).
#include <ulpcheck/plugin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <thread>
#include <vector>

#include "../../examples/plugin/mylib_rmsnorm.h"

// The faults these kernels make on purpose, as external kernels do: left
// out of the sanitizers' checks (the asan preset), which would otherwise
// report them as a bug of this file and end the worker their own way
// rather than by the signal the tests expect.
#define ULPCHECK_DELIBERATE_FAULT __attribute__((no_sanitize("address", "undefined")))

#define KIND_GOOD 1
#define KIND_BAD_ABI 2
#define KIND_BAD_OP 3
#define KIND_NO_ENTRY 4
#define KIND_TAKEN_NAME 5
#define KIND_DUPLICATE_NAME 6  // two variants of one name: the first correct, the second aborting
#define KIND_NO_VARIANTS 7
#define KIND_HUGE_WORKSPACE 8            // workspace_bytes answers (size_t)-1, SIZE_MAX - 4096, 2^44
#define KIND_CRASHING_CONSTRUCTOR 9      // the library's static constructor segfaults when it is loaded
#define KIND_CXX_ENTRY 10                // the entry point declared without extern "C" (a C++-mangled symbol)
#define KIND_BAD_VARIANT_SIZE 11         // built against another header's ulpcheck_variant
#define KIND_NULL_TABLE 12               // the entry point returns no table
#define KIND_NO_BACKWARD 13              // rmsnorm without its backward entry point
#define KIND_BAD_NAME 14                 // a variant name with a space
#define KIND_BAD_DTYPES 15               // a dtype mask naming no dtype ulpcheck knows
#define KIND_EXITING_CONSTRUCTOR 16      // the library's static constructor calls exit(0) when it is loaded
#define KIND_SPEC_UNKNOWN_OPTION 17      // declares a spec option its op has not (LayerNorm's on RMSNorm)
#define KIND_SPEC_BAD_NAME 18            // declares a rounding ulpcheck does not know
#define KIND_SPEC_BAD_VALUE 19           // declares an option with a value it cannot take
#define KIND_UNFUSED_WITHOUT_OUTPUTS 20  // names an unfused pipeline but no output to compare with it
#define KIND_ALLREDUCE_BAD_RANKS 21      // a multi-rank variant declaring 9 ranks (ULPCHECK_MAX_RANKS is 8)
#define KIND_ALLREDUCE_NO_ENTRY 22       // a multi-rank variant without its entry point
#define KIND_RMSNORM_TWO_PASS 23         // an RMSNorm declaring LayerNorm's two-pass statistics

namespace {

mylib::RmsNormShape shapeOf(const ulpcheck_tensor& x, float eps) {
  const mylib::Dtype t = x.dtype == ULPCHECK_F32   ? mylib::Dtype::F32
                         : x.dtype == ULPCHECK_F16 ? mylib::Dtype::F16
                                                   : mylib::Dtype::BF16;
  return mylib::RmsNormShape{t, x.rows, x.cols, x.row_stride, eps};
}

int forward(const ulpcheck_rmsnorm_forward_args* a, const ulpcheck_launch*) {
  mylib::rmsnormForwardHost(shapeOf(a->x, a->eps), a->x.data, a->w.data, a->y.data, static_cast<float*>(a->rstd.data));
  return 0;
}

// The entry points and size queries below marked [[maybe_unused]] are for the
// variant tables at the end: this file builds one plugin per TEST_PLUGIN_KIND
// and each kind's table takes only some of them, so every build of it leaves
// the others unused, by design.

/// Contiguous rows only: anything else would be read wrongly, so the
/// precondition must keep such cases away.
[[maybe_unused]] int backwardContiguous(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch*) {
  mylib::RmsNormShape s = shapeOf(a->x, a->eps);
  s.stride = s.cols;
  mylib::rmsnormBackwardHost(s, a->x.data, a->w.data, a->dy.data, static_cast<const float*>(a->rstd.data), a->dx.data,
                             a->dw.data);
  return 0;
}

/// Fails past 64 rows, as a library out of its own scratch would.
[[maybe_unused]] int backwardFailsPast64Rows(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch*) {
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
[[maybe_unused]] int correctBackwardEntry(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch*) {
  return correctBackward(a);
}
[[maybe_unused]] ULPCHECK_DELIBERATE_FAULT int backwardSegfaultsAtN7(const ulpcheck_rmsnorm_backward_args* a,
                                                                     const ulpcheck_launch*) {
  if (a->x.cols == 7) *static_cast<volatile float*>(nullptr) = 1.f;  // an illegal address
  return correctBackward(a);
}
[[maybe_unused]] int backwardAbortsAtN3(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch*) {
  if (a->x.cols == 3) std::abort();  // a failed assertion
  return correctBackward(a);
}
/// "Hangs" at N = 5: sleeps against a deadline of two minutes, never forever.
[[maybe_unused]] int backwardHangsAtN5(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch*) {
  if (a->x.cols == 5) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return correctBackward(a);
}

#if ULPCHECK_ABI_VERSION >= 2
// Version 2: variants declaring fp32 weights and a bias, each getting one of
// them wrong, so a case of that spec must fail (the declaration reaches the
// cases, and the tensors tell the variant which spec a call is).
mylib::Dtype weightDtypeOf(const ulpcheck_tensor& w) { return shapeOf(w, 0.f).dtype; }
[[maybe_unused]] int forwardIgnoringTheBias(const ulpcheck_rmsnorm_forward_args* a, const ulpcheck_launch*) {
  mylib::rmsnormForwardHost(shapeOf(a->x, a->eps), weightDtypeOf(a->w), a->x.data, a->w.data, /*b=*/nullptr, a->y.data,
                            static_cast<float*>(a->rstd.data));
  return 0;
}
[[maybe_unused]] int forwardReadingWeightsAsActivations(const ulpcheck_rmsnorm_forward_args* a,
                                                        const ulpcheck_launch*) {
  const mylib::RmsNormShape s = shapeOf(a->x, a->eps);
  mylib::rmsnormForwardHost(s, s.dtype, a->x.data, a->w.data, a->b.data, a->y.data, static_cast<float*>(a->rstd.data));
  return 0;
}
[[maybe_unused]] int backwardWithSpec(const ulpcheck_rmsnorm_backward_args* a, const ulpcheck_launch*) {
  mylib::rmsnormBackwardHost(shapeOf(a->x, a->eps), weightDtypeOf(a->w), a->x.data, a->w.data, a->dy.data,
                             static_cast<const float*>(a->rstd.data), a->dx.data, a->dw.data, a->db.data);
  return 0;
}

// mylib's fused add + RMSNorm: forward only built against version 2's
// header (tests/plugins/v2), with its backward against version 3's.
mylib::Dtype dtypeOfTensor(const ulpcheck_tensor& t) { return shapeOf(t, 0.f).dtype; }
[[maybe_unused]] int fusedAddForward(const ulpcheck_fused_add_rmsnorm_forward_args* a, const ulpcheck_launch*) {
  mylib::fusedAddRmsnormForwardHost(shapeOf(a->x, a->eps), dtypeOfTensor(a->residual), dtypeOfTensor(a->w), a->x.data,
                                    a->residual.data, a->w.data, a->residual_out.data, a->y.data);
  return 0;
}
#endif
#if ULPCHECK_ABI_VERSION >= 3
[[maybe_unused]] int fusedAddBackward(const ulpcheck_fused_add_rmsnorm_backward_args* a, const ulpcheck_launch*) {
  mylib::fusedAddRmsnormBackwardHost(shapeOf(a->x, a->eps), dtypeOfTensor(a->residual), dtypeOfTensor(a->w), a->x.data,
                                     a->residual.data, a->w.data, a->dy.data, a->dresidual_out.data, a->dx.data,
                                     a->dresidual.data, a->dw.data);
  return 0;
}
#endif

#if ULPCHECK_ABI_VERSION >= 6
// Version 6: mylib's fp32 RMSNorm quantized to E4M3 with a static scale,
// the spec's defaults: y times fl(1/s), to nearest even, saturating at 448;
// and the same converting by truncation, which must fail. The conversion is
// this file's own (a table of E4M3's 127 magnitudes), not ulpcheck's.
double e4m3Magnitude(int code) {  // codes 0..126: exponent code >> 3 (bias 7), 3 fraction bits
  const int e = code >> 3, m = code & 7;
  return e == 0 ? std::ldexp(double(m), -9) : std::ldexp(1.0 + m / 8.0, e - 7);
}
uint8_t toE4m3(float p, bool truncate) {
  static const std::vector<double> magnitudes = [] {
    std::vector<double> t(127);
    for (int c = 0; c < 127; ++c) t[size_t(c)] = e4m3Magnitude(c);
    return t;
  }();
  const double a = std::fabs(double(p));
  const uint8_t sign = std::signbit(p) ? 0x80 : 0;
  if (a >= 448) return uint8_t(sign | 126);  // satfinite
  const int below = int(std::upper_bound(magnitudes.begin(), magnitudes.end(), a) - magnitudes.begin()) - 1;
  const double down = a - magnitudes[size_t(below)], up = magnitudes[size_t(below) + 1] - a;
  const int code = truncate || down < up || (down == up && below % 2 == 0) ? below : below + 1;
  return uint8_t(sign | code);
}
/// y (fp32, rows `s.stride` apart) times fl(1/s) into y_q, E4M3.
void storeE4m3(const mylib::RmsNormShape& s, const std::vector<float>& y, const ulpcheck_tensor& static_scale,
               const ulpcheck_tensor& y_q, bool truncate) {
  const float inverse = 1.0f / *static_cast<const float*>(static_scale.data);
  for (int64_t i = 0; i < s.rows; ++i)
    for (int64_t j = 0; j < s.cols; ++j)
      static_cast<uint8_t*>(y_q.data)[i * y_q.row_stride + j] = toE4m3(y[size_t(i * s.stride + j)] * inverse, truncate);
}
template <bool kTruncate>
int rmsnormQuantE4m3(const ulpcheck_rmsnorm_quant_args* a, const ulpcheck_launch*) {
  const mylib::RmsNormShape s = shapeOf(a->x, a->eps);  // fp32 only: y is the fp32 y
  std::vector<float> y(size_t(s.rows * s.stride)), rstd(size_t(s.rows));
  mylib::rmsnormForwardHost(s, a->x.data, a->w.data, y.data(), rstd.data());
  storeE4m3(s, y, a->static_scale, a->y, kTruncate);
  return 0;
}
#endif
#if ULPCHECK_ABI_VERSION >= 7
// Version 7: the same after mylib's fp32 residual add (residual_out = x +
// residual, one rounding), normalising residual_out.
template <bool kTruncate>
int fusedAddRmsnormQuantE4m3(const ulpcheck_fused_add_rmsnorm_quant_args* a, const ulpcheck_launch*) {
  const mylib::RmsNormShape s = shapeOf(a->x, a->eps);  // fp32 only
  float* residual_out = static_cast<float*>(a->residual_out.data);
  for (int64_t i = 0; i < s.rows; ++i)
    for (int64_t j = 0; j < s.cols; ++j)
      residual_out[i * a->residual_out.row_stride + j] =
          static_cast<const float*>(a->x.data)[i * a->x.row_stride + j] +
          static_cast<const float*>(a->residual.data)[i * a->residual.row_stride + j];
  std::vector<float> y(size_t(s.rows * s.stride)), rstd(size_t(s.rows));
  mylib::rmsnormForwardHost(s, residual_out, a->w.data, y.data(), rstd.data());
  storeE4m3(s, y, a->static_scale, a->y, kTruncate);
  return 0;
}
#endif

const char* lastError() { return "scratch too small for more than 64 rows"; }

/// Size queries a library may answer with an error code or an absurd size.
[[maybe_unused]] size_t workspaceMinusOne(const ulpcheck_shape*, void*) { return size_t(-1); }
[[maybe_unused]] size_t workspaceWraps(const ulpcheck_shape*, void*) { return size_t(-1) - 4096; }
[[maybe_unused]] size_t workspace16TiB(const ulpcheck_shape*, void*) { return size_t{1} << 44; }

[[maybe_unused]] int backwardAborts(const ulpcheck_rmsnorm_backward_args*, const ulpcheck_launch*) { std::abort(); }

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

#if ULPCHECK_ABI_VERSION >= 2
[[maybe_unused]] ulpcheck_variant withSpec(ulpcheck_variant v, const char* spec,
                                           ulpcheck_rmsnorm_forward_fn forward = nullptr) {
  v.spec = spec;
  if (forward) v.rmsnorm_forward = forward;
  return v;
}

[[maybe_unused]] ulpcheck_variant fusedAdd() {
  ulpcheck_variant v = variant("fused_add_rmsnorm", "test_fused_add_rmsnorm", 0, 0, nullptr);
  v.rmsnorm_forward = nullptr;
  v.fused_add_rmsnorm_forward = fusedAddForward;
#if ULPCHECK_ABI_VERSION >= 3
  v.fused_add_rmsnorm_backward = fusedAddBackward;
#endif
  return v;
}
#endif

#if ULPCHECK_ABI_VERSION >= 6
[[maybe_unused]] ulpcheck_variant rmsnormQuant(const char* name, ulpcheck_rmsnorm_quant_fn entry) {
  ulpcheck_variant v = variant("rmsnorm_quant", name, 0, 0, nullptr);
  v.dtypes = ULPCHECK_DTYPE_BIT(ULPCHECK_F32);
  v.rmsnorm_forward = nullptr;
  v.rmsnorm_quant = entry;
  return v;
}
#endif
#if ULPCHECK_ABI_VERSION >= 7
[[maybe_unused]] ulpcheck_variant fusedAddRmsnormQuant(const char* name, ulpcheck_fused_add_rmsnorm_quant_fn entry) {
  ulpcheck_variant v = variant("fused_add_rmsnorm_quant", name, 0, 0, nullptr);
  v.dtypes = ULPCHECK_DTYPE_BIT(ULPCHECK_F32);
  v.rmsnorm_forward = nullptr;
  v.fused_add_rmsnorm_quant = entry;
  return v;
}
#endif

#if TEST_PLUGIN_KIND == KIND_GOOD
// Built against this ulpcheck's header and, as test_plugin_good_v1 to _v6,
// against versions 1 to 6's (tests/plugins/v1 ... v6): the same table less
// what the later versions added.
const ulpcheck_variant kVariants[] = {
    variant("rmsnorm", "test_rmsnorm_contiguous", ULPCHECK_NEEDS_CONTIGUOUS_ROWS, 512, backwardContiguous),
    variant("rmsnorm", "test_rmsnorm_fails_past_64_rows", 0, 0, backwardFailsPast64Rows),
    variant("rmsnorm", "test_rmsnorm_segfaults_at_n7", 0, 0, backwardSegfaultsAtN7),
    variant("rmsnorm", "test_rmsnorm_aborts_at_n3", 0, 0, backwardAbortsAtN3),
    variant("rmsnorm", "test_rmsnorm_hangs_at_n5", 0, 0, backwardHangsAtN5),
#if ULPCHECK_ABI_VERSION >= 2
    withSpec(variant("rmsnorm", "test_rmsnorm_ignores_the_bias", 0, 0, backwardWithSpec), "bias_variants=true",
             forwardIgnoringTheBias),
    withSpec(variant("rmsnorm", "test_rmsnorm_fp32_weights_read_as_activations", 0, 0, backwardWithSpec),
             "fp32_weights=true", forwardReadingWeightsAsActivations),
    fusedAdd(),
#endif
#if ULPCHECK_ABI_VERSION >= 6
    rmsnormQuant("test_rmsnorm_quant", rmsnormQuantE4m3<false>),
    rmsnormQuant("test_rmsnorm_quant_truncating", rmsnormQuantE4m3<true>),
#endif
#if ULPCHECK_ABI_VERSION >= 7
    fusedAddRmsnormQuant("test_fused_add_rmsnorm_quant", fusedAddRmsnormQuantE4m3<false>),
    fusedAddRmsnormQuant("test_fused_add_rmsnorm_quant_truncating", fusedAddRmsnormQuantE4m3<true>),
#endif
};
#elif TEST_PLUGIN_KIND == KIND_SPEC_UNKNOWN_OPTION
const ulpcheck_variant kVariants[] = {
    withSpec(variant("rmsnorm", "test_rmsnorm_affine", 0, 0, backwardWithSpec), "affine_variants=true")};
#elif TEST_PLUGIN_KIND == KIND_SPEC_BAD_NAME
const ulpcheck_variant kVariants[] = {
    withSpec(variant("rmsnorm", "test_rmsnorm_gemma", 0, 0, backwardWithSpec), "rounding=gemma")};
#elif TEST_PLUGIN_KIND == KIND_SPEC_BAD_VALUE
const ulpcheck_variant kVariants[] = {
    withSpec(variant("rmsnorm", "test_rmsnorm_bias_maybe", 0, 0, backwardWithSpec), "bias_variants=maybe")};
#elif TEST_PLUGIN_KIND == KIND_UNFUSED_WITHOUT_OUTPUTS
ulpcheck_variant unfusedWithoutOutputs() {
  ulpcheck_variant v = fusedAdd();
  v.unfused_pipeline = "host_fused_add";
  v.bitwise_with_unfused = " , ";
  return v;
}
const ulpcheck_variant kVariants[] = {unfusedWithoutOutputs()};
#elif TEST_PLUGIN_KIND == KIND_ALLREDUCE_BAD_RANKS || TEST_PLUGIN_KIND == KIND_ALLREDUCE_NO_ENTRY
int allreduceNeverCalled(const ulpcheck_allreduce_rmsnorm_args*, const ulpcheck_launch*) { return 1; }
ulpcheck_variant allreduce() {
  ulpcheck_variant v = variant("allreduce_rmsnorm", "test_allreduce_rmsnorm", 0, 0, nullptr);
  v.rmsnorm_forward = nullptr;
  v.allreduce_rmsnorm = TEST_PLUGIN_KIND == KIND_ALLREDUCE_NO_ENTRY ? nullptr : allreduceNeverCalled;
  v.rank_counts = TEST_PLUGIN_KIND == KIND_ALLREDUCE_BAD_RANKS ? (1u << 2 | 1u << 9) : 0;
  return v;
}
const ulpcheck_variant kVariants[] = {allreduce()};
#elif TEST_PLUGIN_KIND == KIND_BAD_OP
const ulpcheck_variant kVariants[] = {variant("softmax", "test_softmax", 0, 0, backwardContiguous)};
#elif TEST_PLUGIN_KIND == KIND_TAKEN_NAME
const ulpcheck_variant kVariants[] = {variant("rmsnorm", "host_separate", 0, 0, backwardContiguous)};
#elif TEST_PLUGIN_KIND == KIND_DUPLICATE_NAME
const ulpcheck_variant kVariants[] = {variant("rmsnorm", "test_rmsnorm_twice", 0, 0, correctBackwardEntry),
                                      variant("rmsnorm", "test_rmsnorm_twice", 0, 0, backwardAborts)};
#elif TEST_PLUGIN_KIND == KIND_HUGE_WORKSPACE
ulpcheck_variant withWorkspace(const char* name, size_t (*bytes)(const ulpcheck_shape*, void*)) {
  ulpcheck_variant v = variant("rmsnorm", name, 0, 0, correctBackwardEntry);
  v.workspace_bytes = bytes;
  return v;
}
const ulpcheck_variant kVariants[] = {withWorkspace("test_rmsnorm_workspace_minus_one", workspaceMinusOne),
                                      withWorkspace("test_rmsnorm_workspace_wraps", workspaceWraps),
                                      withWorkspace("test_rmsnorm_workspace_16tib", workspace16TiB)};
#elif TEST_PLUGIN_KIND == KIND_NO_BACKWARD
const ulpcheck_variant kVariants[] = {variant("rmsnorm", "test_rmsnorm_no_backward", 0, 0, nullptr)};
#elif TEST_PLUGIN_KIND == KIND_BAD_NAME
const ulpcheck_variant kVariants[] = {variant("rmsnorm", "test rmsnorm", 0, 0, correctBackwardEntry)};
#elif TEST_PLUGIN_KIND == KIND_BAD_DTYPES
ulpcheck_variant badDtypes() {
  ulpcheck_variant v = variant("rmsnorm", "test_rmsnorm_fp8", 0, 0, correctBackwardEntry);
  v.dtypes = 1u << 7;
  return v;
}
const ulpcheck_variant kVariants[] = {badDtypes()};
#elif TEST_PLUGIN_KIND == KIND_RMSNORM_TWO_PASS
ulpcheck_variant twoPassRmsNorm() {
  ulpcheck_variant v = variant("rmsnorm", "test_rmsnorm_two_pass", 0, 0, correctBackwardEntry);
  v.contracts |= ULPCHECK_TWO_PASS_STATISTICS;
  return v;
}
const ulpcheck_variant kVariants[] = {twoPassRmsNorm()};
#else
const ulpcheck_variant kVariants[] = {variant("rmsnorm", "test_rmsnorm_other", 0, 0, backwardContiguous)};
#endif

const ulpcheck_plugin kPlugin{TEST_PLUGIN_KIND == KIND_BAD_ABI ? 99u : ULPCHECK_ABI_VERSION,
                              TEST_PLUGIN_KIND == KIND_BAD_VARIANT_SIZE ? uint32_t(sizeof(ulpcheck_variant) - 8)
                                                                        : uint32_t(sizeof(ulpcheck_variant)),
                              "ulpcheck test plugin",
                              TEST_PLUGIN_KIND == KIND_NO_VARIANTS ? 0
                                                                   : int32_t(sizeof kVariants / sizeof kVariants[0]),
                              kVariants,
                              lastError};

#if TEST_PLUGIN_KIND == KIND_EXITING_CONSTRUCTOR
// A library that ends the process as it initialises (a failed check calling
// exit): in ulpcheck's own process a status of 0 would read as a pass.
__attribute__((constructor)) void exitWhenLoaded() { std::exit(0); }
#endif

#if TEST_PLUGIN_KIND == KIND_CRASHING_CONSTRUCTOR
// A library whose initialisation crashes (a static object touching a
// device that is not there, say): loading it must not end ulpcheck.
// (Through a volatile pointer: a store to a literal null is undefined, and
// the compiler dropped the whole constructor.)
__attribute__((constructor)) ULPCHECK_DELIBERATE_FAULT void crashWhenLoaded() {
  volatile int* volatile nowhere = nullptr;
  *nowhere = 1;
}
#endif

}  // namespace

#if TEST_PLUGIN_KIND == KIND_NO_ENTRY
extern "C" ULPCHECK_PLUGIN_EXPORT const ulpcheck_plugin* some_other_symbol(void) { return &kPlugin; }
#elif TEST_PLUGIN_KIND == KIND_CXX_ENTRY
// The mistake plugin.h warns of: without extern "C" the symbol is _Z18ulpcheck_plugin_v1v.
ULPCHECK_PLUGIN_EXPORT const ulpcheck_plugin* ulpcheck_plugin_v1(void) { return &kPlugin; }
#elif TEST_PLUGIN_KIND == KIND_NULL_TABLE
extern "C" ULPCHECK_PLUGIN_EXPORT const ulpcheck_plugin* ulpcheck_plugin_v1(void) { return nullptr; }
#else
extern "C" ULPCHECK_PLUGIN_EXPORT const ulpcheck_plugin* ulpcheck_plugin_v1(void) { return &kPlugin; }
#endif
