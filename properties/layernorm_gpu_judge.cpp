#include "properties/layernorm_gpu_judge.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "core/datagen.h"
#include "core/phase_timer.h"
#include "oracles/column_sum.h"
#include "oracles/layernorm.h"
#include "oracles/layernorm_device.h"
#include "oracles/oracle_mode.h"
#include "properties/gpu_judge.h"
#include "properties/layernorm_inputs.h"
#include "properties/row_op.h"
#include "properties/run_buffers.h"

namespace ulpcheck {

namespace {

/// Chunk sums from the device as the host fast path's chunk words, combined in chunk order.
mp::WordColumnFold wordChunks(const gpu_oracle::ColumnChunkSums& sums, int64_t N) {
  mp::WordColumnFold chunks(sums.chunks, N);
  for (int64_t k = 0; k < sums.chunks; ++k) {
    auto chunk = std::make_unique<mp::WordColumnChunk>(N);
    for (int64_t j = 0; j < N; ++j) {
      const size_t e = size_t(k * N + j);
      chunk->sum[size_t(j)] = dw::DW{sums.sum_hi[e], sums.sum_lo[e]};
      chunk->err[size_t(j)] = sums.err[e];
      chunk->abs_terms[size_t(j)] = sums.abs_terms[e];
      chunk->gain[size_t(j)] = sums.gain[e];
      chunk->sq_terms[size_t(j)] = sums.sq_terms[e];
    }
    chunks.add(std::move(chunk));
  }
  return chunks;
}

}  // namespace

bool layernormGpuJudgeApplies(const CaseSpec& c, const KernelInfo& k) {
  return k.backend == Backend::Cuda && !k.black_box && statsDtype(c.dtype, c.spec) == DType::F32;
}

Outcome layernormAccuracyOnGpu(const CaseSpec& c, const LayerNormKernel& k, const ExecContext& ctx,
                               const DescribeInputs& describe, const RunResult* outputs, double widen,
                               OutputDigests* digests) {
  if (!layernormGpuJudgeApplies(c, k.info))
    throw std::invalid_argument(fmt::format("the GPU judge does not model case '{}'", toCaseString(c)));
  const int64_t M = c.M, N = c.N;
  const RowShape shape{c.dtype, M, N, c.ld, c.eps, c.spec};
  const DType wt = weightDtype(c.dtype, c.spec);
  const LaunchEnv env = launchEnv(c, ctx);
  const AccuracyContract contract{k.info.contracts.accumulation, k.depths(shape, env),
                                  k.info.contracts.column_reduction_ftz};

  // The run: inputs generated on the device (the bits generateHost makes),
  // the variant's forward then backward, as LayerNormOp::run does.
  RunBuffers buf(Backend::Cuda, k.info.unprovided_outputs);  // what the variant does not produce is scratch
  const void* x = buf.generated("x", c.x, c.dtype, c.seed, TensorStream::X, M, N, c.ld);
  // Parameters the spec lacks (affine=nobias, none) are null: gamma 1, beta 0.
  const void* gamma = hasGamma(c.spec)
                          ? buf.generated("gamma", kLayerNormGammaDist, wt, c.seed, TensorStream::Weight, 1, N, N)
                          : nullptr;
  const void* beta = hasBeta(c.spec)
                         ? buf.generated("beta", kLayerNormBetaDist, wt, c.seed, TensorStream::Bias, 1, N, N)
                         : nullptr;
  const void* dy = buf.generated("dy", layerNormGradDist(c), c.dtype, c.seed, TensorStream::GradOut, M, N, c.ld);
  void* y = buf.output("y", c.dtype, M, N, c.ld, true);
  auto* mean = static_cast<float*>(buf.output("mean", DType::F32, M, 1, 1, true));
  auto* rstd = static_cast<float*>(buf.output("rstd", DType::F32, M, 1, 1, true));
  void* dx = buf.output("dx", c.dtype, M, N, c.ld, true);
  void* dgamma = hasGamma(c.spec) ? buf.output("dgamma", wt, 1, N, N, false) : nullptr;
  void* dbeta = hasBeta(c.spec) ? buf.output("dbeta", wt, 1, N, N, false) : nullptr;
  std::vector<const char*> names{"y", "mean", "rstd", "dx"};
  if (dgamma) names.push_back("dgamma");
  if (dbeta) names.push_back("dbeta");
  runOrUpload(
      buf, k.info, ctx, names, outputs, digests, k.workspace_bytes(shape, env),
      [&](void* workspace) {
        k.forward(LayerNormForwardArgs{shape, x, gamma, beta, y, mean, rstd}, env);
        k.backward(LayerNormBackwardArgs{shape, x, gamma, dy, mean, rstd, dx, dgamma, dbeta, workspace}, env);
      },
      "layernorm forward + backward");

  // y, mean, rstd and dx, every element, on the GPU; y, rstd and dx also
  // about the run's own statistics where the variant forms them from those
  // (LayerNormOp::conditionalBounds' rule).
  gpu_oracle::LayerNormDeviceCase dc;
  dc.T = c.dtype, dc.W = wt, dc.M = M, dc.N = N, dc.ld = c.ld;
  dc.x = x, dc.gamma = gamma, dc.beta = beta, dc.dy = dy, dc.y = y, dc.mean = mean, dc.rstd = rstd, dc.dx = dx;
  dc.k = layernorm_budget::constantsOf(c.dtype, DType::F32, contract, c.eps);
  dc.on_saved_statistics = contract.depths.uses_saved_statistics && k.info.provides("mean") && k.info.provides("rstd");
  dc.widen = widen;
  gpu_oracle::LayerNormRowsJudged judged;
  {
    const PhaseScope phase(Phase::Oracle);
    judged = gpu_oracle::judgeLayerNormRows(dc);
  }

  // On the host: the rows the GPU left undecided (judged whole), and the
  // rows holding each tensor's worst elements (for the findings only).
  const PhaseScope phase(Phase::Judge);
  std::vector<int64_t> rows;
  const int64_t undecided_rows = hostRows(
      judged.undecided, {&judged.figures[0], &judged.figures[1], &judged.figures[2], &judged.figures[3]}, rows);
  const LayerNormInputData sub = generateLayerNormInputs(c, rows);
  const LayerNormInputs sub_inputs{sub.x, sub.gamma, sub.beta, sub.dy, c.eps, c.spec};
  const LayerNormFastRows host = layernormRowsFast(sub_inputs, contract, ctx.pool ? *ctx.pool : ThreadPool::shared(),
                                                   nullptr);
  const std::array<OutputTensor, gpu_oracle::kLayerNormTensors> sub_out{
      downloadRows(*buf.find("y"), "y", c.dtype, rows, N, c.ld),
      downloadRows(*buf.find("mean"), "mean", DType::F32, rows, 1, 1),
      downloadRows(*buf.find("rstd"), "rstd", DType::F32, rows, 1, 1),
      downloadRows(*buf.find("dx"), "dx", c.dtype, rows, N, c.ld)};
  std::unique_ptr<ConditionalBounds> own;
  if (dc.on_saved_statistics) {
    std::vector<double> saved_mean(rows.size()), saved_rstd(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      saved_mean[r] = sub_out[1].value(int64_t(r), 0);
      saved_rstd[r] = sub_out[2].value(int64_t(r), 0);
    }
    own = layernormSavedStatisticsBounds(sub_inputs, contract, std::move(saved_mean), std::move(saved_rstd));
  }
  const std::array<const ReferenceTensor*, gpu_oracle::kLayerNormTensors> sub_refs{&host.ref.y, &host.ref.mean,
                                                                                   &host.ref.rstd, &host.ref.dx};
  std::vector<TensorJudgment> tensors;
  for (int t = 0; t < gpu_oracle::kLayerNormTensors; ++t) {
    TensorJudgment j = fromDevice(gpu_oracle::kLayerNormTensorNames[t], judged.figures[size_t(t)], judged.undecided,
                                  judged.distribution[size_t(t)]);
    mergeHostRows(j, *sub_refs[size_t(t)], sub_out[size_t(t)], rows, judged.undecided, judged.figures[size_t(t)], M,
                  own.get());
    tensors.push_back(std::move(j));
  }

  // dgamma and dbeta: the GPU's chunk sums and ordered bounds, finished on
  // the host. The rows the host computed give their nearest x-hat, Dx and
  // r for dgamma's magnitudes; every row's exact statistics (the GPU's or
  // the host's) the ordered bounds' leaves.
  std::vector<gpu_oracle::LayerNormRowWords> words = std::move(judged.words);
  std::vector<int64_t> host_row(size_t(M), -1);
  std::vector<double> host_xhat, host_dxh;
  for (size_t r = 0; r < rows.size(); ++r) {
    gpu_oracle::LayerNormRowWords& w = words[size_t(rows[r])];
    if (!judged.undecided[size_t(rows[r])]) continue;
    host_row[size_t(rows[r])] = int64_t(host_xhat.size()) / std::max<int64_t>(N, 1);
    host_xhat.insert(host_xhat.end(), host.xhat.begin() + ptrdiff_t(r) * N, host.xhat.begin() + ptrdiff_t(r + 1) * N);
    host_dxh.insert(host_dxh.end(), host.dxh.begin() + ptrdiff_t(r) * N, host.dxh.begin() + ptrdiff_t(r + 1) * N);
    w.r = host.r[r];
    w.mean_odd = host.ref.mean.exact[r];
    w.rstd_odd = host.ref.rstd.exact[r];
  }
  std::vector<double> mean_odd(static_cast<size_t>(M)), rstd_odd(static_cast<size_t>(M));
  for (size_t i = 0; i < words.size(); ++i) mean_odd[i] = words[i].mean_odd, rstd_odd[i] = words[i].rstd_odd;

  // Only a column the chunk sums do not decide needs the whole inputs on the host.
  std::optional<LayerNormInputData> whole_data;
  std::optional<LayerNormInputs> whole_inputs;
  const auto whole = [&]() -> const LayerNormInputs& {
    if (!whole_inputs) {
      whole_data = generateLayerNormInputs(c, identityRows(M));
      whole_inputs.emplace(
          LayerNormInputs{whole_data->x, whole_data->gamma, whole_data->beta, whole_data->dy, c.eps, c.spec});
    }
    return *whole_inputs;
  };
  const HostMatrix x_shape{c.dtype, M, N, c.ld, {}}, dy_shape{c.dtype, M, N, c.ld, {}};
  const LayerNormInputs shape_only{x_shape, sub.gamma, sub.beta, dy_shape, c.eps, c.spec};
  const int64_t chunks = mp::columnChunkCount(M, N);
  const std::vector<ColumnOrder> orders = contract.column_reduction_ftz ? std::vector<ColumnOrder>{}
                                                                        : contract.depths.col_orders;
  if (dgamma) {
    std::optional<mp::WordColumnFold> dgamma_chunks;
    std::vector<mp::OrderedColumnBound> ordered;
    {
      const PhaseScope oracle_phase(Phase::Oracle);
      dgamma_chunks = wordChunks(gpu_oracle::dgammaChunkSums(dc, chunks, words, host_row, host_xhat, host_dxh), N);
      for (const ColumnOrder& order : orders) {
        mp::OrderedColumnBound b = mp::orderedColumnShape(M, order);
        b.partial_abs = gpu_oracle::dgammaOrderedPartialAbs(dc, order, b.depth, mean_odd, rstd_odd);
        ordered.push_back(std::move(b));
      }
    }
    const ReferenceTensor ref = layernormDgammaFromChunks(shape_only, contract, *dgamma_chunks, ordered, widen, whole,
                                                          &oracleCounts());
    const OutputTensor got = downloadRows(*buf.find("dgamma"), "dgamma", wt, {0}, N, N);
    TensorJudgment judged_dgamma = judgeTensorRows(ref, got, 0, 1);
    // dgamma's bound on the run's own statistics (ConditionalBounds::
    // onlyWithoutPower), as the host judge takes it: only where its budgets
    // about the exact value lack power, from every row's inputs and saved
    // statistics, on the host.
    if (dc.on_saved_statistics && judged_dgamma.st.withoutPower()) {
      const std::vector<int64_t> all = identityRows(M);
      const OutputTensor all_mean = downloadRows(*buf.find("mean"), "mean", DType::F32, all, 1, 1),
                         all_rstd = downloadRows(*buf.find("rstd"), "rstd", DType::F32, all, 1, 1);
      std::vector<double> saved_mean(static_cast<size_t>(M)), saved_rstd(static_cast<size_t>(M));
      for (int64_t i = 0; i < M; ++i)
        saved_mean[size_t(i)] = all_mean.value(i, 0), saved_rstd[size_t(i)] = all_rstd.value(i, 0);
      const std::unique_ptr<ConditionalBounds> own_all = layernormSavedStatisticsBounds(
          whole(), contract, std::move(saved_mean), std::move(saved_rstd));
      if (own_all->onlyWithoutPower("dgamma"))
        judged_dgamma = judgeTensorRows(ref, got, 0, 1, nullptr, 0, own_all.get());
    }
    tensors.push_back(std::move(judged_dgamma));
  }
  if (dbeta) {
    std::vector<mp::ColumnTotal> totals(static_cast<size_t>(N));
    std::vector<int64_t> undecided;
    std::vector<mp::OrderedColumnBound> ordered;
    {
      const PhaseScope oracle_phase(Phase::Oracle);
      const gpu_oracle::ColumnChunkSums sums = gpu_oracle::dbetaChunkSums(dc, chunks);
      undecided = mp::decideExactLeafColumns(wordChunks(sums, N), sums.smallest_ulp, widen, totals);
      for (const ColumnOrder& order : orders) {
        mp::OrderedColumnBound b = mp::orderedColumnShape(M, order);
        b.partial_abs = gpu_oracle::dbetaOrderedPartialAbs(dc, order, b.depth);
        ordered.push_back(std::move(b));
      }
    }
    if (!undecided.empty()) {
      const HostMatrix& v = whole().dy;
      const std::vector<double> exact = mp::mpfrColumnSums(
          M, chunks, undecided, [](int64_t) {},
          [&](mpfr_ptr out, int64_t i, int64_t j) { mpfr_set_d(out, v.value(i, j), MPFR_RNDN); });  // exact
      for (size_t e = 0; e < undecided.size(); ++e) totals[size_t(undecided[e])].exact = exact[e];
    }
    oracleCounts().fast += N - int64_t(undecided.size());
    oracleCounts().fell_back += int64_t(undecided.size());
    const ReferenceTensor ref = mp::biasGradientBudgets("dbeta", wt, M, contract, totals, ordered);
    tensors.push_back(judgeTensorRows(ref, downloadRows(*buf.find("dbeta"), "dbeta", wt, {0}, N, N), 0, 1));
  }
  // Only the outputs the variant produces are judged (CaseContext::reference's rule).
  std::erase_if(tensors, [&](const TensorJudgment& t) { return !k.info.provides(t.st.tensor); });

  const int64_t per_row = 2 * N + 2;
  oracleCounts().fast += (M - undecided_rows) * per_row;
  oracleCounts().fell_back += undecided_rows * per_row;
  return accuracyVerdict(std::move(tensors), describe);
}

}  // namespace ulpcheck
