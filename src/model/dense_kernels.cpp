#include "shardwise/model/dense_kernels.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <type_traits>

#include "shardwise/core/error.hpp"
#include "shardwise/core/gelu.hpp"
#include "shardwise/model/attention_kernels.hpp"

namespace shardwise {

namespace {

CBLAS_TRANSPOSE op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

// 1e4^(-2i/d): the rotary frequency of dimension pair i.
double rope_inv_freq(int pair, int head_dim) {
  return std::pow(10000.0, -2.0 * pair / static_cast<double>(head_dim));
}

}  // namespace

template <>
void gemm<float>(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                 float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                 float beta, float* c, std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

template <>
void gemm<double>(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                  double alpha, const double* a, std::int64_t lda, const double* b,
                  std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

// __restrict lets the compiler vectorise across columns (each column keeps its row order).
template <typename Scalar>
void add_column_sums(const Scalar* __restrict m, std::int64_t rows, std::int64_t cols,
                     Scalar* __restrict sums) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const Scalar* row = m + i * cols;
    for (std::int64_t c = 0; c < cols; ++c) sums[c] += row[c];
  }
}

template <typename Scalar>
void linear_forward(const Scalar* x, const Scalar* w, const Scalar* bias, std::int64_t n,
                    std::int64_t in, std::int64_t out, std::vector<Scalar>& y) {
  y.resize(static_cast<std::size_t>(n * out));
  if (bias) {
    for (std::int64_t i = 0; i < n; ++i) std::copy(bias, bias + out, y.data() + i * out);
  }
  gemm<Scalar>(false, true, n, out, in, Scalar(1), x, in, w, in, bias ? Scalar(1) : Scalar(0),
               y.data(), out);
}

template <typename Scalar>
void linear_backward(const Scalar* dy, const Scalar* x, const Scalar* w, std::int64_t n,
                     std::int64_t in, std::int64_t out, Scalar* dw, Scalar* dbias,
                     std::vector<Scalar>& dx) {
  gemm<Scalar>(true, false, out, in, n, Scalar(1), dy, out, x, in, Scalar(1), dw, in);
  if (dbias) add_column_sums(dy, n, out, dbias);
  dx.resize(static_cast<std::size_t>(n * in));
  gemm<Scalar>(false, false, n, in, out, Scalar(1), dy, out, w, in, Scalar(0), dx.data(), in);
}

namespace {
constexpr double kGeluK = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluC = 0.044715;
}  // namespace

// fp32 goes through core's vectorised GELU (libm's scalar tanhf dominated a step's CPU time);
// fp64 (the gradient-check reference) keeps std::tanh. Forward also keeps gelu'(x), so backward
// multiplies by it instead of evaluating tanh a second time.
template <typename Scalar>
void gelu_forward(const std::vector<Scalar>& x, std::vector<Scalar>& y, std::vector<Scalar>& dydx) {
  y.resize(x.size());
  dydx.resize(x.size());
  if constexpr (std::is_same_v<Scalar, float>) {
    gelu_tanh_forward_and_grad(x.data(), y.data(), dydx.data(),
                               static_cast<std::int64_t>(x.size()));
    return;
  }
  const Scalar k = static_cast<Scalar>(kGeluK), c = static_cast<Scalar>(kGeluC);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const Scalar v = x[i];
    const Scalar t = std::tanh(k * (v + c * v * v * v));
    y[i] = Scalar(0.5) * v * (Scalar(1) + t);
    const Scalar dt = (Scalar(1) - t * t) * k * (Scalar(1) + Scalar(3) * c * v * v);
    dydx[i] = Scalar(0.5) * (Scalar(1) + t) + Scalar(0.5) * v * dt;
  }
}

template <typename Scalar>
void gelu_backward(const std::vector<Scalar>& dydx, std::vector<Scalar>& d, std::int64_t cols,
                   Scalar* dbias) {
  SW_CHECK(dydx.size() == d.size() && cols > 0 && d.size() % cols == 0,
           "gelu_backward: ", dydx.size(), " derivatives for ", d.size(), " gradients in rows of ",
           cols);
  const Scalar* __restrict g = dydx.data();
  Scalar* __restrict out = d.data();
  if (!dbias) {
    for (std::size_t i = 0; i < d.size(); ++i) out[i] *= g[i];
    return;
  }
  const auto rows = static_cast<std::int64_t>(d.size()) / cols;
  if constexpr (std::is_same_v<Scalar, float>) {
    gelu_apply_grad_with_bias_sums(g, out, rows, cols, dbias);
    return;
  }
  // Row by row, so the bias sums add rows in order while each row is still in cache.
  Scalar* __restrict sums = dbias;
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const Scalar v = out[i * cols + c] * g[i * cols + c];
      out[i * cols + c] = v;
      sums[c] += v;
    }
  }
}

template <typename Scalar>
void rope_apply(Scalar* qkv, int batch, int seq, int heads, int head_dim, std::int64_t row_stride,
                bool inverse) {
  const std::int64_t hidden = std::int64_t{heads} * head_dim;
  const Scalar sign = inverse ? Scalar(-1) : Scalar(1);
  for (int pos = 0; pos < seq; ++pos) {
    for (int pair = 0; pair < head_dim / 2; ++pair) {
      const double angle = pos * rope_inv_freq(pair, head_dim);
      const Scalar cs = static_cast<Scalar>(std::cos(angle));
      const Scalar sn = sign * static_cast<Scalar>(std::sin(angle));
      for (int b = 0; b < batch; ++b) {
        Scalar* row = qkv + (std::int64_t{b} * seq + pos) * row_stride;
        for (int part = 0; part < 2; ++part) {  // query, key
          for (int hh = 0; hh < heads; ++hh) {
            Scalar* v = row + part * hidden + std::int64_t{hh} * head_dim + 2 * pair;
            const Scalar v0 = v[0], v1 = v[1];
            v[0] = v0 * cs - v1 * sn;
            v[1] = v0 * sn + v1 * cs;
          }
        }
      }
    }
  }
}

namespace {

// Causal softmax over each row of a seq x seq score block, in place: row i keeps columns j <= i
// (scores times `scale` first when it is not 1) and zeroes the rest.
template <typename Scalar>
void causal_softmax_rows(Scalar* p, int seq, Scalar scale) {
  for (int i = 0; i < seq; ++i) {
    Scalar* row = p + std::int64_t{i} * seq;
    if (scale != Scalar(1)) {
      for (int j = 0; j <= i; ++j) row[j] *= scale;
    }
    const Scalar mx = *std::max_element(row, row + i + 1);
    Scalar sum = 0;
    for (int j = 0; j <= i; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    for (int j = 0; j <= i; ++j) row[j] /= sum;
    for (int j = i + 1; j < seq; ++j) row[j] = 0;  // causal mask
  }
}

// Softmax backward over a seq x seq block: ds = p * (ds - sum_j ds * p) * scale, causal.
template <typename Scalar>
void causal_softmax_backward_rows(const Scalar* p, int seq, Scalar scale, Scalar* ds) {
  for (int i = 0; i < seq; ++i) {
    Scalar* row = ds + std::int64_t{i} * seq;
    const Scalar* prow = p + std::int64_t{i} * seq;
    Scalar dot = 0;
    for (int j = 0; j <= i; ++j) dot += row[j] * prow[j];
    for (int j = 0; j <= i; ++j) row[j] = prow[j] * (row[j] - dot) * scale;
    for (int j = i + 1; j < seq; ++j) row[j] = 0;
  }
}

// One (sequence, head) of the forward. q, k, v: seq rows `stride` apart; p: seq x seq; o: seq
// rows `hidden` apart. fp32 runs the direct kernels (attention_kernels.hpp), fp64 BLAS.
template <typename Scalar>
void attention_head_forward(const Scalar* q, const Scalar* k, const Scalar* v, int seq,
                            int head_dim, std::int64_t stride, std::int64_t hidden, Scalar scale,
                            Scalar* p, Scalar* o) {
  if constexpr (std::is_same_v<Scalar, float>) {
    causal_dots(q, stride, k, stride, seq, head_dim, p, seq);
    causal_softmax_rows(p, seq, scale);
    combine_rows(p, seq, CoefLayout::kRowMajor, CoefRange::kUpToRow, seq, seq, v, stride, head_dim,
                 o, hidden);
  } else {
    gemm<Scalar>(false, true, seq, seq, head_dim, scale, q, stride, k, stride, Scalar(0), p, seq);
    causal_softmax_rows(p, seq, Scalar(1));
    gemm<Scalar>(false, false, seq, head_dim, seq, Scalar(1), p, seq, v, stride, Scalar(0), o,
                 hidden);
  }
}

// One (sequence, head) of the backward: dv = p^T dy, ds = softmax'(dy v^T), dq = ds k,
// dk = ds^T q. `scratch` holds ds.
template <typename Scalar>
void attention_head_backward(const Scalar* q, const Scalar* k, const Scalar* v, const Scalar* p,
                             const Scalar* dy, int seq, int head_dim, std::int64_t stride,
                             std::int64_t hidden, Scalar scale, Scalar* dq, Scalar* dk, Scalar* dv,
                             std::vector<Scalar>& scratch) {
  const std::int64_t tt = std::int64_t{seq} * seq;
  scratch.resize(static_cast<std::size_t>(tt));
  Scalar* ds = scratch.data();
  if constexpr (std::is_same_v<Scalar, float>) {
    combine_rows(p, seq, CoefLayout::kTransposed, CoefRange::kFromRow, seq, seq, dy, hidden,
                 head_dim, dv, stride);
    causal_dots(dy, hidden, v, stride, seq, head_dim, ds, seq);
    causal_softmax_backward_rows(p, seq, scale, ds);
    combine_rows(ds, seq, CoefLayout::kRowMajor, CoefRange::kUpToRow, seq, seq, k, stride, head_dim,
                 dq, stride);
    combine_rows(ds, seq, CoefLayout::kTransposed, CoefRange::kFromRow, seq, seq, q, stride,
                 head_dim, dk, stride);
  } else {
    gemm<Scalar>(true, false, seq, head_dim, seq, Scalar(1), p, seq, dy, hidden, Scalar(0), dv,
                 stride);
    gemm<Scalar>(false, true, seq, seq, head_dim, Scalar(1), dy, hidden, v, stride, Scalar(0), ds,
                 seq);
    causal_softmax_backward_rows(p, seq, scale, ds);
    gemm<Scalar>(false, false, seq, head_dim, seq, Scalar(1), ds, seq, k, stride, Scalar(0), dq,
                 stride);
    gemm<Scalar>(true, false, seq, head_dim, seq, Scalar(1), ds, seq, q, stride, Scalar(0), dk,
                 stride);
  }
}

}  // namespace

template <typename Scalar>
void attention_forward(const Scalar* qkv, int batch, int seq, int heads, int head_dim,
                       std::vector<Scalar>& probs, std::vector<Scalar>& out) {
  const std::int64_t hidden = std::int64_t{heads} * head_dim, stride = 3 * hidden;
  const std::int64_t tt = std::int64_t{seq} * seq;
  // No zero fill: the score products and the causal mask write every element.
  probs.resize(static_cast<std::size_t>(std::int64_t{batch} * heads * tt));
  out.resize(static_cast<std::size_t>(std::int64_t{batch} * seq * hidden));
  const Scalar scale = Scalar(1) / std::sqrt(static_cast<Scalar>(head_dim));
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < batch; ++b) {
    for (int hh = 0; hh < heads; ++hh) {
      const Scalar* q = qkv + std::int64_t{b} * seq * stride + std::int64_t{hh} * head_dim;
      Scalar* p = probs.data() + (std::int64_t{b} * heads + hh) * tt;
      Scalar* o = out.data() + std::int64_t{b} * seq * hidden + std::int64_t{hh} * head_dim;
      attention_head_forward(q, q + hidden, q + 2 * hidden, seq, head_dim, stride, hidden, scale, p,
                             o);
    }
  }
}

template <typename Scalar>
void attention_backward(const Scalar* qkv, const std::vector<Scalar>& probs, const Scalar* dout,
                        int batch, int seq, int heads, int head_dim, std::vector<Scalar>& dqkv) {
  const std::int64_t hidden = std::int64_t{heads} * head_dim, stride = 3 * hidden;
  const std::int64_t tt = std::int64_t{seq} * seq;
  // No zero fill: the dQ, dK and dV products of every (batch, head) write all of it.
  dqkv.resize(static_cast<std::size_t>(std::int64_t{batch} * seq * stride));
  const Scalar scale = Scalar(1) / std::sqrt(static_cast<Scalar>(head_dim));
#pragma omp parallel
  {
    std::vector<Scalar> scratch;  // per thread
#pragma omp for collapse(2) schedule(static)
    for (int b = 0; b < batch; ++b) {
      for (int hh = 0; hh < heads; ++hh) {
        const std::int64_t base = std::int64_t{b} * seq * stride + std::int64_t{hh} * head_dim;
        const Scalar* q = qkv + base;
        Scalar* dq = dqkv.data() + base;
        const Scalar* p = probs.data() + (std::int64_t{b} * heads + hh) * tt;
        const Scalar* dy = dout + std::int64_t{b} * seq * hidden + std::int64_t{hh} * head_dim;
        attention_head_backward(q, q + hidden, q + 2 * hidden, p, dy, seq, head_dim, stride, hidden,
                                scale, dq, dq + hidden, dq + 2 * hidden, scratch);
      }
    }
  }
}

template <typename Scalar>
double softmax_cross_entropy(std::vector<Scalar>& logits, const std::vector<std::int32_t>& targets,
                             std::int64_t n, std::int64_t v, std::int64_t& counted) {
  double total = 0;
  counted = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    Scalar* row = logits.data() + i * v;
    const Scalar mx = *std::max_element(row, row + v);
    double sum = 0;
    for (std::int64_t c = 0; c < v; ++c) sum += std::exp(static_cast<double>(row[c] - mx));
    if (targets[i] >= 0) {
      total += std::log(sum) - static_cast<double>(row[targets[i]] - mx);
      ++counted;
    }
    const double inv = 1.0 / sum;
    for (std::int64_t c = 0; c < v; ++c) {
      row[c] = static_cast<Scalar>(std::exp(static_cast<double>(row[c] - mx)) * inv);
    }
  }
  return counted > 0 ? total / static_cast<double>(counted) : 0.0;
}

#define SHARDWISE_INSTANTIATE_DENSE_KERNELS(S)                                                  \
  template void linear_forward<S>(const S*, const S*, const S*, std::int64_t, std::int64_t,     \
                                  std::int64_t, std::vector<S>&);                               \
  template void linear_backward<S>(const S*, const S*, const S*, std::int64_t, std::int64_t,    \
                                   std::int64_t, S*, S*, std::vector<S>&);                      \
  template void gelu_forward<S>(const std::vector<S>&, std::vector<S>&, std::vector<S>&);       \
  template void add_column_sums<S>(const S*, std::int64_t, std::int64_t, S*);                   \
  template void gelu_backward<S>(const std::vector<S>&, std::vector<S>&, std::int64_t, S*);     \
  template void rope_apply<S>(S*, int, int, int, int, std::int64_t, bool);                      \
  template void attention_forward<S>(const S*, int, int, int, int, std::vector<S>&,             \
                                     std::vector<S>&);                                          \
  template void attention_backward<S>(const S*, const std::vector<S>&, const S*, int, int, int, \
                                      int, std::vector<S>&);                                    \
  template double softmax_cross_entropy<S>(std::vector<S>&, const std::vector<std::int32_t>&,   \
                                           std::int64_t, std::int64_t, std::int64_t&);

SHARDWISE_INSTANTIATE_DENSE_KERNELS(float)
SHARDWISE_INSTANTIATE_DENSE_KERNELS(double)

}  // namespace shardwise
