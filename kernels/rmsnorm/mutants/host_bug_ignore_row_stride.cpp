// Mutant: rows addressed with stride N instead of the row stride ld, so a
// non-contiguous input (a slice, padded rows) is read and written in the
// wrong places (quack #88). Must be caught by accuracy.
#include "kernels/rmsnorm/rmsnorm_host.h"

namespace ulpcheck {
namespace {
const bool registered = rmsnorm_host::registerMutant(
    "host_bug_ignore_row_stride", "host port that ignores the row stride of non-contiguous rows",
    "row stride ignored for non-contiguous input (quack #88)", "accuracy", {.ignore_row_stride = true});
}  // namespace
}  // namespace ulpcheck
