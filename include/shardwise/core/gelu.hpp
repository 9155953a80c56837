// GELU with the tanh approximation (GPT-2) on fp32 arrays, vectorised for the CPU at run time
// (cpu_isa.hpp). libm's tanhf is a scalar call and was a third of a training step's CPU time;
// these are branch-free (Cephes' tanhf/expf polynomials) and give the same bits on every ISA
// level.
//   gelu(x)  = 0.5 x (1 + tanh(u)),  u = k (x + c x^3),  k = sqrt(2/pi), c = 0.044715
// computed as x s with s = 1 / (1 + exp(-2u)) (the same function: 0.5 (1 + tanh(u)) = s), which
// needs one exp and no cancellation where tanh(u) is near -1.
#pragma once

#include <cstdint>

namespace shardwise {

inline constexpr float kGeluTanhK = 0.7978845608028654f;  // sqrt(2/pi)
inline constexpr float kGeluTanhC = 0.044715f;

// The scalar form of the vectorised tanh (what every lane computes). NaN stays NaN, +-Inf -> +-1.
float tanh_approx(float x);

// The scalar forms of what every lane of the GELU kernels computes: gelu(x) and gelu'(x).
float gelu_approx(float x);
float gelu_grad_approx(float x);

// y[i] = tanh_approx(x[i]).
void tanh_approx_n(const float* x, float* y, std::int64_t n);

// y[i] = gelu(x[i]). x and y may be the same array.
void gelu_tanh_forward(const float* x, float* y, std::int64_t n);

// d[i] *= gelu'(x[i]), in place.
void gelu_tanh_backward(const float* x, float* d, std::int64_t n);

// y[i] = gelu(x[i]) and dydx[i] = gelu'(x[i]) from one tanh: the same bits as gelu_tanh_forward
// and as the factor gelu_tanh_backward multiplies by. A training forward keeps dydx so backward is
// one multiply instead of a second tanh. The three arrays must not overlap.
void gelu_tanh_forward_and_grad(const float* x, float* y, float* dydx, std::int64_t n);

// The backward of a GELU after a biased linear layer, in one pass over rows x cols: d *= dydx
// (the factors gelu_tanh_forward_and_grad kept), and dbias[c] += the products of column c, added
// row by row (the same order, so the same bits, on every ISA level). d and dydx must not overlap.
void gelu_apply_grad_with_bias_sums(const float* dydx, float* d, std::int64_t rows,
                                    std::int64_t cols, float* dbias);

}  // namespace shardwise
