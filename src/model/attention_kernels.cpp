#include "shardwise/model/attention_kernels.hpp"

#include <algorithm>

#include "shardwise/core/cpu_isa.hpp"

namespace shardwise {

namespace {

// 8 floats as one value; GCC splits the arithmetic into what the target has (two SSE registers,
// one AVX register), lane by lane, so every ISA level computes the same bits.
typedef float Lanes8 __attribute__((vector_size(32)));  // NOLINT(modernize-use-using)

constexpr int kBlockRows = 4;     // output rows sharing each loaded row of `in`
constexpr int kBlockColumns = 16;  // two Lanes8 per output row

// Rows r0 .. r0+R-1, columns c0 .. c0+15 of out, over k in [k0, k1): 2R accumulators stay in
// registers while k runs, and each adds its terms in k order. coef(r0 + r, k) =
// coef[r * row_step + k * k_step].
template <int R>
SW_KERNEL_INLINE void combine_block(const float* coef, std::int64_t row_step,
                                    std::int64_t k_step, int k0, int k1, const float* in,
                                    std::int64_t ld_in, float* out, std::int64_t ld_out) {
  Lanes8 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = Lanes8{};
  for (int k = k0; k < k1; ++k) {
    Lanes8 lo, hi;
    __builtin_memcpy(&lo, in + k * ld_in, sizeof lo);
    __builtin_memcpy(&hi, in + k * ld_in + 8, sizeof hi);
    for (int r = 0; r < R; ++r) {
      const float p = coef[r * row_step + k * k_step];
      acc[r][0] += p * lo;
      acc[r][1] += p * hi;
    }
  }
  for (int r = 0; r < R; ++r) {
    __builtin_memcpy(out + r * ld_out, &acc[r][0], sizeof acc[r][0]);
    __builtin_memcpy(out + r * ld_out + 8, &acc[r][1], sizeof acc[r][1]);
  }
}

// The k range a block of rows [r0, r1) needs: the union of its rows' ranges (the terms of a row
// outside its own range have zero coefficients).
SW_KERNEL_INLINE void block_k_range(CoefRange range, int r0, int r1, int depth, int& k0,
                                    int& k1) {
  k0 = range == CoefRange::kFromRow ? r0 : 0;
  k1 = range == CoefRange::kUpToRow ? (r1 < depth ? r1 : depth) : depth;
}

template <int R>
SW_KERNEL_INLINE void combine_row_block(const float* coef, std::int64_t ld_coef,
                                        CoefLayout layout, CoefRange range, int r0, int depth,
                                        const float* in, std::int64_t ld_in, int width,
                                        float* out, std::int64_t ld_out) {
  int k0, k1;
  block_k_range(range, r0, r0 + R, depth, k0, k1);
  const bool row_major = layout == CoefLayout::kRowMajor;
  const float* first = row_major ? coef + r0 * ld_coef : coef + r0;
  const std::int64_t row_step = row_major ? ld_coef : 1, k_step = row_major ? 1 : ld_coef;
  for (int c = 0; c < width; c += kBlockColumns) {
    combine_block<R>(first, row_step, k_step, k0, k1, in + c, ld_in, out + r0 * ld_out + c,
                     ld_out);
  }
}

// Widths that are not a multiple of 16: one row at a time over its own range, in memory.
SW_KERNEL_INLINE void combine_rows_plain(const float* coef, std::int64_t ld_coef,
                                         CoefLayout layout, CoefRange range, int rows, int depth,
                                         const float* in, std::int64_t ld_in, int width,
                                         float* out, std::int64_t ld_out) {
  for (int r = 0; r < rows; ++r) {
    int k0, k1;
    block_k_range(range, r, r + 1, depth, k0, k1);
    float* o = out + r * ld_out;
    for (int c = 0; c < width; ++c) o[c] = 0.0f;
    for (int k = k0; k < k1; ++k) {
      const float p = layout == CoefLayout::kRowMajor ? coef[r * ld_coef + k]
                                                      : coef[k * ld_coef + r];
      for (int c = 0; c < width; ++c) o[c] += p * in[k * ld_in + c];
    }
  }
}

SW_KERNEL_INLINE void combine_rows_body(const float* coef, std::int64_t ld_coef,
                                        CoefLayout layout, CoefRange range, int rows, int depth,
                                        const float* in, std::int64_t ld_in, int width,
                                        float* out, std::int64_t ld_out) {
  if (width % kBlockColumns != 0) {
    combine_rows_plain(coef, ld_coef, layout, range, rows, depth, in, ld_in, width, out, ld_out);
    return;
  }
  int r = 0;
  for (; r + kBlockRows <= rows; r += kBlockRows) {
    combine_row_block<kBlockRows>(coef, ld_coef, layout, range, r, depth, in, ld_in, width, out,
                                  ld_out);
  }
  switch (rows - r) {
    case 3:
      combine_row_block<3>(coef, ld_coef, layout, range, r, depth, in, ld_in, width, out, ld_out);
      break;
    case 2:
      combine_row_block<2>(coef, ld_coef, layout, range, r, depth, in, ld_in, width, out, ld_out);
      break;
    case 1:
      combine_row_block<1>(coef, ld_coef, layout, range, r, depth, in, ld_in, width, out, ld_out);
      break;
    default:
      break;
  }
}

// dot(a, b) over depth values: 8 partial sums (lane l takes d = l, l + 8, ... in order), added
// pairwise, then the depth % 8 tail in order. The same steps on every ISA level.
SW_KERNEL_INLINE float dot_lanes(const float* a, const float* b, int depth) {
  Lanes8 acc = {};
  const int full = depth / 8 * 8;
  for (int d = 0; d < full; d += 8) {
    Lanes8 x, y;
    __builtin_memcpy(&x, a + d, sizeof x);
    __builtin_memcpy(&y, b + d, sizeof y);
    acc += x * y;
  }
  float l[8];
  __builtin_memcpy(l, &acc, sizeof l);
  float sum = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
  for (int d = full; d < depth; ++d) sum += a[d] * b[d];
  return sum;
}

SW_KERNEL_INLINE void causal_dots_body(const float* a, std::int64_t lda, const float* b,
                                       std::int64_t ldb, int n, int depth, float* out,
                                       std::int64_t ld_out) {
  for (int i = 0; i < n; ++i) {
    float* row = out + i * ld_out;
    for (int j = 0; j <= i; ++j) row[j] = dot_lanes(a + i * lda, b + j * ldb, depth);
    for (int j = i + 1; j < n; ++j) row[j] = 0.0f;
  }
}

using CausalDots = void (*)(const float*, std::int64_t, const float*, std::int64_t, int, int,
                            float*, std::int64_t);
using CombineRows = void (*)(const float*, std::int64_t, CoefLayout, CoefRange, int, int,
                             const float*, std::int64_t, int, float*, std::int64_t);

#define SW_ATTENTION_KERNELS(SUFFIX, ATTR)                                                   \
  ATTR void combine_rows_##SUFFIX(const float* coef, std::int64_t ld_coef, CoefLayout layout, \
                                  CoefRange range, int rows, int depth, const float* in,      \
                                  std::int64_t ld_in, int width, float* out,                  \
                                  std::int64_t ld_out) {                                      \
    combine_rows_body(coef, ld_coef, layout, range, rows, depth, in, ld_in, width, out,       \
                      ld_out);                                                                \
  }                                                                                           \
  ATTR void causal_dots_##SUFFIX(const float* a, std::int64_t lda, const float* b,            \
                                 std::int64_t ldb, int n, int depth, float* out,              \
                                 std::int64_t ld_out) {                                       \
    causal_dots_body(a, lda, b, ldb, n, depth, out, ld_out);                                  \
  }

SW_ATTENTION_KERNELS(baseline, )
SW_ATTENTION_KERNELS(avx2, SW_TARGET_AVX2)
SW_ATTENTION_KERNELS(avx512, SW_TARGET_AVX512)
#undef SW_ATTENTION_KERNELS

constexpr CombineRows kCombineRows[kNumIsaLevels] = {combine_rows_baseline, combine_rows_avx2,
                                                     combine_rows_avx512};
constexpr CausalDots kCausalDots[kNumIsaLevels] = {causal_dots_baseline, causal_dots_avx2,
                                                   causal_dots_avx512};

}  // namespace

void combine_rows(const float* coef, std::int64_t ld_coef, CoefLayout layout, CoefRange range,
                  int rows, int depth, const float* in, std::int64_t ld_in, int width, float* out,
                  std::int64_t ld_out) {
  dispatch(kCombineRows)(coef, ld_coef, layout, range, rows, depth, in, ld_in, width, out,
                         ld_out);
}

void causal_dots(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, int n,
                 int depth, float* out, std::int64_t ld_out) {
  dispatch(kCausalDots)(a, lda, b, ldb, n, depth, out, ld_out);
}

}  // namespace shardwise
