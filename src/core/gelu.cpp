// Vectorised tanh-GELU: the math is branch-free per element so GCC vectorises each loop; each
// loop is compiled once per ISA level (without FMA, so all levels agree bit for bit).
#include "shardwise/core/gelu.hpp"

#include <bit>
#include <cstdint>

#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/core/fp8.hpp"

namespace shardwise {
namespace {

using fp8_detail::select;

// exp(y) for y in [-87, 87] (Cephes expf): y = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two
// so n ln2 is exact), exp(r) by a degree-7 polynomial, 2^n put in the exponent field.
SW_KERNEL_INLINE float exp_small_range(float y) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float shifted = y * kLog2e + kRoundMagic;
  const float n = shifted - kRoundMagic;
  const std::uint32_t n_bits = std::bit_cast<std::uint32_t>(shifted) - 0x4b400000u;
  const float r = (y - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e_r = p * (r * r) + r + 1.0f;
  return e_r * std::bit_cast<float>((n_bits + 127u) << 23);
}

// Cephes tanhf: odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above; sign put back last.
SW_KERNEL_INLINE float tanh_lane(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const float a = std::bit_cast<float>(u & 0x7fffffffu);
  // tanh rounds to 1 beyond ~9.01; the clamp keeps exp finite. NaN fails the compare and flows on.
  const float clamped = std::bit_cast<float>(
      select(a > 10.0f, std::bit_cast<std::uint32_t>(10.0f), std::bit_cast<std::uint32_t>(a)));
  const float large = 1.0f - 2.0f / (exp_small_range(clamped + clamped) + 1.0f);
  const float z = a * a;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * a + a;
  const std::uint32_t magnitude =
      select(a < 0.625f, std::bit_cast<std::uint32_t>(small), std::bit_cast<std::uint32_t>(large));
  return std::bit_cast<float>((u & 0x80000000u) | magnitude);
}

SW_KERNEL_INLINE float gelu_inner(float v) { return kGeluTanhK * (v + kGeluTanhC * v * v * v); }

SW_KERNEL_INLINE void tanh_body(const float* __restrict x, float* __restrict y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = tanh_lane(x[i]);
}

// GELU through 0.5 (1 + tanh(u)) = s = 1 / (1 + e), e = exp(-2u): one exp and one division, no
// second polynomial and no select between two tanh ranges, and no cancellation in 1 + tanh(u)
// for large negative inputs (or in 1 - s, which is e s). -2u is clamped to [-87, 87] so e stays
// finite and non-zero; NaN fails both compares and flows on.
struct GeluLane {
  float s;  // 0.5 (1 + tanh(u))
  float e;  // exp(-2u), so 1 - s = e s
};
SW_KERNEL_INLINE GeluLane gelu_lane(float v) {
  const float m = -2.0f * gelu_inner(v);
  std::uint32_t bits = std::bit_cast<std::uint32_t>(m);
  bits = select(m > 87.0f, std::bit_cast<std::uint32_t>(87.0f), bits);
  bits = select(m < -87.0f, std::bit_cast<std::uint32_t>(-87.0f), bits);
  const float e = exp_small_range(std::bit_cast<float>(bits));
  return {1.0f / (1.0f + e), e};
}

// gelu'(v) = s + 2 v s (1 - s) u'(v); one expression for backward and forward_and_grad so both
// give the same bits.
SW_KERNEL_INLINE float gelu_grad_lane(float v, GeluLane g) {
  const float du = kGeluTanhK * (1.0f + 3.0f * kGeluTanhC * v * v);
  return g.s + 2.0f * v * g.s * (g.e * g.s) * du;
}

// Not __restrict: forward may run in place.
SW_KERNEL_INLINE void forward_body(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v * gelu_lane(v).s;
  }
}

SW_KERNEL_INLINE void backward_body(const float* __restrict x, float* __restrict d,
                                    std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    d[i] *= gelu_grad_lane(v, gelu_lane(v));
  }
}

SW_KERNEL_INLINE void forward_and_grad_body(const float* __restrict x, float* __restrict y,
                                            float* __restrict dydx, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const GeluLane g = gelu_lane(v);
    y[i] = v * g.s;
    dydx[i] = gelu_grad_lane(v, g);
  }
}

// d *= dydx over rows x cols, each column's products added to sums[c] row by row (in row order
// on every ISA level: the vectors run across columns).
SW_KERNEL_INLINE void apply_grad_body(const float* __restrict dydx, float* __restrict d,
                                      std::int64_t rows, std::int64_t cols,
                                      float* __restrict sums) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* __restrict g = dydx + i * cols;
    float* __restrict row = d + i * cols;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = row[c] * g[c];
      row[c] = v;
      sums[c] += v;
    }
  }
}

struct GeluKernels {
  void (*tanh)(const float*, float*, std::int64_t);
  void (*forward)(const float*, float*, std::int64_t);
  void (*backward)(const float*, float*, std::int64_t);
  void (*forward_and_grad)(const float*, float*, float*, std::int64_t);
  void (*apply_grad)(const float*, float*, std::int64_t, std::int64_t, float*);
};

#define SW_GELU_KERNELS(SUFFIX, ATTR)                                                             \
  ATTR void tanh_##SUFFIX(const float* x, float* y, std::int64_t n) { tanh_body(x, y, n); }       \
  ATTR void forward_##SUFFIX(const float* x, float* y, std::int64_t n) { forward_body(x, y, n); } \
  ATTR void backward_##SUFFIX(const float* x, float* d, std::int64_t n) {                         \
    backward_body(x, d, n);                                                                       \
  }                                                                                               \
  ATTR void forward_and_grad_##SUFFIX(const float* x, float* y, float* dydx, std::int64_t n) {    \
    forward_and_grad_body(x, y, dydx, n);                                                         \
  }                                                                                               \
  ATTR void apply_grad_##SUFFIX(const float* g, float* d, std::int64_t rows, std::int64_t cols,   \
                                float* sums) {                                                    \
    apply_grad_body(g, d, rows, cols, sums);                                                      \
  }                                                                                               \
  constexpr GeluKernels kGelu_##SUFFIX = {tanh_##SUFFIX, forward_##SUFFIX, backward_##SUFFIX,     \
                                          forward_and_grad_##SUFFIX, apply_grad_##SUFFIX};

SW_GELU_KERNELS(baseline, )
SW_GELU_KERNELS(avx2, SW_TARGET_AVX2)
SW_GELU_KERNELS(avx512, SW_TARGET_AVX512)
#undef SW_GELU_KERNELS

constexpr GeluKernels kGeluKernels[kNumIsaLevels] = {kGelu_baseline, kGelu_avx2, kGelu_avx512};

}  // namespace

float tanh_approx(float x) { return tanh_lane(x); }

float gelu_approx(float x) { return x * gelu_lane(x).s; }

float gelu_grad_approx(float x) { return gelu_grad_lane(x, gelu_lane(x)); }

void tanh_approx_n(const float* x, float* y, std::int64_t n) {
  dispatch(kGeluKernels).tanh(x, y, n);
}

void gelu_tanh_forward(const float* x, float* y, std::int64_t n) {
  dispatch(kGeluKernels).forward(x, y, n);
}

void gelu_tanh_backward(const float* x, float* d, std::int64_t n) {
  dispatch(kGeluKernels).backward(x, d, n);
}

void gelu_tanh_forward_and_grad(const float* x, float* y, float* dydx, std::int64_t n) {
  dispatch(kGeluKernels).forward_and_grad(x, y, dydx, n);
}

void gelu_apply_grad_with_bias_sums(const float* dydx, float* d, std::int64_t rows,
                                    std::int64_t cols, float* dbias) {
  dispatch(kGeluKernels).apply_grad(dydx, d, rows, cols, dbias);
}

}  // namespace shardwise
