// bf16 and fp16 reductions accumulate in fp32: the buffer is widened to fp32, reduced with MPI's
// predefined fp32 operation, and rounded to 16 bits once at the end (round-to-nearest-even). No
// intermediate 16-bit rounding happens, so a SUM is the fp32 sum rounded once; whenever that fp32
// sum is exact (e.g. up to 4 ranks whose bf16 inputs span at most 2^13 in magnitude) it is the
// correctly rounded exact sum, independent of the order MPI combines ranks in.
#pragma once

#include "shardwise/core/tensor_view.hpp"

namespace shardwise {

// True for the 16-bit float types reduced through an fp32 staging buffer.
bool reduces_through_fp32(DType dtype);

// dst[i] = float(src[i]) for a bf16 or fp16 view.
void widen_to_fp32(TensorView src, float* dst);
// dst[i] = round16(src[i] / divisor) for a bf16 or fp16 view; divisor 1 skips the division.
void narrow_from_fp32(const float* src, TensorView dst, int divisor);
// buffer[i] /= divisor for an fp32 view (the AVG step after an fp32 SUM).
void divide_fp32(TensorView buffer, int divisor);

}  // namespace shardwise
