#include "shardwise/optim/newton_schulz_gram.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "shardwise/core/blas.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/float_convert.hpp"

namespace shardwise::optim {

namespace {

using blas::Op;

double polynomial(const NsStepCoefficients& k, double lambda) {
  return k[0] + k[1] * lambda + k[2] * lambda * lambda;
}

// max |p(lambda)| on [0, top]: at an end or at the parabola's vertex.
double polynomial_bound(const NsStepCoefficients& k, double top) {
  double bound = std::max(std::abs(polynomial(k, 0.0)), std::abs(polynomial(k, top)));
  if (k[2] != 0.0) {
    const double vertex = -k[1] / (2.0 * k[2]);
    if (vertex > 0.0 && vertex < top) bound = std::max(bound, std::abs(polynomial(k, vertex)));
  }
  return bound;
}

// A bound on the largest singular value after one step: max sigma |p(sigma^2)| on [0, top],
// sampled finely (the map is a smooth quintic; the sampling error is far below its slack).
double singular_value_bound(const NsStepCoefficients& k, double top) {
  constexpr int kSamples = 4096;
  double bound = 0.0;
  for (int i = 0; i <= kSamples; ++i) {
    const double s = top * i / kSamples;
    bound = std::max(bound, std::abs(s * polynomial(k, s * s)));
  }
  return bound * (1.0 + 1.0 / kSamples);
}

void round_to_bf16_in_place(std::vector<float>& values, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) values[i] = round_to_bf16(values[i]);
}

// The m x m products and the short-side ones, in the view's row-major layout.
struct GramShape {
  bool wide;
  std::int64_t m, n;
  bool syrk, bf16;
  std::size_t mm() const { return static_cast<std::size_t>(m * m); }
  std::size_t numel() const { return static_cast<std::size_t>(m * n); }
};

// r = X X^T (rounded to bf16 when bf16).
void form_gram(const GramShape& s, const float* x, std::vector<float>& r) {
  if (s.syrk) {
    blas::ssyrk(s.wide ? Op::kNone : Op::kTranspose, s.m, s.n, 1.0f, x, s.wide ? s.n : s.m, 0.0f,
                r.data(), s.m);
    blas::fill_lower_from_upper(s.m, r.data(), s.m);
  } else if (s.wide) {
    blas::sgemm(Op::kNone, Op::kTranspose, s.m, s.m, s.n, 1.0f, x, s.n, x, s.n, 0.0f, r.data(),
                s.m);
  } else {
    blas::sgemm(Op::kTranspose, Op::kNone, s.m, s.m, s.n, 1.0f, x, s.m, x, s.m, 0.0f, r.data(),
                s.m);
  }
  if (s.bf16) round_to_bf16_in_place(r, s.mm());
}

// y = Q X (wide) or X Q (tall), Q symmetric m x m.
void apply_q(const GramShape& s, const float* q, const float* x, float* y) {
  if (s.wide) {
    blas::sgemm(Op::kNone, Op::kNone, s.m, s.n, s.m, 1.0f, q, s.m, x, s.n, 0.0f, y, s.n);
  } else {
    blas::sgemm(Op::kNone, Op::kNone, s.n, s.m, s.m, 1.0f, x, s.m, q, s.m, 0.0f, y, s.m);
  }
}

// c = a b for m x m matrices whose product is symmetric (a and b commute: both polynomials in
// R_0), rounded to bf16 when bf16. With syrk, only the tiles on and above the diagonal are
// formed (one GEMM each; with 4 x 4 tiles 10/16 of the flops) and the rest mirrored, as ssyrk
// does for X X^T; OpenBLAS 0.3.21 has no sgemmt to do it in one call.
void symmetric_result_product(const GramShape& s, const float* a, const float* b,
                              std::vector<float>& c) {
  constexpr std::int64_t kMinTile = 128;
  const std::int64_t tiles = s.syrk ? std::clamp<std::int64_t>(s.m / kMinTile, 1, 4) : 1;
  if (tiles == 1) {
    blas::sgemm(Op::kNone, Op::kNone, s.m, s.m, s.m, 1.0f, a, s.m, b, s.m, 0.0f, c.data(), s.m);
  } else {
    const auto edge = [&](std::int64_t t) { return t * s.m / tiles; };
    for (std::int64_t i = 0; i < tiles; ++i) {
      for (std::int64_t j = i; j < tiles; ++j) {
        blas::sgemm(Op::kNone, Op::kNone, edge(i + 1) - edge(i), edge(j + 1) - edge(j), s.m, 1.0f,
                    a + edge(i) * s.m, s.m, b + edge(j), s.m, 0.0f,
                    c.data() + edge(i) * s.m + edge(j), s.m);
      }
    }
    blas::fill_lower_from_upper(s.m, c.data(), s.m);
  }
  if (s.bf16) round_to_bf16_in_place(c, s.mm());
}

// c = a a (a symmetric, so a a^T: ssyrk at half the flops), in fp32.
void symmetric_square(const GramShape& s, const std::vector<float>& a, std::vector<float>& c) {
  if (s.syrk) {
    blas::ssyrk(Op::kNone, s.m, s.m, 1.0f, a.data(), s.m, 0.0f, c.data(), s.m);
    blas::fill_lower_from_upper(s.m, c.data(), s.m);
  } else {
    blas::sgemm(Op::kNone, Op::kNone, s.m, s.m, s.m, 1.0f, a.data(), s.m, a.data(), s.m, 0.0f,
                c.data(), s.m);
  }
}

// p = c R^2 + b R + a I, with R^2 (fp32) formed in p first.
void form_polynomial(const GramShape& s, const std::vector<float>& r, NsStepCoefficients k,
                     std::vector<float>& p) {
  symmetric_square(s, r, p);
  const auto a = static_cast<float>(k[0]), b = static_cast<float>(k[1]),
             c = static_cast<float>(k[2]);
  for (std::int64_t i = 0; i < s.m; ++i) {
    for (std::int64_t j = 0; j < s.m; ++j) {
      float& v = p[static_cast<std::size_t>(i * s.m + j)];
      v = c * v + b * r[static_cast<std::size_t>(i * s.m + j)];
      if (i == j) v += a;
    }
  }
  if (s.bf16) round_to_bf16_in_place(p, s.mm());
}

}  // namespace

double gram_default_growth_limit(MatmulPrecision precision) {
  return precision == MatmulPrecision::kBf16 ? 32.0 : 1024.0;
}

std::vector<int> gram_restart_steps(const NewtonSchulzOptions& options) {
  const double limit = options.gram_growth_limit > 0.0
                           ? options.gram_growth_limit
                           : gram_default_growth_limit(options.precision);
  std::vector<int> restarts;
  double sigma = 1.0;   // bound on the iterate's largest singular value (Frobenius-normalised)
  double growth = 1.0;  // bound on ||Q|| ||X_s|| for the current segment
  for (int step = 0; step < options.steps; ++step) {
    const NsStepCoefficients k = ns_coefficients(options.coefficients, step);
    const double p_bound = polynomial_bound(k, sigma * sigma);
    if (step > 0 && growth * p_bound > limit && growth > sigma) {
      restarts.push_back(step);
      growth = sigma;
    }
    growth *= p_bound;
    sigma = singular_value_bound(k, sigma);
  }
  return restarts;
}

double gram_newton_schulz_gemm_flops(std::int64_t rows, std::int64_t cols,
                                     const NewtonSchulzOptions& options) {
  const double m = static_cast<double>(std::min(rows, cols));
  const double n = static_cast<double>(std::max(rows, cols));
  if (options.steps == 0) return 0.0;
  const std::vector<int> restarts = gram_restart_steps(options);
  const auto is_restart = [&](int step) {
    return std::find(restarts.begin(), restarts.end(), step) != restarts.end();
  };
  double flops = 2.0 * m * m * n * (2.0 + 2.0 * static_cast<double>(restarts.size()));
  for (int step = 0; step < options.steps; ++step) {
    flops += 2.0 * m * m * m;                                                         // R^2
    if (step > 0 && !is_restart(step)) flops += 2.0 * m * m * m;                      // P Q
    if (step + 1 < options.steps && !is_restart(step + 1)) flops += 4.0 * m * m * m;  // P R P
  }
  return flops;
}

void gram_newton_schulz(const NewtonSchulzOptions& options, bool wide, std::int64_t m,
                        std::int64_t n, GramBuffers w, float* out) {
  const GramShape s{wide, m, n, options.use_syrk, options.precision == MatmulPrecision::kBf16};
  if (options.steps == 0) {
    std::memcpy(out, w.x.data(), sizeof(float) * s.numel());
    return;
  }
  const std::vector<int> restarts = gram_restart_steps(options);
  const auto is_restart = [&](int step) {
    return std::find(restarts.begin(), restarts.end(), step) != restarts.end();
  };
  for (std::vector<float>* v : {&w.r, &w.p, &w.q, &w.t}) v->resize(s.mm());
  if (s.bf16) round_to_bf16_in_place(w.x, s.numel());
  form_gram(s, w.x.data(), w.r);
  bool q_is_identity = true;
  for (int step = 0; step < options.steps; ++step) {
    if (is_restart(step)) {  // X <- Q X, R <- X X^T, Q <- I
      apply_q(s, w.q.data(), w.x.data(), w.y.data());
      std::swap(w.x, w.y);
      if (s.bf16) round_to_bf16_in_place(w.x, s.numel());
      form_gram(s, w.x.data(), w.r);
      q_is_identity = true;
    }
    form_polynomial(s, w.r, ns_coefficients(options.coefficients, step), w.p);
    // Q <- P Q; afterwards P is in *p and *spare is free.
    std::vector<float>* p = &w.q;
    std::vector<float>* spare = &w.p;
    if (q_is_identity) {
      std::swap(w.q, w.p);
    } else {
      symmetric_result_product(s, w.p.data(), w.q.data(), w.t);
      std::swap(w.q, w.t);
      p = &w.p;
      spare = &w.t;
    }
    q_is_identity = false;
    if (step + 1 < options.steps && !is_restart(step + 1)) {  // R <- (P R) P
      // (P^2 R would save a product, but P^2's larger norm costs ~4x the rounding error.)
      symmetric_result_product(s, p->data(), w.r.data(), *spare);
      symmetric_result_product(s, spare->data(), p->data(), w.r);
    }
  }
  apply_q(s, w.q.data(), w.x.data(), out);
}

}  // namespace shardwise::optim
