// Helpers shared by the overlapped GEMMs (private to the tp layer).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "shardwise/tp/overlapped_gemm.hpp"

namespace shardwise::tp {

// Tags of the ring exchanges' messages on the TP group (any tag works: MPI keeps messages of one
// pair and tag in order; distinct tags only make a stray message easy to recognise).
inline constexpr int kRingAllGatherTag = 7301;
inline constexpr int kRingReduceScatterTag = 7302;

// c [rows, n] = a [rows, k] * op(b) + beta * c, for `rows` rows starting at a and c.
void gemm_rows(const float* a, std::int64_t rows, const RightOperand& b, float* c,
               float beta = 0.0f);

// A float view for the comm layer (send buffers are never written).
TensorView float_view(const float* data, std::int64_t numel);

// Row counts of `splits` balanced chunks of `rows` rows (at most `rows` chunks, at least one).
std::vector<std::int64_t> row_chunks(std::int64_t rows, int splits);

// InvalidArgument naming `what` for a pipeline with num_splits < 1.
void check_choice(std::string_view what, const OverlapChoice& choice);

// ShapeError naming `what` unless the sizes agree (checks every pointer is set too).
void check_gemm_shapes(std::string_view what, ConstMatrix input, const RightOperand& b,
                       const MutableMatrix& out, std::int64_t expected_out_rows);

}  // namespace shardwise::tp
