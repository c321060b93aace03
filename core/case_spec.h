// CaseSpec: everything that determines one test case. The case *is* the
// reproduction: it serialises to a one-line string (pasted into
// `ulpcheck repro '<case>'`) and to JSON, and parses back to the same value.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/distribution.h"
#include "core/dtype.h"
#include "core/spec.h"

namespace ulpcheck {

struct CaseSpec {
  std::string op = "rmsnorm";
  std::string kernel;        // registered variant name
  DType dtype = DType::F32;  // activation / input / output dtype
  int64_t M = 1;             // rows (tokens)
  int64_t N = 1;             // columns (hidden size)
  int64_t ld = 1;            // row stride of the row-major inputs, in elements (>= N)
  float eps = 1e-6f;         // added to the mean square (fp32, as kernels take it)
  DistParams x;              // distribution of the primary input
  double dy_sigma = 1.0;     // scale of the incoming gradient
  uint64_t seed = 0;         // data seed of the counter-based generator
  int ranks = 1;             // rank count R of allreduce ops
  int ctas = 0;              // launch override: CTA count of the reduction grid (0: kernel's choice)
  Spec spec;                 // the values of its op's spec fields (core/spec.h) that differ from their defaults

  bool operator==(const CaseSpec& o) const;
  bool operator!=(const CaseSpec& o) const { return !(*this == o); }
};

/// A malformed case string or JSON document; the message names the field.
struct CaseParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A well-formed case this machine cannot run (more ranks than GPUs for a
/// variant with one rank per GPU): the case is skipped, saying why.
struct CaseNotRunnableHere : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One line, `key=value` pairs separated by spaces; floats in hex (%a).
std::string toCaseString(const CaseSpec& c);
/// Inverse of toCaseString. Keys may come in any order; optional keys default.
/// Throws CaseParseError on unknown or duplicate keys, bad numbers, or a case
/// that violates validateCase.
CaseSpec parseCaseString(std::string_view text);

nlohmann::json toJson(const CaseSpec& c);
CaseSpec caseFromJson(const nlohmann::json& j);

/// Throws CaseParseError when the case is not well formed (shape, eps, a
/// distribution whose values would overflow the dtype).
void validateCase(const CaseSpec& c);

/// Largest |value| the case's input distribution can produce before rounding.
double maxAbsInput(const DistParams& p);

/// Number of input elements, used to decide whether a case fits in memory.
inline int64_t inputElements(const CaseSpec& c) { return c.M * c.ld; }

}  // namespace ulpcheck
