#include "properties/bitwise.h"

#include <fmt/format.h>

namespace ulpcheck {

BitwiseDiff compareBitwise(const RunResult& a, const RunResult& b, const std::function<int64_t(int64_t)>& row_map) {
  BitwiseDiff d;
  for (const OutputTensor& ta : a.outputs) {
    if (row_map && !ta.per_row) continue;
    const OutputTensor* tb = b.find(ta.name);
    if (!tb) continue;
    for (int64_t r = 0; r < ta.rows; ++r) {
      const int64_t rb = row_map ? row_map(r) : r;
      if (rb < 0) continue;
      for (int64_t c = 0; c < ta.cols; ++c) {
        if (ta.at(r, c) == tb->at(rb, c)) continue;
        if (d.differing++ == 0) {
          Finding f;
          f.tensor = ta.name;
          f.row = r;
          f.col = c;
          f.got = tb->value(rb, c);
          f.exact = ta.value(r, c);
          f.note = fmt::format("{:#x} vs {:#x}", ta.at(r, c), tb->at(rb, c));
          d.first = f;
        }
      }
    }
  }
  return d;
}

}  // namespace ulpcheck
