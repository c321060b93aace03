// Loads a plugin (include/ulpcheck/plugin.h) and registers its variants in
// the op registries beside the built-in ones, so every property, the
// generators, the corpus and the kill matrix reach them unchanged. Variants
// with no declared reduction depths get the worst any summation order can
// do (N along a row, M down a column): sound for any fp32-accumulating
// kernel, whatever its order.
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/accuracy.h"
#include "kernels/common/row_launch.h"

namespace ulpcheck {

/// A plugin that cannot be used: the message names the file and what is wrong.
struct PluginError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct LoadedPlugin {
  std::string path;    // absolute
  std::string name;    // the library's own name and version
  std::string sha256;  // of the file
  std::vector<std::string> variants;
};

/// Loads and registers a plugin; loading a file again returns the first load.
/// Throws PluginError.
const LoadedPlugin& loadPlugin(const std::string& path);

/// Every plugin loaded so far.
const std::vector<LoadedPlugin>& loadedPlugins();

/// A black box's declared depth of the sums over one dimension of n
/// elements (N along a row, M down a column): a fixed depth, or the shape
/// of a GPU reduction, `lanes` lanes each summing its share serially, then
/// `levels` levels of a tree across them (ceil(n / lanes) + levels, at most
/// n); nothing declared, n (any order).
struct DeclaredDepth {
  int64_t fixed = 0;
  int64_t lanes = 0, levels = 0;
  int64_t over(int64_t n) const {
    if (fixed > 0) return fixed;
    if (lanes > 0) return std::min(n, (n + lanes - 1) / lanes + levels);
    return n;
  }
};

/// A black box's declared shape of running-means statistics (LayerNorm):
/// `lanes` lanes each run Welford's update over their share of a row of n,
/// reading `vector` consecutive elements at a time (a chain of at most
/// vector ceil(n / (lanes vector)) elements, and at most n), then `levels`
/// levels of merges across the lanes (one with an empty side exact).
/// Nothing declared (lanes 0): any tree. `merges`: the form its merges
/// take — either (the update form or the weighted average n_a/n m_a +
/// n_b/n m_b), the update form mean_a + (mean_b - mean_a) w, or the update
/// form on rows whose length the vector does not divide (a kernel with a
/// vectorized path for the others: PyTorch's RowwiseMoments beside its
/// vectorized compute_stats).
struct DeclaredRunningMeans {
  enum class Merges { Either, Update, UpdateUnlessVectorized };
  int64_t lanes = 0, vector = 1, levels = 0;
  Merges merges = Merges::Either;
  int64_t chain(int64_t n) const {
    if (lanes <= 0) return 0;
    const int64_t per_step = lanes * vector;
    return std::min(n, vector * ((n + per_step - 1) / per_step));
  }
  /// Whether every merge of a row of n takes the update form.
  bool updateMerges(int64_t n) const {
    return lanes > 0 && (merges == Merges::Update || (merges == Merges::UpdateUnlessVectorized && n % vector != 0));
  }
};

/// The budget's depths of a black box (a plugin's or Python variant): the
/// ones it declares, else the worst any summation order gives, N along a row
/// and M down a column; no fixed order; the LayerNorm statistics' contracts
/// (two_pass_statistics, mean_of_plain_sum, uses_saved_statistics) as
/// `declared` has them, and nothing else of it; the running means' shape
/// as `running` declares it.
ReductionDepths blackBoxDepths(DeclaredDepth row, DeclaredDepth col, const RowShape& s,
                               const ReductionDepths& declared = {}, DeclaredRunningMeans running = {});

}  // namespace ulpcheck
