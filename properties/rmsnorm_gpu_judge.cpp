#include "properties/rmsnorm_gpu_judge.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/datagen.h"
#include "core/phase_timer.h"
#include "oracles/oracle_mode.h"
#include "oracles/probabilistic.h"
#include "oracles/rmsnorm.h"
#include "oracles/rmsnorm_device.h"
#include "oracles/tolerances.h"
#include "properties/gpu_judge.h"
#include "properties/rmsnorm_inputs.h"
#include "properties/row_op.h"
#include "properties/run_buffers.h"

namespace ulpcheck {

bool rmsnormGpuJudgeApplies(const CaseSpec& c, const KernelInfo& k) {
  return k.backend == Backend::Cuda && kRounding(c.spec) == Rounding::Plain && !statsInActivationDtype(c.spec) &&
         !kRmsBias(c.spec);
}

Outcome rmsnormAccuracyOnGpu(const CaseSpec& c, const RmsNormKernel& k, const ExecContext& ctx,
                             const DescribeInputs& describe, const RunResult* outputs, double widen,
                             OutputDigests* digests) {
  if (!rmsnormGpuJudgeApplies(c, k.info))
    throw std::invalid_argument(fmt::format("the GPU judge does not model case '{}'", toCaseString(c)));
  const int64_t M = c.M, N = c.N;
  const RowShape shape{c.dtype, M, N, c.ld, c.eps, c.spec};
  const DType wt = shape.wdtype();
  const LaunchEnv env = launchEnv(c, ctx);
  const AccuracyContract contract{k.info.contracts.accumulation, k.depths(shape, env),
                                  k.info.contracts.column_reduction_ftz};
  ThreadPool& pool = ctx.pool ? *ctx.pool : ThreadPool::shared();
  // A black box on data the random-rounding model fits is also held to the
  // probabilistic budget: the same oracle at the effective depths
  // (referenceWithStatisticalBudgets; its elements: y, rstd, dx and dw).
  const bool statistical = k.info.black_box && statisticalModelHolds(c);
  AccuracyContract probable = contract;
  probable.depths = probabilistic::effectiveDepths(contract.depths, double(2 * M * N + M + N),
                                                   unitRoundoff(contract.accumulation));

  // The run: inputs generated on the device (the bits generateHost makes),
  // the variant's forward then backward, as RmsNormOp::run does.
  RunBuffers buf(Backend::Cuda, k.info.unprovided_outputs);  // what the variant does not produce is scratch
  const void* x = buf.generated("x", c.x, c.dtype, c.seed, TensorStream::X, M, N, c.ld);
  const void* w = buf.generated("w", rmsNormWeightDist(c.spec), wt, c.seed, TensorStream::Weight, 1, N, N);
  const void* dy = buf.generated("dy", rmsNormGradDist(c), c.dtype, c.seed, TensorStream::GradOut, M, N, c.ld);
  void* y = buf.output("y", c.dtype, M, N, c.ld, true);
  auto* rstd = static_cast<float*>(buf.output("rstd", DType::F32, M, 1, 1, true));
  void* dx = buf.output("dx", c.dtype, M, N, c.ld, true);
  void* dw = buf.output("dw", wt, 1, N, N, false);
  runOrUpload(
      buf, k.info, ctx, {"y", "rstd", "dx", "dw"}, outputs, digests, k.workspace_bytes(shape, env),
      [&](void* workspace) {
        k.forward(RmsNormForwardArgs{shape, x, w, y, rstd, nullptr}, env);
        if (k.backward) k.backward(RmsNormBackwardArgs{shape, x, w, dy, rstd, dx, dw, workspace, nullptr}, env);
      },
      "rmsnorm forward + backward");

  // y, rstd and dx, every element, on the GPU.
  gpu_oracle::RmsNormDeviceCase dc;
  dc.T = c.dtype, dc.W = wt, dc.M = M, dc.N = N, dc.ld = c.ld, dc.eps = c.eps, dc.offset = kWeightOffset(c.spec);
  dc.x = x, dc.w = w, dc.dy = dy, dc.y = y, dc.rstd = rstd, dc.dx = dx;
  dc.acc = contract.accumulation;
  dc.d_row = double(contract.depths.row);
  dc.delta_r = gpu_oracle::rstdUnits(dc.d_row, tolerance::kRsqrtUnits);
  dc.w_units = dc.offset != 0.0 ? 1.0 : 0.0;
  dc.statistical = statistical;
  dc.d_row_statistical = double(probable.depths.row);
  dc.delta_r_statistical = gpu_oracle::rstdUnits(dc.d_row_statistical, tolerance::kRsqrtUnits);
  dc.widen = widen;
  gpu_oracle::RowsJudged judged;
  {
    const PhaseScope phase(Phase::Oracle);
    judged = gpu_oracle::judgeRows(dc);
  }

  // On the host: the rows the GPU left undecided (judged whole), and the
  // rows holding each tensor's worst elements (for the findings only).
  const PhaseScope phase(Phase::Judge);
  std::vector<int64_t> rows;
  const int64_t undecided_rows = hostRows(judged.undecided,
                                          {&judged.figures[0], &judged.figures[1], &judged.figures[2]}, rows);
  const RmsNormInputData sub = generateRmsNormInputs(c, rows);
  const RmsNormInputs sub_inputs{sub.x, sub.w, sub.dy, c.eps, c.spec};
  RmsNormReference sub_ref = rmsnormReferenceFast(sub_inputs, contract, pool);
  if (statistical) {
    RmsNormReference sharp = rmsnormReferenceFast(sub_inputs, probable, pool);
    sub_ref.y.statistical_budget = std::move(sharp.y.budget);
    sub_ref.rstd.statistical_budget = std::move(sharp.rstd.budget);
    sub_ref.dx.statistical_budget = std::move(sharp.dx.budget);
  }
  const std::array<const ReferenceTensor*, gpu_oracle::kTensors> sub_refs{&sub_ref.y, &sub_ref.rstd, &sub_ref.dx};
  const std::array<OutputTensor, gpu_oracle::kTensors> sub_out{
      downloadRows(*buf.find("y"), "y", c.dtype, rows, N, c.ld),
      downloadRows(*buf.find("rstd"), "rstd", DType::F32, rows, 1, 1),
      downloadRows(*buf.find("dx"), "dx", c.dtype, rows, N, c.ld)};
  std::vector<TensorJudgment> tensors;
  for (int t = 0; t < gpu_oracle::kTensors; ++t) {
    TensorJudgment j = fromDevice(gpu_oracle::kTensorNames[t], judged.figures[size_t(t)], judged.undecided,
                                  judged.distribution[size_t(t)]);
    mergeHostRows(j, *sub_refs[size_t(t)], sub_out[size_t(t)], rows, judged.undecided, judged.figures[size_t(t)], M);
    tensors.push_back(std::move(j));
  }

  // dW: the GPU's chunk sums and ordered bounds, finished on the host. Each
  // row's r: the GPU's, or for a row it left undecided the host's (160 bits).
  std::vector<double> r_hi = judged.r_hi, r_lo = judged.r_lo, rel_r = judged.rel_r, r_near = judged.r_near,
                      r_odd = judged.r_odd;
  {
    std::vector<int64_t> host_rows;  // their places in `rows`
    for (size_t r = 0; r < rows.size(); ++r)
      if (judged.undecided[size_t(rows[r])]) host_rows.push_back(int64_t(r));
    const std::vector<dw::DW> words = rmsnormRstdWords(sub_inputs, contract, host_rows);
    for (size_t k = 0; k < host_rows.size(); ++k) {
      const size_t r = size_t(host_rows[k]), i = size_t(rows[r]);
      r_hi[i] = words[k].h, r_lo[i] = words[k].l, rel_r[i] = 0x1p-104, r_near[i] = words[k].h;
      r_odd[i] = sub_ref.rstd.exact[r];
    }
  }
  const int64_t chunks = mp::columnChunkCount(M, N);
  mp::WordColumnFold dw_chunks(chunks, N);
  std::vector<mp::OrderedColumnBound> ordered;
  {
    const PhaseScope oracle_phase(Phase::Oracle);
    const gpu_oracle::DwChunkSums sums = gpu_oracle::dwChunkSums(dc, chunks, r_hi, r_lo, rel_r, r_near);
    for (int64_t k = 0; k < chunks; ++k) {
      auto chunk = std::make_unique<mp::WordColumnChunk>(N);
      for (int64_t j = 0; j < N; ++j) {
        const size_t e = size_t(k * N + j);
        chunk->sum[size_t(j)] = dw::DW{sums.sum_hi[e], sums.sum_lo[e]};
        chunk->err[size_t(j)] = sums.err[e];
        chunk->abs_terms[size_t(j)] = sums.abs_terms[e];
        chunk->gain[size_t(j)] = sums.gain[e];
        chunk->sq_terms[size_t(j)] = sums.sq_terms[e];
        chunk->spread[size_t(j)] = sums.spread[e];
      }
      dw_chunks.add(std::move(chunk));
    }
    if (!contract.column_reduction_ftz)
      for (const ColumnOrder& order : contract.depths.col_orders) {
        mp::OrderedColumnBound b = mp::orderedColumnShape(M, order);
        b.partial_abs = gpu_oracle::orderedPartialAbs(dc, order, b.depth, r_odd);
        ordered.push_back(std::move(b));
      }
  }
  // Only a column the chunk sums do not decide needs the whole inputs on the host.
  const HostMatrix x_shape{c.dtype, M, N, c.ld, {}}, dy_shape{c.dtype, M, N, c.ld, {}};
  std::optional<RmsNormInputData> whole_data;
  std::optional<RmsNormInputs> whole_inputs;
  const auto whole = [&]() -> const RmsNormInputs& {
    if (!whole_inputs) {
      whole_data = generateRmsNormInputs(c, identityRows(M));
      whole_inputs.emplace(RmsNormInputs{whole_data->x, whole_data->w, whole_data->dy, c.eps, c.spec});
    }
    return *whole_inputs;
  };
  const RmsNormInputs shape_only{x_shape, sub.w, dy_shape, c.eps, c.spec};
  ReferenceTensor dw_ref = rmsnormDwFromPass(shape_only, contract, dw_chunks, ordered, widen, whole, &oracleCounts());
  if (statistical)
    dw_ref.statistical_budget =
        rmsnormDwFromPass(shape_only, probable, dw_chunks, ordered, widen, whole, nullptr).budget;
  const OutputTensor dw_out = downloadRows(*buf.find("dw"), "dw", wt, {0}, N, N);
  tensors.push_back(judgeTensorRows(dw_ref, dw_out, 0, 1));
  // Only the outputs the variant produces are judged (CaseContext::reference's rule).
  std::erase_if(tensors, [&](const TensorJudgment& t) { return !k.info.provides(t.st.tensor); });

  const int64_t per_row = 2 * N + 1;
  oracleCounts().fast += (M - undecided_rows) * per_row;
  oracleCounts().fell_back += undecided_rows * per_row;
  return accuracyVerdict(std::move(tensors), describe);
}

}  // namespace ulpcheck
