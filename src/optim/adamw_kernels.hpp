// The AdamW element loop per ISA level (private to shardwise_optim; picked by adamw_update).
#pragma once

#include <cstdint>

#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/optim/adamw.hpp"

namespace shardwise::optim::adamw_kernels {

using UpdateKernel = void (*)(const AdamWStepScalars& s, float* p, const float* g, float* m,
                              float* v, std::int64_t n);

// Indexed by IsaLevel. Every entry gives the bits of the scalar loop (same operations in the
// same order, no FMA), so the level only changes speed.
extern const UpdateKernel kUpdate[kNumIsaLevels];

}  // namespace shardwise::optim::adamw_kernels
