#include "shardwise/model/layer_norm.hpp"

#include <cmath>
#include <type_traits>

#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/core/error.hpp"

#if SW_HAVE_ISA_LEVELS
#include <immintrin.h>
#endif

namespace shardwise {

namespace {

// Rows whose sums run side by side. Each row's sum still adds its columns in order; 8 chains
// keep the adders busy where one chain waits out each add's latency.
constexpr int kRowGroup = 8;

// How a group of kRowGroup rows gets its sums: plain loops (the compiler vectorises what it
// can), or AVX2 with the rows in the 8 lanes of a register.
enum class Path { kGeneric, kAvx2 };

// ---- Per-row pieces (vectorised along the row by the compiler for each ISA) ----

template <typename Scalar>
SW_KERNEL_INLINE void normalize_row(const Scalar* __restrict x, const Scalar* __restrict w,
                                    const Scalar* __restrict b, std::int64_t h, Scalar m, Scalar r,
                                    Scalar* __restrict y) {
  for (std::int64_t c = 0; c < h; ++c) y[c] = (x[c] - m) * r * w[c] + b[c];
}

// One row's parameter gradients (dw += dy * xhat, db += dy) and
// dx (=, +=) rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
template <LayerNormDx kMode, typename Scalar>
SW_KERNEL_INLINE void backward_row(const Scalar* __restrict dy, const Scalar* __restrict x,
                                   Scalar m, Scalar r, const Scalar* __restrict w, std::int64_t h,
                                   Scalar sum_dxhat, Scalar sum_dxhat_xhat, Scalar* __restrict dw,
                                   Scalar* __restrict db, Scalar* __restrict dx) {
  const Scalar inv_h = Scalar(1) / static_cast<Scalar>(h);
  for (std::int64_t c = 0; c < h; ++c) {
    const Scalar xhat = (x[c] - m) * r;
    const Scalar dxhat = dy[c] * w[c];
    dw[c] += dy[c] * xhat;
    db[c] += dy[c];
    const Scalar v = r * (dxhat - sum_dxhat * inv_h - xhat * sum_dxhat_xhat * inv_h);
    if constexpr (kMode == LayerNormDx::kAdd) {
      dx[c] += v;
    } else {
      dx[c] = v;
    }
  }
}

// ---- Sums of G rows, generic: G scalar chains, each in column order ----

template <int G, typename Scalar>
SW_KERNEL_INLINE void row_stats(const Scalar* __restrict x, std::int64_t h, Scalar eps,
                                Scalar* __restrict mean, Scalar* __restrict rstd) {
  Scalar m[G] = {};
  for (std::int64_t c = 0; c < h; ++c) {
    for (int r = 0; r < G; ++r) m[r] += x[r * h + c];
  }
  for (int r = 0; r < G; ++r) m[r] /= static_cast<Scalar>(h);
  Scalar var[G] = {};
  for (std::int64_t c = 0; c < h; ++c) {
    for (int r = 0; r < G; ++r) var[r] += (x[r * h + c] - m[r]) * (x[r * h + c] - m[r]);
  }
  for (int r = 0; r < G; ++r) {
    var[r] /= static_cast<Scalar>(h);
    mean[r] = m[r];
    rstd[r] = Scalar(1) / std::sqrt(var[r] + eps);
  }
}

// Per row: sum_c dxhat and sum_c dxhat * xhat (dxhat = dy * w), each a chain in column order.
template <int G, typename Scalar>
SW_KERNEL_INLINE void row_grad_sums(const Scalar* __restrict dy, const Scalar* __restrict x,
                                    const Scalar* __restrict mean, const Scalar* __restrict rstd,
                                    const Scalar* __restrict w, std::int64_t h,
                                    Scalar* __restrict sum_dxhat,
                                    Scalar* __restrict sum_dxhat_xhat) {
  Scalar s1[G] = {}, s2[G] = {};
  for (std::int64_t c = 0; c < h; ++c) {
    for (int r = 0; r < G; ++r) {
      const Scalar xhat = (x[r * h + c] - mean[r]) * rstd[r];
      const Scalar dxhat = dy[r * h + c] * w[c];
      s1[r] += dxhat;
      s2[r] += dxhat * xhat;
    }
  }
  for (int r = 0; r < G; ++r) {
    sum_dxhat[r] = s1[r];
    sum_dxhat_xhat[r] = s2[r];
  }
}

// ---- Sums of 8 fp32 rows, AVX2: lane r holds row r, so one vector add advances all 8 chains
// by one column (the same adds, in the same order, as the scalar chains) ----

#if SW_HAVE_ISA_LEVELS
// t[j] (row j, columns c..c+7) -> t[j] (column c+j, rows 0..7).
SW_TARGET_AVX2 inline void transpose8(__m256 t[8]) {
  __m256 u[8], v[8];
  for (int k = 0; k < 4; ++k) {
    u[2 * k] = _mm256_unpacklo_ps(t[2 * k], t[2 * k + 1]);
    u[2 * k + 1] = _mm256_unpackhi_ps(t[2 * k], t[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {
    v[4 * k] = _mm256_shuffle_ps(u[4 * k], u[4 * k + 2], 0x44);
    v[4 * k + 1] = _mm256_shuffle_ps(u[4 * k], u[4 * k + 2], 0xEE);
    v[4 * k + 2] = _mm256_shuffle_ps(u[4 * k + 1], u[4 * k + 3], 0x44);
    v[4 * k + 3] = _mm256_shuffle_ps(u[4 * k + 1], u[4 * k + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm256_permute2f128_ps(v[k], v[k + 4], 0x20);
    t[k + 4] = _mm256_permute2f128_ps(v[k], v[k + 4], 0x31);
  }
}

// Columns c..c+7 of 8 rows (h apart), one column per vector.
SW_TARGET_AVX2 inline void load_columns(const float* x, std::int64_t h, std::int64_t c,
                                        __m256 t[8]) {
  for (int r = 0; r < 8; ++r) t[r] = _mm256_loadu_ps(x + r * h + c);
  transpose8(t);
}

// Column c of 8 rows (the tail past the last full 8 columns).
SW_TARGET_AVX2 inline __m256 load_column(const float* x, std::int64_t h, std::int64_t c) {
  return _mm256_set_ps(x[7 * h + c], x[6 * h + c], x[5 * h + c], x[4 * h + c], x[3 * h + c],
                       x[2 * h + c], x[h + c], x[c]);
}

SW_TARGET_AVX2 inline void row_stats8_avx2(const float* x, std::int64_t h, float eps, float* mean,
                                           float* rstd) {
  const __m256 hv = _mm256_set1_ps(static_cast<float>(h));
  const std::int64_t full = h / 8 * 8;
  __m256 t[8];
  __m256 m = _mm256_setzero_ps();
  for (std::int64_t c = 0; c < full; c += 8) {
    load_columns(x, h, c, t);
    for (int j = 0; j < 8; ++j) m = _mm256_add_ps(m, t[j]);
  }
  for (std::int64_t c = full; c < h; ++c) m = _mm256_add_ps(m, load_column(x, h, c));
  m = _mm256_div_ps(m, hv);
  __m256 var = _mm256_setzero_ps();
  for (std::int64_t c = 0; c < full; c += 8) {
    load_columns(x, h, c, t);
    for (int j = 0; j < 8; ++j) {
      const __m256 d = _mm256_sub_ps(t[j], m);
      var = _mm256_add_ps(var, _mm256_mul_ps(d, d));
    }
  }
  for (std::int64_t c = full; c < h; ++c) {
    const __m256 d = _mm256_sub_ps(load_column(x, h, c), m);
    var = _mm256_add_ps(var, _mm256_mul_ps(d, d));
  }
  var = _mm256_div_ps(var, hv);
  _mm256_storeu_ps(mean, m);
  _mm256_storeu_ps(rstd, _mm256_div_ps(_mm256_set1_ps(1.0f),
                                       _mm256_sqrt_ps(_mm256_add_ps(var, _mm256_set1_ps(eps)))));
}

// One column's step of the backward chains: xhat = (x - mean) * rstd, dxhat = dy * w.
SW_TARGET_AVX2 inline void grad_sums_step(__m256 x, __m256 dy, __m256 m, __m256 r, float w,
                                          __m256& s1, __m256& s2) {
  const __m256 xhat = _mm256_mul_ps(_mm256_sub_ps(x, m), r);
  const __m256 dxhat = _mm256_mul_ps(dy, _mm256_set1_ps(w));
  s1 = _mm256_add_ps(s1, dxhat);
  s2 = _mm256_add_ps(s2, _mm256_mul_ps(dxhat, xhat));
}

SW_TARGET_AVX2 inline void row_grad_sums8_avx2(const float* dy, const float* x, const float* mean,
                                               const float* rstd, const float* w, std::int64_t h,
                                               float* sum_dxhat, float* sum_dxhat_xhat) {
  const __m256 m = _mm256_loadu_ps(mean), r = _mm256_loadu_ps(rstd);
  const std::int64_t full = h / 8 * 8;
  __m256 s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps();
  __m256 tx[8], tdy[8];
  for (std::int64_t c = 0; c < full; c += 8) {
    load_columns(x, h, c, tx);
    load_columns(dy, h, c, tdy);
    for (int j = 0; j < 8; ++j) grad_sums_step(tx[j], tdy[j], m, r, w[c + j], s1, s2);
  }
  for (std::int64_t c = full; c < h; ++c) {
    grad_sums_step(load_column(x, h, c), load_column(dy, h, c), m, r, w[c], s1, s2);
  }
  _mm256_storeu_ps(sum_dxhat, s1);
  _mm256_storeu_ps(sum_dxhat_xhat, s2);
}
#endif

template <Path kPath, typename Scalar>
SW_KERNEL_INLINE void group_stats(const Scalar* x, std::int64_t h, Scalar eps, Scalar* mean,
                                  Scalar* rstd) {
#if SW_HAVE_ISA_LEVELS
  if constexpr (kPath == Path::kAvx2) {
    static_assert(std::is_same_v<Scalar, float> && kRowGroup == 8);
    row_stats8_avx2(x, h, eps, mean, rstd);
  } else  // NOLINT(readability/braces): the #if keeps one of the two branches
#endif
  {
    row_stats<kRowGroup>(x, h, eps, mean, rstd);
  }
}

template <Path kPath, typename Scalar>
SW_KERNEL_INLINE void group_grad_sums(const Scalar* dy, const Scalar* x, const Scalar* mean,
                                      const Scalar* rstd, const Scalar* w, std::int64_t h,
                                      Scalar* s1, Scalar* s2) {
#if SW_HAVE_ISA_LEVELS
  if constexpr (kPath == Path::kAvx2) {
    static_assert(std::is_same_v<Scalar, float> && kRowGroup == 8);
    row_grad_sums8_avx2(dy, x, mean, rstd, w, h, s1, s2);
  } else  // NOLINT(readability/braces)
#endif
  {
    row_grad_sums<kRowGroup>(dy, x, mean, rstd, w, h, s1, s2);
  }
}

// ---- Whole calls: full groups of rows, then the rest one at a time ----

template <Path kPath, typename Scalar>
SW_KERNEL_INLINE void forward_body(const Scalar* x, const Scalar* w, const Scalar* b,
                                   std::int64_t n, std::int64_t h, Scalar eps, Scalar* y,
                                   Scalar* mean, Scalar* rstd) {
  std::int64_t i = 0;
  for (; i + kRowGroup <= n; i += kRowGroup) {
    group_stats<kPath>(x + i * h, h, eps, mean + i, rstd + i);
    for (std::int64_t k = i; k < i + kRowGroup; ++k) {
      normalize_row(x + k * h, w, b, h, mean[k], rstd[k], y + k * h);
    }
  }
  for (; i < n; ++i) {
    row_stats<1>(x + i * h, h, eps, mean + i, rstd + i);
    normalize_row(x + i * h, w, b, h, mean[i], rstd[i], y + i * h);
  }
}

// Rows in order, so dw and db add the rows in order.
template <Path kPath, LayerNormDx kMode, typename Scalar>
SW_KERNEL_INLINE void backward_body(const Scalar* dy, const Scalar* x, const Scalar* mean,
                                    const Scalar* rstd, const Scalar* w, std::int64_t n,
                                    std::int64_t h, Scalar* dw, Scalar* db, Scalar* dx) {
  Scalar s1[kRowGroup], s2[kRowGroup];
  std::int64_t i = 0;
  for (; i + kRowGroup <= n; i += kRowGroup) {
    group_grad_sums<kPath>(dy + i * h, x + i * h, mean + i, rstd + i, w, h, s1, s2);
    for (int r = 0; r < kRowGroup; ++r) {
      const std::int64_t k = i + r;
      backward_row<kMode>(dy + k * h, x + k * h, mean[k], rstd[k], w, h, s1[r], s2[r], dw, db,
                          dx + k * h);
    }
  }
  for (; i < n; ++i) {
    row_grad_sums<1>(dy + i * h, x + i * h, mean + i, rstd + i, w, h, s1, s2);
    backward_row<kMode>(dy + i * h, x + i * h, mean[i], rstd[i], w, h, s1[0], s2[0], dw, db,
                        dx + i * h);
  }
}

// ---- fp32 entry points per ISA level ----

struct FloatLayerNormKernels {
  void (*forward)(const float*, const float*, const float*, std::int64_t, std::int64_t, float,
                  float*, float*, float*);
  void (*backward)(const float*, const float*, const float*, const float*, const float*,
                   std::int64_t, std::int64_t, float*, float*, float*, LayerNormDx);
};

#define SW_LAYER_NORM_KERNELS(SUFFIX, ATTR, PATH)                                                \
  ATTR void forward_##SUFFIX(const float* x, const float* w, const float* b, std::int64_t n,     \
                             std::int64_t h, float eps, float* y, float* mean, float* rstd) {    \
    forward_body<PATH>(x, w, b, n, h, eps, y, mean, rstd);                                       \
  }                                                                                              \
  ATTR void backward_##SUFFIX(const float* dy, const float* x, const float* mean,                \
                              const float* rstd, const float* w, std::int64_t n, std::int64_t h, \
                              float* dw, float* db, float* dx, LayerNormDx mode) {               \
    if (mode == LayerNormDx::kAdd) {                                                             \
      backward_body<PATH, LayerNormDx::kAdd>(dy, x, mean, rstd, w, n, h, dw, db, dx);            \
    } else {                                                                                     \
      backward_body<PATH, LayerNormDx::kOverwrite>(dy, x, mean, rstd, w, n, h, dw, db, dx);      \
    }                                                                                            \
  }                                                                                              \
  constexpr FloatLayerNormKernels kLayerNorm_##SUFFIX = {forward_##SUFFIX, backward_##SUFFIX};

SW_LAYER_NORM_KERNELS(baseline, , Path::kGeneric)
#if SW_HAVE_ISA_LEVELS
SW_LAYER_NORM_KERNELS(avx2, SW_TARGET_AVX2, Path::kAvx2)
// AVX-512 machines run the AVX2 kernels (8 rows per group is what the tiles are built for).
constexpr FloatLayerNormKernels kLayerNormKernels[kNumIsaLevels] = {
    kLayerNorm_baseline, kLayerNorm_avx2, kLayerNorm_avx2};
#else
constexpr FloatLayerNormKernels kLayerNormKernels[kNumIsaLevels] = {
    kLayerNorm_baseline, kLayerNorm_baseline, kLayerNorm_baseline};
#endif
#undef SW_LAYER_NORM_KERNELS

}  // namespace

template <typename Scalar>
void layer_norm_forward(const Scalar* x, const Scalar* w, const Scalar* b, std::int64_t n,
                        std::int64_t h, double eps, std::vector<Scalar>& y,
                        std::vector<Scalar>& mean, std::vector<Scalar>& rstd) {
  y.resize(static_cast<std::size_t>(n * h));
  mean.resize(static_cast<std::size_t>(n));
  rstd.resize(static_cast<std::size_t>(n));
  const auto e = static_cast<Scalar>(eps);
  if constexpr (std::is_same_v<Scalar, float>) {
    dispatch(kLayerNormKernels).forward(x, w, b, n, h, e, y.data(), mean.data(), rstd.data());
  } else {
    forward_body<Path::kGeneric>(x, w, b, n, h, e, y.data(), mean.data(), rstd.data());
  }
}

template <typename Scalar>
void layer_norm_backward(const Scalar* dy, const Scalar* x, const std::vector<Scalar>& mean,
                         const std::vector<Scalar>& rstd, const Scalar* w, std::int64_t n,
                         std::int64_t h, Scalar* dw, Scalar* db, std::vector<Scalar>& dx,
                         LayerNormDx mode) {
  if (mode == LayerNormDx::kAdd) {
    SW_CHECK(dx.size() == static_cast<std::size_t>(n * h), "layer_norm_backward: adding to ",
             dx.size(), " values, want ", n * h);
  } else {
    dx.resize(static_cast<std::size_t>(n * h));
  }
  if constexpr (std::is_same_v<Scalar, float>) {
    dispatch(kLayerNormKernels)
        .backward(dy, x, mean.data(), rstd.data(), w, n, h, dw, db, dx.data(), mode);
  } else if (mode == LayerNormDx::kAdd) {
    backward_body<Path::kGeneric, LayerNormDx::kAdd>(dy, x, mean.data(), rstd.data(), w, n, h, dw,
                                                     db, dx.data());
  } else {
    backward_body<Path::kGeneric, LayerNormDx::kOverwrite>(dy, x, mean.data(), rstd.data(), w, n, h,
                                                           dw, db, dx.data());
  }
}

#define SHARDWISE_INSTANTIATE_LAYER_NORM(S)                                                       \
  template void layer_norm_forward<S>(const S*, const S*, const S*, std::int64_t, std::int64_t,   \
                                      double, std::vector<S>&, std::vector<S>&, std::vector<S>&); \
  template void layer_norm_backward<S>(const S*, const S*, const std::vector<S>&,                 \
                                       const std::vector<S>&, const S*, std::int64_t,             \
                                       std::int64_t, S*, S*, std::vector<S>&, LayerNormDx);

SHARDWISE_INSTANTIATE_LAYER_NORM(float)
SHARDWISE_INSTANTIATE_LAYER_NORM(double)

}  // namespace shardwise
