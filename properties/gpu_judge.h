// What the ops' GPU judges (properties/rmsnorm_gpu_judge.h,
// properties/layernorm_gpu_judge.h) share on the host: the device's per-row
// figures made into a tensor's judgment, the rows whose findings the host
// re-judges, and rows of an output downloaded.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "oracles/device_judge.h"
#include "properties/accuracy.h"
#include "properties/run_buffers.h"

namespace ulpcheck {

/// The run a GPU judge judges, in `buf`'s output buffers: `outputs`, a run
/// made elsewhere, uploaded (each of `names` the variant provides); or,
/// without them, `launch(workspace)` run here (a workspace of
/// workspace_bytes), beside a schedule-perturbing load where ctx asks, and
/// synchronized (a launch that failed leaves poison, which the judge
/// reports; `what` names it), its outputs' digests left in `digests` when given.
void runOrUpload(RunBuffers& buf, const KernelInfo& k, const ExecContext& ctx, const std::vector<const char*>& names,
                 const RunResult* outputs, OutputDigests* digests, size_t workspace_bytes,
                 const std::function<void(void* workspace)>& launch, const char* what);

/// Rows `rows` (each `cols` elements from the start of a row of stride ld) of a buffer, as an OutputTensor.
OutputTensor downloadRows(const Buffer& b, const std::string& name, DType t, const std::vector<int64_t>& rows,
                          int64_t cols, int64_t ld);

/// The rows whose worst element is among the kReportedFindings worst of the
/// tensor, of the rows the GPU decided (ties: the lower row): the tensor's
/// worst elements lie in them.
std::vector<int64_t> worstRows(const std::vector<gpu_oracle::RowFigures>& figures,
                               const std::vector<uint8_t>& undecided);

/// A tensor's judgment from the GPU's per-row figures and distribution.
TensorJudgment fromDevice(const std::string& name, const std::vector<gpu_oracle::RowFigures>& figures,
                          const std::vector<uint8_t>& undecided, const gpu_oracle::Distribution& d);

/// The rows the host computes: those the GPU left undecided (first, sorted),
/// then with them, sorted and unique, the rows holding each tensor's worst
/// elements. Returns how many were undecided.
int64_t hostRows(const std::vector<uint8_t>& undecided,
                 const std::vector<const std::vector<gpu_oracle::RowFigures>*>& figures, std::vector<int64_t>& rows);

/// `judged`, one tensor's (`figures` its rows' from the GPU), completed by
/// the host's judgments of `rows` (row r of `ref` and `out` is the case's
/// row rows[r]): a row the GPU left undecided counts whole, one of the
/// tensor's worstRows gives only its findings, any other is not its concern.
void mergeHostRows(TensorJudgment& judged, const ReferenceTensor& ref, const OutputTensor& out,
                   const std::vector<int64_t>& rows, const std::vector<uint8_t>& undecided,
                   const std::vector<gpu_oracle::RowFigures>& figures, int64_t M,
                   const ConditionalBounds* conditional = nullptr);

}  // namespace ulpcheck
