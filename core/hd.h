// Marks functions that compile for both the host and the GPU, so the data
// generator and the float formats give the same bits on either side.
#pragma once

#if defined(__CUDACC__)
#define ULPCHECK_HD __host__ __device__
#else
#define ULPCHECK_HD
#endif
