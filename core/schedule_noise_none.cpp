// The CPU-only build: no kernel has the CUDA backend (CUDA variants are built
// from .cu files, and a GPU buffer would already have failed to allocate), and
// host ports run in program order, so there is no schedule to perturb.
#include "core/schedule_noise.h"

namespace ulpcheck {

ScheduleNoise::ScheduleNoise(bool, Backend, int) {}
ScheduleNoise::~ScheduleNoise() noexcept(false) {}

}  // namespace ulpcheck
