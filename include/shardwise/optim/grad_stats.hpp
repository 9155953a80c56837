// Local gradient statistics and clipping kernels. The reduction over ranks is the caller's job
// (Optimizer's WorldReduce); these only look at the elements they are given.
#pragma once

#include <cstdint>
#include <span>

namespace shardwise::optim {

// Sum of squares, accumulated in double (grad norms of billions of elements stay accurate).
double sum_of_squares(std::span<const float> values);

// Number of elements that compare equal to zero (+0 and -0).
std::int64_t count_zeros(std::span<const float> values);

// values[i] *= coeff.
void scale_in_place(std::span<float> values, float coeff);

}  // namespace shardwise::optim
