#include "core/device.h"

namespace ulpcheck {

namespace {
thread_local bool t_shares_gpu = false;
}

SharedGpuScope::SharedGpuScope() : outer_(t_shares_gpu) { t_shares_gpu = true; }
SharedGpuScope::~SharedGpuScope() { t_shares_gpu = outer_; }
bool sharesGpu() { return t_shares_gpu; }

}  // namespace ulpcheck
