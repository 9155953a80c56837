#include "shardwise/model/attention_kernels.hpp"

#include <algorithm>

#include "shardwise/core/cpu_isa.hpp"

namespace shardwise {

namespace {

// 8 floats as one value; GCC splits the arithmetic into what the target has (two SSE registers,
// one AVX register), lane by lane, so every ISA level computes the same bits.
typedef float Lanes8 __attribute__((vector_size(32)));  // NOLINT(modernize-use-using)

constexpr int kBlockRows = 4;      // output rows sharing each loaded row of `in`
constexpr int kBlockColumns = 16;  // two Lanes8 per output row

// Rows r0 .. r0+R-1, columns c0 .. c0+15 of out, over k in [k0, k1): 2R accumulators stay in
// registers while k runs, and each adds its terms in k order. coef(r0 + r, k) =
// coef[r * row_step + k * k_step].
template <int R>
SW_KERNEL_INLINE void combine_block(const float* coef, std::int64_t row_step, std::int64_t k_step,
                                    int k0, int k1, const float* in, std::int64_t ld_in, float* out,
                                    std::int64_t ld_out) {
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
SW_KERNEL_INLINE void block_k_range(CoefRange range, int r0, int r1, int depth, int& k0, int& k1) {
  k0 = range == CoefRange::kFromRow ? r0 : 0;
  k1 = range == CoefRange::kUpToRow ? (r1 < depth ? r1 : depth) : depth;
}

template <int R>
SW_KERNEL_INLINE void combine_row_block(const float* coef, std::int64_t ld_coef, CoefLayout layout,
                                        CoefRange range, int r0, int depth, const float* in,
                                        std::int64_t ld_in, int width, float* out,
                                        std::int64_t ld_out) {
  int k0, k1;
  block_k_range(range, r0, r0 + R, depth, k0, k1);
  const bool row_major = layout == CoefLayout::kRowMajor;
  const float* first = row_major ? coef + r0 * ld_coef : coef + r0;
  const std::int64_t row_step = row_major ? ld_coef : 1, k_step = row_major ? 1 : ld_coef;
  for (int c = 0; c < width; c += kBlockColumns) {
    combine_block<R>(first, row_step, k_step, k0, k1, in + c, ld_in, out + r0 * ld_out + c, ld_out);
  }
}

// Widths that are not a multiple of 16: one row at a time over its own range, in memory.
SW_KERNEL_INLINE void combine_rows_plain(const float* coef, std::int64_t ld_coef, CoefLayout layout,
                                         CoefRange range, int rows, int depth, const float* in,
                                         std::int64_t ld_in, int width, float* out,
                                         std::int64_t ld_out) {
  for (int r = 0; r < rows; ++r) {
    int k0, k1;
    block_k_range(range, r, r + 1, depth, k0, k1);
    float* o = out + r * ld_out;
    for (int c = 0; c < width; ++c) o[c] = 0.0f;
    for (int k = k0; k < k1; ++k) {
      const float p =
          layout == CoefLayout::kRowMajor ? coef[r * ld_coef + k] : coef[k * ld_coef + r];
      for (int c = 0; c < width; ++c) o[c] += p * in[k * ld_in + c];
    }
  }
}

SW_KERNEL_INLINE void combine_rows_body(const float* coef, std::int64_t ld_coef, CoefLayout layout,
                                        CoefRange range, int rows, int depth, const float* in,
                                        std::int64_t ld_in, int width, float* out,
                                        std::int64_t ld_out) {
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

// [x0+x1, x2+x3, x4+x5, x6+x7, y0+y1, y2+y3, y4+y5, y6+y7]: one level of dot_lanes' pairwise
// reduction for two accumulators at once.
// (Results through a reference: a returned 32-byte vector would change the ABI of the baseline
// build, which GCC warns about.)
SW_KERNEL_INLINE void pair_sums(const Lanes8& x, const Lanes8& y, Lanes8& out) {
  out = __builtin_shufflevector(x, y, 0, 2, 4, 6, 8, 10, 12, 14) +
        __builtin_shufflevector(x, y, 1, 3, 5, 7, 9, 11, 13, 15);
}

// dot(a, b row j) for j < kDots (kDots = 4 or 8) with depth % 8 == 0: dot_lanes' lane partial
// sums, reduced three levels deep for all kDots dots together (three rounds of pair_sums put
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)) of accumulator j in lane j), so the same bits in a
// fraction of the horizontal adds; a's chunk is loaded once for all kDots rows of b.
template <int kDots>
SW_KERNEL_INLINE void dots_grouped(const float* a, const float* b, std::int64_t ldb, int depth,
                                   float* out) {
  Lanes8 acc[8] = {};
  for (int d = 0; d < depth; d += 8) {
    Lanes8 x;
    __builtin_memcpy(&x, a + d, sizeof x);
    for (int j = 0; j < kDots; ++j) {
      Lanes8 y;
      __builtin_memcpy(&y, b + j * ldb + d, sizeof y);
      acc[j] += x * y;
    }
  }
  Lanes8 p01, p23, low, high, sums;
  pair_sums(acc[0], acc[1], p01);
  pair_sums(acc[2], acc[3], p23);
  pair_sums(p01, p23, low);
  high = low;
  if constexpr (kDots == 8) {
    Lanes8 p45, p67;
    pair_sums(acc[4], acc[5], p45);
    pair_sums(acc[6], acc[7], p67);
    pair_sums(p45, p67, high);
  }
  pair_sums(low, high, sums);
  __builtin_memcpy(out, &sums, kDots * sizeof(float));
}

SW_KERNEL_INLINE void causal_dots_body(const float* a, std::int64_t lda, const float* b,
                                       std::int64_t ldb, int n, int depth, float* out,
                                       std::int64_t ld_out) {
  for (int i = 0; i < n; ++i) {
    float* row = out + i * ld_out;
    const float* ai = a + i * lda;
    int j = 0;
    if (depth % 8 == 0) {
      for (; j + 8 <= i + 1; j += 8) dots_grouped<8>(ai, b + j * ldb, ldb, depth, row + j);
      for (; j + 4 <= i + 1; j += 4) dots_grouped<4>(ai, b + j * ldb, ldb, depth, row + j);
    }
    for (; j <= i; ++j) row[j] = dot_lanes(ai, b + j * ldb, depth);
    for (j = i + 1; j < n; ++j) row[j] = 0.0f;
  }
}

using CausalDots = void (*)(const float*, std::int64_t, const float*, std::int64_t, int, int,
                            float*, std::int64_t);
using CombineRows = void (*)(const float*, std::int64_t, CoefLayout, CoefRange, int, int,
                             const float*, std::int64_t, int, float*, std::int64_t);

#define SW_ATTENTION_KERNELS(SUFFIX, ATTR)                                                       \
  ATTR void combine_rows_##SUFFIX(const float* coef, std::int64_t ld_coef, CoefLayout layout,    \
                                  CoefRange range, int rows, int depth, const float* in,         \
                                  std::int64_t ld_in, int width, float* out,                     \
                                  std::int64_t ld_out) {                                         \
    combine_rows_body(coef, ld_coef, layout, range, rows, depth, in, ld_in, width, out, ld_out); \
  }                                                                                              \
  ATTR void causal_dots_##SUFFIX(const float* a, std::int64_t lda, const float* b,               \
                                 std::int64_t ldb, int n, int depth, float* out,                 \
                                 std::int64_t ld_out) {                                          \
    causal_dots_body(a, lda, b, ldb, n, depth, out, ld_out);                                     \
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
  dispatch(kCombineRows)(coef, ld_coef, layout, range, rows, depth, in, ld_in, width, out, ld_out);
}

void causal_dots(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, int n,
                 int depth, float* out, std::int64_t ld_out) {
  dispatch(kCausalDots)(a, lda, b, ldb, n, depth, out, ld_out);
}

}  // namespace shardwise
