// The small per-(sequence, head) products of fp32 attention, without BLAS: at seq x seq x
// head_dim sizes such as 12 x 12 x 64 a BLAS call spends much of its time on call overhead and
// packing, and computes the masked half of the scores too. Vectorised for the CPU at run time
// (cpu_isa.hpp), without FMA, so every ISA level gives the same bits.
#pragma once

#include <cstdint>

namespace shardwise {

// Where coef(r, k) sits: coef[r * ld + k] or coef[k * ld + r].
enum class CoefLayout { kRowMajor, kTransposed };
// Which k each output row r sums over: all of [0, depth), k <= r (causal rows) or k >= r (the
// transposed causal product).
enum class CoefRange { kAll, kUpToRow, kFromRow };

// out[r * ld_out + c] = sum over k of coef(r, k) * in[k * ld_in + c], for r < rows and c < width,
// k ascending. `range` says where coef(r, k) may be non-zero (kUpToRow / kFromRow need
// rows == depth); outside it coef must be zero, and those terms may be skipped or added (a zero
// term leaves a finite sum as it is). Widths that are multiples of 16 run register-blocked.
void combine_rows(const float* coef, std::int64_t ld_coef, CoefLayout layout, CoefRange range,
                  int rows, int depth, const float* in, std::int64_t ld_in, int width, float* out,
                  std::int64_t ld_out);

// out[i * ld_out + j] = dot(a row i, b row j) over depth values for j <= i, 0 for j > i (i, j < n):
// the causal half of a * b^T. Each dot adds 8 lane partial sums pairwise, the same on every level.
void causal_dots(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, int n,
                 int depth, float* out, std::int64_t ld_out);

}  // namespace shardwise
