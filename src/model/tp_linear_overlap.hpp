// The TP linears of tp_linear.cpp routed through the TP comm-overlap runtime (src/tp) when the
// options carry an enabled overlap plan and sequence parallelism is on (private to the model).
#pragma once

#include <cstdint>
#include <vector>

#include "shardwise/model/tp_linear.hpp"

namespace shardwise {

// Whether `slot`'s GEMMs go through the overlap runtime: TP with sequence parallelism, an
// enabled plan, and a slot of the plan (the output layer is none).
bool tp_overlap_active(TpGemmSlot slot, const TensorParallelOptions& tp);

void overlapped_column_parallel_forward(TpGemmSlot slot, const TensorParallelOptions& tp,
                                        const float* x, const float* w, const float* bias,
                                        std::int64_t n, std::int64_t in, std::int64_t out_local,
                                        std::vector<float>& y);
void overlapped_column_parallel_backward(TpGemmSlot slot, const TensorParallelOptions& tp,
                                         const float* dy, const float* x, const float* w,
                                         std::int64_t n, std::int64_t in, std::int64_t out_local,
                                         float* dw, float* dbias, std::vector<float>& dx);
void overlapped_row_parallel_forward(TpGemmSlot slot, const TensorParallelOptions& tp,
                                     const float* x, const float* w, const float* bias,
                                     std::int64_t n, std::int64_t in_local, std::int64_t out,
                                     std::vector<float>& y);
void overlapped_row_parallel_backward(TpGemmSlot slot, const TensorParallelOptions& tp,
                                      const float* dy, const float* x, const float* w,
                                      std::int64_t n, std::int64_t in_local, std::int64_t out,
                                      float* dw, float* dbias, std::vector<float>& dx);

}  // namespace shardwise
