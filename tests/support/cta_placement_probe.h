// Which SM each CTA of a launch ran on: shows that schedule perturbation
// changes the CTA-to-SM placement that an idle GPU otherwise repeats.
#pragma once

#include <vector>

#include "core/buffer.h"

namespace ulpcheck::testing {

class CtaPlacementProbe {
 public:
  explicit CtaPlacementProbe(int ctas);
  /// Launches on the legacy default stream, as the ops do, and returns the SM
  /// id of every CTA.
  std::vector<int> run();

 private:
  int ctas_;
  Buffer sm_ids_;
};

}  // namespace ulpcheck::testing
