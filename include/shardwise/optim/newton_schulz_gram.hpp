// Gram Newton–Schulz: the iteration of optim::NewtonSchulz carried out on the m x m Gram matrix.
//
// With R_k = X_k X_k^T and P_k = p_k(R_k) = a_k I + b_k R_k + c_k R_k^2, the standard step is
// X_{k+1} = P_k X_k. Every P_k is a polynomial in R_0, so all of them commute and
//   R_{k+1} = P_k R_k P_k,   Q_{k+1} = P_k Q_k (Q_0 = I),   X_K = Q_K X_0:
// the products with the long side n (R_0 = X_0 X_0^T, and X_0 <- Q X_0) happen once, everything
// else is m x m. Every m x m product is symmetric (its factors commute), so only the tiles on
// and above the diagonal are formed. For m x n with n = 3.5 m (an FFN weight) that takes about
// 37% less time than the standard iteration on the CPU (bench/newton_schulz.cpp).
//
// Restart rule. Rounding errors in the m x m products (unit roundoff u: 2^-24 fp32, 2^-8 for bf16
// GEMM inputs) perturb Q by about u ||Q||, which reaches the output as u ||Q|| ||X_s||, X_s the
// iterate Q multiplies. The standard iteration perturbs X by about u per step instead. Q grows
// like 1/sigma_min (it lifts the smallest singular values to ~1), so the Gram form's error grows
// with the accumulated polynomial. A bound that needs no data: ||X_s||_2 <= s (s = 1 right after
// the Frobenius normalisation; later the scalar step maps sigma -> sigma p(sigma^2) bound it) and
// ||P_k||_2 <= max |p_k| on [0, s_k^2]. When the bound s * prod ||P_k|| of the current segment
// would pass the growth limit, the iteration restarts: X <- Q X (one product with n), R <- X X^T,
// Q <- I. The limit trades speed for error: 1024 for fp32 (u * 1024 ~ 6e-5 worst case, near the
// standard iteration's own fp32 error; the shipped sets grow Q by < 1024 in five steps, so fp32
// never restarts) and 32 for bf16 (two restarts in five steps for every shipped set; with 64 and
// one restart, Polar Express on an ill-conditioned input came out 20% less orthogonal than the
// standard bf16 iteration, with 32 within 3%: tests/optim/newton_schulz_gram_test.cpp).
//
// bf16: every GEMM input is bf16 (X, R, P, Q, P R), each stored m x m matrix rounded once from
// its fp32 product; R^2 and the polynomial's sum (c R^2 + b R) + a I stay fp32 until P is
// rounded; the output is fp32. The GPU path (cuda::NewtonSchulzCuda) rounds at the same points.
#pragma once

#include <cstdint>
#include <vector>

#include "shardwise/optim/newton_schulz.hpp"

namespace shardwise::optim {

// The growth limit used when options.gram_growth_limit is 0: 1024 for fp32, 32 for bf16.
double gram_default_growth_limit(MatmulPrecision precision);

// The steps (each in 1 .. steps-1, ascending) before which the Gram iteration re-forms X = Q X
// and restarts. A pure function of the options, shared by the CPU and GPU paths.
std::vector<int> gram_restart_steps(const NewtonSchulzOptions& options);

// GEMM flops of one Gram orthogonalization counted as plain GEMMs (symmetric products at full
// cost): 2 m^2 n per product with the long side, 2 m^3 per m x m product.
double gram_newton_schulz_gemm_flops(std::int64_t rows, std::int64_t cols,
                                     const NewtonSchulzOptions& options);

// Buffers of one Gram orthogonalization (NewtonSchulz's workspace).
struct GramBuffers {
  std::vector<float>& x;  // in: the normalised short-side iterate X_0 (numel); scratch
  std::vector<float>& y;  // numel scratch
  std::vector<float>& r;  // m x m: R
  std::vector<float>& p;  // m x m: R^2, then P
  std::vector<float>& q;  // m x m: Q
  std::vector<float>& t;  // m x m scratch
};

// out = Q_K X_0 for the short-side view (m x n; `wide`: the input itself, else its transpose,
// addressed through BLAS transpose flags as NewtonSchulz does).
void gram_newton_schulz(const NewtonSchulzOptions& options, bool wide, std::int64_t m,
                        std::int64_t n, GramBuffers buffers, float* out);

}  // namespace shardwise::optim
