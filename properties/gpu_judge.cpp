#include "properties/gpu_judge.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "core/device.h"
#include "core/phase_timer.h"
#include "core/schedule_noise.h"

namespace ulpcheck {

namespace {

/// Bytes between wanted rows that one copy brings along rather than start
/// another: a copy costs some microseconds, about what this many bytes take.
constexpr size_t kDownloadGapBytes = size_t{64} << 10;

}  // namespace

void runOrUpload(RunBuffers& buf, const KernelInfo& k, const ExecContext& ctx, const std::vector<const char*>& names,
                 const RunResult* outputs, OutputDigests* digests, size_t workspace_bytes,
                 const std::function<void(void* workspace)>& launch, const char* what) {
  if (outputs) {
    const PhaseScope phase(Phase::Buffers);
    for (const char* name : names) {
      if (!k.provides(name)) continue;
      const OutputTensor* o = outputs->find(name);
      if (!o || !o->downloaded)
        throw std::logic_error(fmt::format("GPU judge: no downloaded output '{}' to judge", name));
      const std::vector<uint8_t> bytes = packBits(o->bits, o->dtype);
      buf.find(name)->upload(bytes.data(), bytes.size());
    }
    return;
  }
  void* workspace = buf.scratch("workspace", std::max<size_t>(workspace_bytes, 1));
  const PhaseScope phase(Phase::Kernel);
  {
    const ScheduleNoise noise(ctx.perturb_schedule && !k.remote, k.backend, ctx.sm_count);
    launch(workspace);
    synchronizeVariant(what);
  }
  if (digests)
    for (const char* name : names)
      if (k.provides(name)) (*digests)[name] = buf.find(name)->digest();
}

OutputTensor downloadRows(const Buffer& b, const std::string& name, DType t, const std::vector<int64_t>& rows,
                          int64_t cols, int64_t ld) {
  const size_t w = size_t(storageBytes(t)), row_bytes = size_t(cols) * w, stride = size_t(ld) * w;
  std::vector<uint8_t> bytes(rows.size() * row_bytes), span;
  // Rows close together come in one copy (a tall case's undecided rows are
  // thousands: a copy each cost more than the rest of its judgment).
  for (size_t k = 0; k < rows.size();) {
    size_t end = k + 1;
    while (end < rows.size() && rows[end] > rows[end - 1] &&
           size_t(rows[end] - rows[k]) * stride + row_bytes <= (end - k + 1) * row_bytes + kDownloadGapBytes)
      ++end;
    const size_t first = size_t(rows[k]) * stride;
    span.resize(size_t(rows[end - 1] - rows[k]) * stride + row_bytes);
    b.download(span.data(), span.size(), first);
    for (size_t r = k; r < end; ++r)
      std::memcpy(bytes.data() + r * row_bytes, span.data() + (size_t(rows[r]) * stride - first), row_bytes);
    k = end;
  }
  return OutputTensor{name, t, int64_t(rows.size()), cols, cols, true, unpackBits(std::move(bytes), t)};
}

std::vector<int64_t> worstRows(const std::vector<gpu_oracle::RowFigures>& figures,
                               const std::vector<uint8_t>& undecided) {
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < int64_t(figures.size()); ++i)
    if (!undecided[size_t(i)]) rows.push_back(i);
  const auto worse = [&](int64_t a, int64_t b) {
    const double ra = figures[size_t(a)].max_ratio, rb = figures[size_t(b)].max_ratio;
    return ra != rb ? ra > rb : a < b;
  };
  const size_t keep = std::min(rows.size(), kReportedFindings);
  std::partial_sort(rows.begin(), rows.begin() + ptrdiff_t(keep), rows.end(), worse);
  rows.resize(keep);
  return rows;
}

TensorJudgment fromDevice(const std::string& name, const std::vector<gpu_oracle::RowFigures>& figures,
                          const std::vector<uint8_t>& undecided, const gpu_oracle::Distribution& d) {
  TensorJudgment j;
  j.st.tensor = name;
  for (size_t i = 0; i < figures.size(); ++i) {
    if (undecided[i]) continue;
    const gpu_oracle::RowFigures& f = figures[i];
    j.st.elements += f.elements, j.st.wrong += f.wrong, j.st.nonzero += f.nonzero, j.st.sharp += f.sharp;
    j.st.max_ulp = std::max(j.st.max_ulp, f.max_ulp);
    j.st.max_ratio = std::max(j.st.max_ratio, f.max_ratio);
    j.sum_sq_ulp += f.sum_sq_ulp;
    j.finite_count += f.finite;
    j.nontrivial |= f.nontrivial != 0;
    j.statistical_flags += f.statistical_flags;
    j.bias.add(f.bias);
  }
  ErrorDistribution& e = j.st.errors;
  e.count = d.count;
  e.max_ulp_at_scale = d.max_ulp_at_scale;
  e.ratio = d.ratio;
  e.ulp_at_scale = d.ulp_at_scale;
  e.worst_where = d.worst_where;
  e.scale_count = d.scale_count;
  e.scale_worst = d.scale_worst;
  return j;
}

int64_t hostRows(const std::vector<uint8_t>& undecided,
                 const std::vector<const std::vector<gpu_oracle::RowFigures>*>& figures, std::vector<int64_t>& rows) {
  rows.clear();
  for (int64_t i = 0; i < int64_t(undecided.size()); ++i)
    if (undecided[size_t(i)]) rows.push_back(i);
  const int64_t undecided_rows = int64_t(rows.size());
  for (const auto* f : figures)
    for (int64_t i : worstRows(*f, undecided)) rows.push_back(i);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return undecided_rows;
}

void mergeHostRows(TensorJudgment& judged, const ReferenceTensor& ref, const OutputTensor& out,
                   const std::vector<int64_t>& rows, const std::vector<uint8_t>& undecided,
                   const std::vector<gpu_oracle::RowFigures>& figures, int64_t M,
                   const ConditionalBounds* conditional) {
  // Of the rows the GPU decided, only this tensor's worstRows hold the
  // findings an outcome shows (accuracyVerdict: its worst failures, or
  // without any its worst elements within budget): such an element lies in a
  // row whose own worst is among the kReportedFindings worst rows (ties: the
  // lower row, as worse() picks). Where there are failures the within-budget
  // list, not shown, may differ from judging every row's.
  const std::vector<int64_t> worst = worstRows(figures, undecided);
  enum class Use { None, Findings, Whole };
  const auto use = [&](size_t r) {
    if (undecided[size_t(rows[r])]) return Use::Whole;
    return std::find(worst.begin(), worst.end(), rows[r]) != worst.end() ? Use::Findings : Use::None;
  };
  // Runs of rows alike judged at once; the sums of squares still added row
  // by row, as the GPU's rows are.
  std::vector<double> row_sq;
  for (size_t r = 0; r < rows.size();) {
    const Use u = use(r);
    size_t end = r + 1;
    while (end < rows.size() && use(end) == u) ++end;
    if (u != Use::None) {
      TensorJudgment run = judgeTensorRows(ref, out, int64_t(r), int64_t(end), &rows, M, conditional, &row_sq);
      if (u == Use::Whole) {
        run.sum_sq_ulp = 0;
        for (const double sq : row_sq) judged.sum_sq_ulp += sq;
        judged.merge(std::move(run));
      } else {  // the GPU counted them: only their findings
        TensorJudgment findings;
        findings.failures = std::move(run.failures);
        findings.worst = std::move(run.worst);
        judged.merge(std::move(findings));
      }
    }
    r = end;
  }
}

}  // namespace ulpcheck
