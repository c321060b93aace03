// Python kernels (python/ulpcheck): PyTorch's own CPU norms judged in a
// Python worker, a real defect of an old torch found, and a Python kernel
// that raises, crashes or leaves output unwritten reported as a failing case.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/runner/exit_codes.h"
#include "tests/support/cli_support.h"

namespace ulpcheck {
namespace {

using testing::cli;
using testing::Result;

const std::string kTorchOps = std::string(" --python ") + ULPCHECK_SOURCE_DIR +
                              "/python/ulpcheck/adapters/torch_ops.py";
const std::string kFaulty = std::string(" --python ") + ULPCHECK_SOURCE_DIR + "/tests/plugins/faulty_kernels.py";
const std::string kSpecs = std::string(" --python ") + ULPCHECK_SOURCE_DIR + "/tests/plugins/spec_kernels.py";
const std::string kFusedAdd = std::string(" --python ") + ULPCHECK_SOURCE_DIR + "/tests/plugins/fused_add_kernels.py";
const std::string kProcessState = std::string(" --python ") + ULPCHECK_SOURCE_DIR +
                                  "/tests/plugins/process_state_kernels.py";
const std::string kImportCounting = std::string(" --python ") + ULPCHECK_SOURCE_DIR +
                                    "/tests/plugins/import_counting_kernels.py";
const std::string kQuant = std::string(" --python ") + ULPCHECK_SOURCE_DIR + "/tests/plugins/quant_kernels.py";

class PythonDoor : public ::testing::Test {
 protected:
  void SetUp() override { ULPCHECK_REQUIRE_PYTHON_WITH_TORCH(); }
};

TEST_F(PythonDoor, ListShowsTheVariantsWithTheirLibraryVersions) {
  const Result r = cli("list" + kTorchOps);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  for (const char* s : {"torch_rms_norm_cpu", "torch_layer_norm_cpu", "torch_rms_norm ", "from python ", "torch "})
    EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;
}

TEST_F(PythonDoor, PyTorchsCpuNormsPassEveryProperty) {
  for (const char* args : {" --kernel torch_rms_norm_cpu", " --kernel torch_layer_norm_cpu --dtype fp32"}) {
    const Result r =
        cli(std::string("run") + args + " --cases 150 --tier smoke --seed 3 --no-save --no-corpus" + kTorchOps);
    EXPECT_EQ(r.code, exit_code::kOk) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("accuracy           "), std::string::npos) << r.output;
  }
}

TEST_F(PythonDoor, ADeclaredReductionShapeReachesTheBudget) {
  // A LayerNorm forward whose row sums are serial fp32 chains (numpy's
  // cumsum in fp32: depth N), registered twice: undeclared it passes;
  // declared (falsely) to sum each row in one rounding, row_depth=(2^20, 0)
  // (ceil(N / 2^20) + 0 = 1), the budget the declaration narrows catches it.
  const std::string file = ::testing::TempDir() + "declared_depth_kernels.py";
  FILE* f = fopen(file.c_str(), "w");
  fprintf(
      f,
      "import sys\nsys.path.insert(0, '%s/python/ulpcheck/adapters')\nimport numpy as np, torch, torch_ops, ulpcheck\n"
      "def serial_mean(v):\n"
      "    return torch.from_numpy(np.cumsum(v.numpy(), axis=-1, dtype=np.float32)[:, -1:] / np.float32(v.shape[-1]))\n"
      "def forward(x, gamma, beta, eps):\n"
      "    mean = serial_mean(x)\n"
      "    d = x - mean\n"
      "    y = d * torch.rsqrt(serial_mean(d * d) + eps)\n"
      "    return y * gamma + beta if gamma is not None else y\n"
      "for name, depth in (('serial_layer_norm', 0), ('serial_layer_norm_declared_depth_1', (1 << 20, 0))):\n"
      "    ulpcheck.layernorm(name, forward=forward, backward=torch_ops.layer_norm_backward, backend='host',\n"
      "                       dtypes=('fp32',), row_depth=depth)\n",
      ULPCHECK_SOURCE_DIR);
  fclose(f);
  const std::string run = "run --property accuracy --cases 60 --seed 3 --no-save --no-corpus --no-shrink --python " +
                          file + " --kernel ";
  const Result undeclared = cli(run + "serial_layer_norm");
  EXPECT_EQ(undeclared.code, exit_code::kOk) << undeclared.output;
  const Result declared = cli(run + "serial_layer_norm_declared_depth_1");
  EXPECT_EQ(declared.code, exit_code::kPropertyFailed) << declared.output;
  EXPECT_NE(declared.output.find("elements over budget"), std::string::npos) << declared.output;
}

TEST_F(PythonDoor, ADeclaredUseOfSavedStatisticsJudgesWhereTheStatisticsErrorDominates) {
  // tests/plugins/saved_statistics_kernels.py: Liger's shape of LayerNorm.
  // On bf16 rows of mean -2^12 that round to near-constants at eps 2^-20,
  // the mean's legitimate error times rstd (~2^10) swamps y, rstd and dx:
  // undeclared, nothing there is judged with power; declared, y and dx are
  // also bounded about what its own saved mean and rstd give, and pass.
  const std::string kSaved = std::string(" --python ") + ULPCHECK_SOURCE_DIR +
                             "/tests/plugins/saved_statistics_kernels.py --property accuracy --kernel ";
  const std::string near_constant =
      "repro 'op=layernorm kernel=x dtype=bf16 M=8 N=6 ld=14 eps=0x1.0c6f7ap-20 dist=large_mean sigma=0x1.1p-8 "
      "mean=-0x1.1p+12 seed=0xd0cf0ff2706f627a'";
  const Result undeclared = cli(near_constant + kSaved + "saved_stats_layer_norm_undeclared");
  EXPECT_EQ(undeclared.code, exit_code::kNothingJudged) << undeclared.output;
  EXPECT_NE(undeclared.output.find("y 0%, rstd 0%, dx 0%"), std::string::npos) << undeclared.output;
  const Result declared = cli(near_constant + kSaved + "saved_stats_layer_norm");
  EXPECT_EQ(declared.code, exit_code::kOk) << declared.output;
  EXPECT_NE(declared.output.find("accuracy           pass"), std::string::npos) << declared.output;
  // A kernel that folds the mean into a bias (PyTorch's CPU LayerNorm's
  // form) errs by ~u |mean| rstd, which the budget about the exact value
  // admits on fp32 rows of mean / sigma = 2^16: declared, it is caught.
  const std::string large_mean =
      "repro 'op=layernorm kernel=x dtype=fp32 M=65 N=7 ld=8 eps=0x1.4f8b58p-17 dist=large_mean sigma=0x1.dp-4 "
      "mean=-0x1.dp+12 seed=0x6097a469a1c1c475'";
  const Result folded = cli(large_mean + kSaved + "folded_bias_layer_norm");
  EXPECT_NE(folded.code, exit_code::kPropertyFailed) << folded.output;
  const Result falsely = cli(large_mean + kSaved + "folded_bias_layer_norm_declared");
  EXPECT_EQ(falsely.code, exit_code::kPropertyFailed) << falsely.output;
  EXPECT_NE(falsely.output.find("from its own saved mean and rstd, as (x - mean) rstd gamma + beta"), std::string::npos)
      << falsely.output;
}

TEST_F(PythonDoor, ADeclaredRunningMeansShapeJudgesLongRowsMeansAndIsLoadBearing) {
  // tests/plugins/running_means_kernels.py: PyTorch's CUDA LayerNorm
  // statistics in fp32 on the CPU. Declared with PyTorch's shape
  // (running_means=(128, 4, 9)), the mean of fp16 rows of 16392 zero-mean
  // values is judged (undeclared, the tree of the row depth's height leaves
  // it without power); one serial Welford chain over sorted rows of large
  // mean, declared with that shape, fails it.
  const std::string kRunning = std::string(" --python ") + ULPCHECK_SOURCE_DIR +
                               "/tests/plugins/running_means_kernels.py --property accuracy";
  const auto repro = [&](const char* kernel, const char* rest) {
    return cli(fmt::format("repro 'op=layernorm kernel={} {}'", kernel, rest) + kRunning);
  };
  const char* long_rows = "dtype=fp16 M=8 N=16392 seed=0x53";
  const Result declared = repro("torch_cuda_layer_norm_on_cpu", long_rows);
  EXPECT_EQ(declared.code, exit_code::kOk) << declared.output;
  const Result undeclared = repro("torch_cuda_layer_norm_on_cpu_undeclared", long_rows);
  EXPECT_EQ(undeclared.code, exit_code::kNothingJudged) << undeclared.output;
  EXPECT_NE(undeclared.output.find("power (elements that would show such an error) mean"), std::string::npos)
      << undeclared.output;
  const Result serial = repro("serial_sorted_welford_declared_as_torch",
                              "dtype=fp32 M=8 N=65536 dist=large_mean mean=0x1p8 sigma=0x1p0 seed=0x61");
  EXPECT_EQ(serial.code, exit_code::kPropertyFailed) << serial.output;
  // Constant rows of a length 4 does not divide, at a tiny eps: declared
  // update-form merges there (running_merges="update_unless_vectorized", as
  // RowwiseMoments merges), their statistics are exact and judged;
  // undeclared, rstd is not. RowwiseMoments' tree merged by weighted
  // averages, falsely declared update-form merges, fails.
  const char* constant_rows = "dtype=bf16 M=8 N=4093 dist=constant_rows sigma=0x1p6 eps=0x1p-40 seed=0x51";
  const Result merges = repro("torch_cuda_layer_norm_on_cpu", constant_rows);
  EXPECT_EQ(merges.code, exit_code::kOk) << merges.output;
  const Result undeclared_merges = repro("torch_cuda_layer_norm_on_cpu_undeclared", constant_rows);
  EXPECT_EQ(undeclared_merges.code, exit_code::kNothingJudged) << undeclared_merges.output;
  const Result weighted = repro("weighted_merges_declared_update", constant_rows);
  EXPECT_EQ(weighted.code, exit_code::kPropertyFailed) << weighted.output;
}

TEST_F(PythonDoor, PyTorchsFusedAddRmsNormPassesEveryPropertyInBothOrders) {
  // The unfused pipeline's order (the norm of residual_out, with fp32 weights
  // and an fp32 residual too), FlashInfer's and quack's (the norm of the fp32
  // sum) and HF Llama's (x-hat rounded before the weight), each with its backward.
  const std::string json = ::testing::TempDir() + "fused-add.jsonl";
  const Result r = cli("run --op fused_add_rmsnorm --kernel torch_fused_add_rms_norm_cpu --kernel "
                       "torch_fused_add_rms_norm_fp32_sum_cpu --kernel torch_fused_add_rms_norm_llama_cpu "
                       "--per-cell 30 --tier smoke --seed 3 --no-save "
                       "--no-corpus --json " +
                       json + kTorchOps);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  std::ifstream in(json);
  std::map<std::string, int> specs;  // "kernel res sum" -> cases
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] != "case") continue;
    const auto& c = j["case"];
    ++specs[fmt::format("{} res={} sum={}", c["kernel"].get<std::string>(), c.value("res", "T"),
                        c.value("sum", "rounded"))];
  }
  for (const char* s :
       {"torch_fused_add_rms_norm_cpu res=T sum=rounded", "torch_fused_add_rms_norm_cpu res=fp32 sum=rounded",
        "torch_fused_add_rms_norm_fp32_sum_cpu res=T sum=fp32", "torch_fused_add_rms_norm_llama_cpu res=T sum=rounded"})
    EXPECT_GT(specs[s], 0) << s << " among " << ::testing::PrintToString(specs);
}

TEST_F(PythonDoor, AFusedAddRmsNormNormalisingTheOtherSumThanItDeclaresIsCaught) {
  // The two orders differ by where T's rounding of x + residual falls: the
  // norm of the fp32 sum or of residual_out. A library that documents one
  // and ships the other fails the accuracy of y.
  // So does one that declares Llama's x-hat rounding and skips it.
  for (const char* kernel : {"py_fused_add_fp32_sum_declared_rounded", "py_fused_add_rounded_sum_declared_fp32",
                             "py_fused_add_llama_declared_xhat_unrounded"}) {
    const Result r = cli(std::string("run --op fused_add_rmsnorm --kernel ") + kernel +
                         " --property accuracy --per-cell 100 --seed 7 --no-save --no-corpus" + kFusedAdd);
    EXPECT_EQ(r.code, exit_code::kPropertyFailed) << kernel << "\n" << r.output;
    EXPECT_NE(r.output.find("worst y["), std::string::npos) << kernel << ": y, not residual_out\n" << r.output;
  }
  // Declaring its unfused pipeline (the add, then the norm of what it
  // stored), the first is caught by fused_vs_unfused too: y differs from the
  // pipeline's bit for bit, residual_out does not.
  const Result fused = cli("run --op fused_add_rmsnorm --kernel py_fused_add_fp32_sum_declared_rounded --property "
                           "fused_vs_unfused --per-cell 30 --seed 7 --no-save --no-corpus" +
                           kFusedAdd);
  EXPECT_EQ(fused.code, exit_code::kPropertyFailed) << fused.output;
  EXPECT_NE(fused.output.find("differ from the unfused pipeline py_add_then_norm; first y["), std::string::npos)
      << fused.output;
}

TEST_F(PythonDoor, AFusedAddBackwardIsJudgedAndQuackPr53sBugIsCaught) {
  // torch's fused add backward in fp32 ops (the spec: g = dresidual_out +
  // dnorm(dy), one fp32 sum) passes with dx, dresidual and dw judged, in both
  // orders (quack's: rstd of the fp32 sum, x-hat of the rounded residual_out).
  for (const char* kernel : {"torch_fused_add_rms_norm_cpu", "torch_fused_add_rms_norm_fp32_sum_cpu sum=fp32"}) {
    const Result r = cli(std::string("repro 'op=fused_add_rmsnorm kernel=") + kernel +
                         " dtype=bf16 M=5 N=33' --property accuracy" + kTorchOps);
    EXPECT_EQ(r.code, exit_code::kOk) << kernel << "\n" << r.output;
    for (const char* tensor : {"dx", "dresidual", "dw"})
      EXPECT_NE(r.output.find(tensor), std::string::npos) << kernel << ": " << tensor << " judged\n" << r.output;
  }
  // dnorm(dy + dresidual_out) instead: dx and dw wrong by far more than rounding.
  const Result bug = cli("run --op fused_add_rmsnorm --kernel py_fused_add_residual_grad_through_norm --property "
                         "accuracy --per-cell 30 --seed 7 --no-save --no-corpus" +
                         kFusedAdd);
  EXPECT_EQ(bug.code, exit_code::kPropertyFailed) << bug.output;
  EXPECT_TRUE(bug.output.find("worst dx[") != std::string::npos || bug.output.find("worst dw[") != std::string::npos ||
              bug.output.find("worst dresidual[") != std::string::npos)
      << bug.output;
}

TEST_F(PythonDoor, AVariantWrongOnlyOnItsFirstCallIsCaughtNamedAndReproduced) {
  // Its first call in a freshly started worker is one ulp off in one element,
  // every later call right: run 0 of the campaign's first case (its base
  // run) differs from that case's repeats, and the failure says run 0 was
  // the first call. Its repro starts a worker of its own, so run 0 is cold
  // again and the failure reproduces.
  const Result r = cli("run --op fused_add_rmsnorm --kernel py_fused_add_wrong_on_first_call --property determinism "
                       "--per-cell 5 --seed 3 --no-save --no-corpus" +
                       kFusedAdd);
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("run 0 was py_fused_add_wrong_on_first_call's first call after its worker started"),
            std::string::npos)
      << r.output;
  testing::expectReproFailsAgain(r.output, "first call after its worker started");
  // A variant that compiles per shape is cold on each shape's first call:
  // one wrong there (but for its first shape) fails on a later case, named so.
  // One case at a time: its "first shape" is that of the first call to
  // arrive, and two cases checked at once race for it (case 0 once lost, on
  // a 2-core CI machine, and failed).
  const Result shapes = cli("run --op fused_add_rmsnorm --kernel py_fused_add_wrong_on_first_call_of_each_shape "
                            "--property determinism --per-cell 5 --seed 3 --concurrent-cases 1 --no-save --no-corpus" +
                            kFusedAdd);
  EXPECT_EQ(shapes.code, exit_code::kPropertyFailed) << shapes.output;
  EXPECT_EQ(shapes.output.find("# FAIL determinism on case 0:"), std::string::npos) << shapes.output;
  EXPECT_NE(shapes.output.find("run 0 was py_fused_add_wrong_on_first_call_of_each_shape's first call of a shape it "
                               "compiles for"),
            std::string::npos)
      << shapes.output;
}

TEST_F(PythonDoor, AVariantDeclaringFp32WeightsIsJudgedOnThemAndOneThatDoesNotIsNot) {
  // torch's RMSNorm with an fp32 weight beside bf16 x: fp32 math, one
  // rounding to bf16, w.grad in fp32 (the plain spec, wdtype=fp32).
  Result r = cli("repro 'op=rmsnorm kernel=torch_rms_norm_cpu dtype=bf16 M=5 N=33 wdtype=fp32' --property accuracy" +
                 kTorchOps);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("dw"), std::string::npos) << r.output;
  // torch_layer_norm_cpu declares nothing but the plain spec: the case is not run on it.
  r = cli("repro 'op=layernorm kernel=torch_layer_norm_cpu dtype=bf16 M=5 N=33 wdtype=fp32' --property accuracy" +
          kTorchOps);
  EXPECT_NE(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("takes weights in the activation dtype only"), std::string::npos) << r.output;
}

TEST_F(PythonDoor, AVariantDeclaringOneSpecIsGeneratedAndJudgedOnThatSpecOnly) {
  // Llama's rounding point, Gemma's offset and LayerNorm statistics saved in
  // x's dtype, each declared by its variant: every property passes on the spec declared.
  for (const char* kernel : {"py_llama_rms_norm", "py_gemma_rms_norm", "py_layer_norm_x_dtype_stats"}) {
    const Result r = cli(std::string("run --kernel ") + kernel +
                         " --cases 120 --tier smoke --seed 5 --no-save --no-corpus --json " + ::testing::TempDir() +
                         kernel + ".jsonl" + kSpecs);
    EXPECT_EQ(r.code, exit_code::kOk) << kernel << "\n" << r.output;
  }
  // ... and only on it: a case of another spec is not run on the variant, saying why.
  const struct {
    const char* repro;
    const char* why;
  } refused[] = {
      {"op=rmsnorm kernel=py_llama_rms_norm dtype=bf16 M=3 N=17", "implements rounding=llama only"},
      {"op=rmsnorm kernel=py_gemma_rms_norm dtype=bf16 M=3 N=17", "does not implement weight offset 0"},
      {"op=layernorm kernel=py_layer_norm_x_dtype_stats dtype=fp16 M=3 N=17",
       "saves its statistics in the activation dtype (fp16) only"},
  };
  for (const auto& c : refused) {
    const Result r = cli(std::string("repro '") + c.repro + "' --property accuracy" + kSpecs);
    EXPECT_NE(r.code, exit_code::kOk) << c.repro << "\n" << r.output;
    EXPECT_NE(r.output.find(c.why), std::string::npos) << c.repro << "\n" << r.output;
  }
  // The declaration is what the kernel is judged against: the Llama kernel
  // declaring the plain spec fails accuracy (x-hat rounded to bf16 is up to
  // half an ulp of bf16 from the plain spec's), and on its own spec passes.
  Result r = cli("repro 'op=rmsnorm kernel=py_llama_rms_norm_declared_plain dtype=bf16 M=4 N=64' --property accuracy" +
                 kSpecs);
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  r = cli("repro 'op=rmsnorm kernel=py_llama_rms_norm dtype=bf16 M=4 N=64 rounding=llama' --property accuracy" +
          kSpecs);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
}

TEST_F(PythonDoor, ALayerNormDeclaringAffineVariantsRunsWithoutBetaAndWithoutEither) {
  // torch_layer_norm_cpu declares affine_variants: F.layer_norm with bias=None, and with neither parameter.
  for (const char* affine : {"nobias", "none"}) {
    const Result r = cli(std::string("repro 'op=layernorm kernel=torch_layer_norm_cpu dtype=fp32 M=5 N=33 affine=") +
                         affine + "' --property accuracy" + kTorchOps);
    EXPECT_EQ(r.code, exit_code::kOk) << affine << "\n" << r.output;
    EXPECT_NE(r.output.find("dx"), std::string::npos) << r.output;
    // The absent gradients are neither asked for nor judged.
    EXPECT_EQ(r.output.find("dbeta"), std::string::npos) << r.output;
  }
  // A variant that does not declare them is not run on such a case.
  const Result r = cli(
      "repro 'op=layernorm kernel=py_layer_norm_x_dtype_stats dtype=fp32 M=5 N=33 affine=none' --property accuracy" +
      kSpecs);
  EXPECT_NE(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("implements LayerNorm with gamma and beta only"), std::string::npos) << r.output;
}

TEST_F(PythonDoor, AnRmsNormWithoutABackwardIsJudgedOnItsForwardAlone) {
  // backward=None (an inference kernel, FlashInfer's rmsnorm): every property
  // passes on y; dx and dw are neither computed nor judged.
  Result r = cli("run --kernel py_gemma_rms_norm_forward_only --per-cell 10 --tier smoke --seed 5 --no-save "
                 "--no-corpus" +
                 kSpecs);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  r = cli("repro 'op=rmsnorm kernel=py_gemma_rms_norm_forward_only dtype=bf16 M=5 N=33 offset=1' --property accuracy" +
          kSpecs);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find(" y "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("dx"), std::string::npos) << r.output;
}

TEST_F(PythonDoor, AnFp8RmsNormIsJudgedOrRefusedClearlyWhereTorchHasNoFloat8) {
  // rmsnorm_quant (and fused_add_rmsnorm_quant) through the door: y_q in float8_e4m3fn, the static scale a
  // 1-element fp32 tensor. torch 2.1 and later: every property passes, NaN
  // past the range included (overflow="nonfinite"). Debian 12's torch 1.13
  // has no float8 dtypes: each case fails saying so, not with a KeyError.
  const Result version = cli("list" + kQuant);
  ASSERT_EQ(version.code, exit_code::kOk) << version.output;
  // fused_add_rmsnorm_quant the same way, residual_out beside y_q.
  for (const char* run : {"--op rmsnorm_quant --kernel py_rms_norm_static_fp8",
                          "--op fused_add_rmsnorm_quant --kernel py_fused_add_rms_norm_static_fp8"}) {
    const Result r =
        cli(std::string("run ") + run + " --per-cell 6 --tier smoke --seed 7 --no-save --no-corpus" + kQuant);
    const bool has_float8 = r.output.find("has no torch.float8_e4m3fn") == std::string::npos;
    if (has_float8) {
      EXPECT_EQ(r.code, exit_code::kOk) << r.output;
      EXPECT_NE(r.output.find("accuracy           "), std::string::npos) << r.output;
    } else {
      EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
      EXPECT_NE(r.output.find("an fp8 output needs torch 2.1 or later"), std::string::npos) << r.output;
    }
  }
}

TEST_F(PythonDoor, AnRmsNormDeclaringBiasVariantsIsJudgedWithAndWithoutABias) {
  // A campaign draws cases with a bias (1 in 4) beside the others; every property passes.
  const std::string jsonl = ::testing::TempDir() + "py_rms_norm_bias.jsonl";
  Result r = cli("run --kernel py_rms_norm_bias --cases 100 --tier smoke --seed 9 --no-save --no-corpus --json " +
                 jsonl + kSpecs);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  std::ifstream in(jsonl);
  const std::string lines((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(lines.find("bias=yes"), std::string::npos) << "no case drew a bias";
  // A bias case judges db (y's cancellations included), in fp32 weights too.
  r = cli("repro 'op=rmsnorm kernel=py_rms_norm_bias dtype=bf16 M=5 N=33 wdtype=fp32 bias=yes' --property accuracy" +
          kSpecs);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("db"), std::string::npos) << r.output;
  // The bias added after y's rounding to bf16 (a second rounding) fails accuracy.
  r = cli("repro 'op=rmsnorm kernel=py_rms_norm_bias_after_rounding dtype=bf16 M=8 N=64 bias=yes' --property accuracy" +
          kSpecs);
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  // A variant that does not declare a bias is not run on such a case, saying why.
  r = cli("repro 'op=rmsnorm kernel=py_gemma_rms_norm dtype=fp32 M=3 N=17 offset=1 bias=yes' --property accuracy" +
          kSpecs);
  EXPECT_NE(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(r.output.find("implements RMSNorm without a bias only"), std::string::npos) << r.output;
}

TEST_F(PythonDoor, ABadSpecDeclarationIsRefusedClearly) {
  // Registering `op`'s variant with `declaration` is refused, saying `error`.
  const auto refused = [&](const std::string& op, const std::string& declaration, const std::string& error) {
    const std::string file = ::testing::TempDir() + "bad_spec_kernels.py";
    const std::string backward = op == "fused_add_rmsnorm" || op == "allreduce_rmsnorm" ? "" : ", backward=None";
    FILE* f = fopen(file.c_str(), "w");
    fprintf(f, "import ulpcheck\nulpcheck.%s('x', forward=None%s, %s)\n", op.c_str(), backward.c_str(),
            declaration.c_str());
    fclose(f);
    const Result r = cli("list --python " + file);
    EXPECT_EQ(r.code, exit_code::kUsage) << op << " " << declaration << "\n" << r.output;
    EXPECT_NE(r.output.find(error), std::string::npos) << op << " " << declaration << "\n" << r.output;
  };
  const struct {
    const char* source;
    const char* error;
  } bad[] = {
      {"rounding='gemma'", "rounding must be 'plain' or 'llama'"},
      {"stats='bf16', saves_stats=True", "stats must be 'fp32' or 'activation'"},
      {"stats='activation'", "it saves none"},
      {"weight_offset=100.0", "weight_offset must be a number in [-16, 16]"},
      {"affine_variants=True",
       "affine_variants is not among rmsnorm's specs (fp32_weights, rounding, weight_offset, stats, bias_variants)"},
      {"bias_variants=True, rounding='llama'", "a bias with rounding='llama' is not modelled"},
      {"row_depth=(0, 5)", "row_depth must be a depth >= 0 or (lanes >= 1, levels >= 0), not (0, 5)"},
      {"col_depth=-1", "col_depth must be a depth >= 0 or (lanes >= 1, levels >= 0), not -1"},
      {"uses_saved_statistics=True", "uses_saved_statistics is LayerNorm's"},
      {"two_pass_statistics=True", "two_pass_statistics is LayerNorm's (its mean and variance)"},
      {"mean_of_plain_sum=True", "mean_of_plain_sum is LayerNorm's"},
      {"running_means=(128, 4, 9)", "running_means is LayerNorm's"},
  };
  for (const auto& b : bad) refused("rmsnorm", b.source, b.error);
  // LayerNorm's declarations about its statistics, on the fused RMSNorms too.
  for (const char* op : {"fused_add_rmsnorm", "allreduce_rmsnorm"})
    for (const char* declared : {"uses_saved_statistics", "two_pass_statistics"})
      refused(op, std::string(declared) + "=True", std::string(declared) + " is LayerNorm's");
  // LayerNorm's declarations about its statistics: saved ones where it saves
  // none, a running-means shape that is not one or that contradicts two-pass statistics.
  refused("layernorm", "uses_saved_statistics=True", "it saves none (saves_stats)");
  refused("layernorm", "running_means=(0, 4, 9)",
          "running_means must be (lanes >= 1, vector >= 1, levels >= 0), not (0, 4, 9)");
  refused("layernorm", "running_means=(128, 4)",
          "running_means must be (lanes >= 1, vector >= 1, levels >= 0), not (128, 4)");
  refused("layernorm", "running_means=(128, 4, 9), two_pass_statistics=True",
          "running_means declares running-means statistics; two_pass_statistics says they are two-pass");
  // A merge form that is not one, or without the shape it qualifies.
  refused("layernorm", "running_means=(128, 4, 9), running_merges='weighted'",
          "running_merges must be one of 'update', 'update_unless_vectorized', not 'weighted'");
  refused("layernorm", "running_merges='update'",
          "running_merges says how running means merge: declare their shape (running_means) too");
}

TEST_F(PythonDoor, OldTorchsBf16CpuLayerNormBackwardIsCaught) {
  // torch 1.13 (Debian bookworm's) computes the CPU bf16 LayerNorm backward
  // with too little precision (docs/external-kernels.md): dx off by several
  // times its budget on a 1 x 3 row.
  const Result version = cli("list" + kTorchOps);
  if (version.output.find(", torch 1.") == std::string::npos) GTEST_SKIP() << "not torch 1.x";
  const Result r =
      cli("repro 'op=layernorm kernel=torch_layer_norm_cpu dtype=bf16 M=1 N=3' --property accuracy" + kTorchOps);
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("dx"), std::string::npos) << r.output;
}

TEST_F(PythonDoor, APythonKernelThatRaisesOrCrashesIsAFailingCase) {
  Result r = cli("repro 'op=rmsnorm kernel=py_rms_raises_at_n3 dtype=fp32 M=2 N=3' --property accuracy" + kFaulty);
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("RuntimeError: unsupported hidden size 3"), std::string::npos) << r.output;
  r = cli("repro 'op=rmsnorm kernel=py_rms_segfaults_at_n7 dtype=fp32 M=2 N=7' --property accuracy" + kFaulty);
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("killed by signal 11"), std::string::npos) << r.output;
  // In a campaign every crash is a failing case and the run goes on: the
  // worker restarts and the variant's other shapes are judged (and pass).
  r = cli("run --kernel py_rms_segfaults_at_n7 --cases 300 --tier smoke --seed 4 --shrink-budget 5 --no-save "
          "--no-corpus" +
          kFaulty);
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("killed by signal 11"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cases judged with full power"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("NOTHING JUDGED"), std::string::npos) << r.output;
}

TEST_F(PythonDoor, AnOutputColumnTheLibraryNeverWroteIsCaught) {
  // On the CPU torch's allocator cannot be poisoned: the unwritten column is
  // caught as a wrong value (on the GPU too where the allocator reuses a
  // block the call itself freed: GpuPythonDoor).
  const Result r =
      cli("repro 'op=rmsnorm kernel=py_rms_column_0_unwritten dtype=fp32 M=64 N=33' --property accuracy" + kFaulty);
  EXPECT_EQ(r.code, exit_code::kPropertyFailed) << r.output;
  EXPECT_NE(r.output.find("dx "), std::string::npos) << r.output;
}

TEST_F(PythonDoor, AKernelCompiledForSomeHiddenSizesIsTestedAtThoseOnly) {
  // The variant raises at any N but the two it declares (cols=(5, 33)):
  // generated cases never hand it another, and a repro that does is refused.
  const Result r = cli("run --kernel py_rms_compiled_for_5_and_33 --cases 40 --tier smoke --seed 5 --no-save "
                       "--no-corpus" +
                       kFaulty);
  EXPECT_EQ(r.code, exit_code::kOk) << r.output;
  const Result other = cli("repro 'op=rmsnorm kernel=py_rms_compiled_for_5_and_33 dtype=fp32 M=2 N=6'" + kFaulty);
  EXPECT_NE(other.output.find("declared hidden sizes"), std::string::npos) << other.output;
}

TEST_F(PythonDoor, CompileTimeOfAKernelThatCompilesPerShapeIsNotAHang) {
  // The backward "compiles" for 3 s on the first call of each hidden size,
  // the case timeout is 2 s. Declared (compiles_per_shape=True, as quack's
  // adapter), first calls get remote::kCompileSeconds and every case passes;
  // undeclared, the first call is a hang. The worker's start (torch's
  // import) counts against neither.
  const std::string run = " --cases 6 --tier smoke --seed 5 --case-timeout 2 --no-save --no-corpus --no-shrink";
  const Result declared = cli("run --kernel py_rms_compiles_3s_per_n" + run + kFaulty);
  EXPECT_EQ(declared.code, exit_code::kOk) << declared.output;
  const Result undeclared = cli("run --kernel py_rms_compiles_3s_per_n_undeclared" + run + kFaulty);
  EXPECT_EQ(undeclared.code, exit_code::kHang) << undeclared.output;
  EXPECT_NE(undeclared.output.find("rmsnorm_backward did not return within 2 s"), std::string::npos)
      << undeclared.output;
}

TEST_F(PythonDoor, EachKillMatrixRowRunsInAFreshWorkerSoNoControlIsJudgedOnAnothersDamage) {
  // Sharing one worker, the second variant is wrong after the first ran:
  // the fixture's damage is real (one case at a time, the first variant's
  // first case before the second's).
  const Result shared = cli("run --op rmsnorm --kernel py_rms_marks_its_process py_rms_wrong_in_a_marked_process "
                            "--property accuracy --per-cell 5 --concurrent-cases 1 --seed 3 --no-save --no-corpus" +
                            kProcessState);
  EXPECT_EQ(shared.code, exit_code::kPropertyFailed) << shared.output;
  EXPECT_NE(shared.output.find("kernel=py_rms_wrong_in_a_marked_process"), std::string::npos) << shared.output;
  // In the kill matrix both are controls, after the mutant, each in a worker
  // of its own: no false alarm, in the properties or the baselines (which
  // judge only the outputs a variant produces: these save no rstd).
  const Result matrix = cli("mutants --backend host --mutant host_bug_rstd_bf16 --cases-per-mutant 10 "
                            "--shrink-budget 1" +
                            kProcessState);
  EXPECT_EQ(matrix.code, exit_code::kOk) << matrix.output;
  EXPECT_NE(matrix.output.find("in worker processes, a fresh one for each"), std::string::npos) << matrix.output;
  EXPECT_NE(matrix.output.find("0 false alarms on 5 correct variants"), std::string::npos) << matrix.output;
  for (const char* control : {"py_rms_marks_its_process", "py_rms_wrong_in_a_marked_process"})
    EXPECT_NE(matrix.output.find(fmt::format("(correct) {} ", control)), std::string::npos) << matrix.output;
}

/// The Python processes that imported import_counting_kernels.py during
/// `args`: {describing, serving}.
std::pair<int, int> pythonImportsDuring(const std::string& args, int expected_code) {
  const std::string log = ::testing::TempDir() + "import_counting.log";
  std::remove(log.c_str());
  setenv("ULPCHECK_TEST_IMPORT_LOG", log.c_str(), 1);
  const Result r = cli(args + kImportCounting);
  unsetenv("ULPCHECK_TEST_IMPORT_LOG");
  EXPECT_EQ(r.code, expected_code) << args << "\n" << r.output;
  std::pair<int, int> imports{0, 0};
  std::ifstream in(log);
  for (std::string pid, mode; in >> pid >> mode;) ++(mode == "describe" ? imports.first : imports.second);
  return imports;
}

TEST_F(PythonDoor, ARunsWorkerProcessesUseItsDescriptionOfThePythonFilesNotTheirOwn) {
  // Two worker processes, each with its Python worker; the files described
  // once, by the coordinator (each describe more was an interpreter start
  // and a torch import on the run's critical path).
  EXPECT_EQ(pythonImportsDuring("run --backend host --workers 2 --kernel py_rms_counts_its_imports --cases 20 "
                                "--seed 3 --no-save --no-corpus",
                                exit_code::kOk),
            std::make_pair(1, 2));
  // A description handed down for other files (or an edited one) is not used.
  setenv("ULPCHECK_PYTHON_DESCRIBED",
         R"({"key": {"python": "python3", "files": [["/elsewhere/kernels.py", 1, 2]]},
             "variants": [{"op": "rmsnorm", "name": "not_in_this_file"}]})",
         1);
  EXPECT_EQ(pythonImportsDuring("list", exit_code::kOk), std::make_pair(1, 0));
  const Result listed = cli("list" + kImportCounting);
  unsetenv("ULPCHECK_PYTHON_DESCRIBED");
  EXPECT_NE(listed.output.find("py_rms_counts_its_imports"), std::string::npos) << listed.output;
  EXPECT_EQ(listed.output.find("not_in_this_file"), std::string::npos) << listed.output;
}

TEST_F(PythonDoor, AFileThatCannotBeLoadedIsRefusedClearly) {
  Result r = cli("list --python /nonexistent/kernels.py");
  EXPECT_EQ(r.code, exit_code::kUsage) << r.output;
  EXPECT_NE(r.output.find("no such file"), std::string::npos) << r.output;
  const std::string bad = ::testing::TempDir() + "bad_kernels.py";
  FILE* f = fopen(bad.c_str(), "w");
  fputs("import ulpcheck\nulpcheck.rmsnorm('x', forward=None, backward=None, dtypes=('fp64',))\n", f);
  fclose(f);
  r = cli("list --python " + bad);
  EXPECT_EQ(r.code, exit_code::kUsage) << r.output;
  EXPECT_NE(r.output.find("dtypes must be among"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ulpcheck
