#include "properties/gpu_judge.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "core/device.h"
#include "core/phase_timer.h"
#include "core/schedule_noise.h"

namespace ulpcheck {

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
  const int w = storageBytes(t);
  std::vector<uint8_t> bytes(rows.size() * size_t(cols * w));
  for (size_t k = 0; k < rows.size(); ++k)
    b.download(bytes.data() + k * size_t(cols * w), size_t(cols * w), size_t(rows[k] * ld * w));
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
                   const std::vector<int64_t>& rows, const std::vector<uint8_t>& undecided, int64_t M,
                   const ConditionalBounds* conditional) {
  for (size_t r = 0; r < rows.size(); ++r) {
    TensorJudgment row = judgeTensorRows(ref, out, int64_t(r), int64_t(r) + 1, &rows, M, conditional);
    if (undecided[size_t(rows[r])]) {
      judged.merge(std::move(row));
    } else {  // the GPU counted it: only its findings
      TensorJudgment findings;
      findings.failures = std::move(row.failures);
      findings.worst = std::move(row.worst);
      judged.merge(std::move(findings));
    }
  }
}

}  // namespace ulpcheck
