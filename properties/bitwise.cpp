#include "properties/bitwise.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "core/phase_timer.h"

namespace ulpcheck {

void compareTensors(const OutputTensor& a, const OutputTensor& b, BitwiseDiff& d,
                    const std::function<int64_t(int64_t)>& row_map) {
  // A tensor left on the device has the other's digest: the same bytes.
  if (!a.downloaded || !b.downloaded) {
    if (a.digest == b.digest) return;
    throw std::logic_error(fmt::format("'{}': an output not downloaded differs from the run it repeats", a.name));
  }
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t rb = row_map ? row_map(r) : r;
    if (rb < 0) continue;
    // Rows held at one width compare as bytes (the common case: both downloaded).
    const size_t w = size_t(a.bits.width());
    if (b.bits.width() == a.bits.width() &&
        std::memcmp(a.bits.bytes().data() + size_t(r * a.ld) * w, b.bits.bytes().data() + size_t(rb * b.ld) * w,
                    size_t(a.cols) * w) == 0)
      continue;
    for (int64_t c = 0; c < a.cols; ++c) {
      if (a.at(r, c) == b.at(rb, c)) continue;
      if (d.differing++ == 0) {
        Finding f;
        f.tensor = a.name;
        f.row = r;
        f.col = c;
        f.got = b.value(rb, c);
        f.exact = a.value(r, c);
        f.note = fmt::format("{:#x} vs {:#x}", a.at(r, c), b.at(rb, c));
        f.bitwise = true;
        d.first = f;
      }
    }
  }
}

BitwiseDiff compareBitwise(const RunResult& a, const RunResult& b, const std::function<int64_t(int64_t)>& row_map,
                           const std::function<bool(const std::string&)>& include) {
  const PhaseScope phase(Phase::Judge);
  BitwiseDiff d;
  for (const OutputTensor& ta : a.outputs) {
    if ((row_map && !ta.per_row) || (include && !include(ta.name))) continue;
    if (const OutputTensor* tb = b.find(ta.name)) compareTensors(ta, *tb, d, row_map);
  }
  return d;
}

}  // namespace ulpcheck
