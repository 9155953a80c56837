// Dense building blocks of the reference GPT (forward and backward), for float and double.
// Row-major throughout; GEMMs go through BLAS. Backward functions accumulate (+=) into
// parameter gradients and overwrite (=) activation gradients.
#pragma once

#include <cstdint>
#include <vector>

namespace shardwise {

// C = alpha * op(A) * op(B) + beta * C, row-major, through cblas_{s,d}gemm.
template <typename Scalar>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, Scalar alpha,
          const Scalar* a, std::int64_t lda, const Scalar* b, std::int64_t ldb, Scalar beta,
          Scalar* c, std::int64_t ldc);

// y[n, out] = x[n, in] * w[out, in]^T + bias (bias may be null).
template <typename Scalar>
void linear_forward(const Scalar* x, const Scalar* w, const Scalar* bias, std::int64_t n,
                    std::int64_t in, std::int64_t out, std::vector<Scalar>& y);

// sums[c] += sum over the rows of m[rows, cols] of column c, rows in order (bias gradients).
template <typename Scalar>
void add_column_sums(const Scalar* m, std::int64_t rows, std::int64_t cols, Scalar* sums);

// dw += dy^T x, dbias += column sums of dy (when dbias is non-null), dx = dy w.
template <typename Scalar>
void linear_backward(const Scalar* dy, const Scalar* x, const Scalar* w, std::int64_t n,
                     std::int64_t in, std::int64_t out, Scalar* dw, Scalar* dbias,
                     std::vector<Scalar>& dx);

// GELU, tanh approximation (GPT-2): y = gelu(x) and dydx = gelu'(x) (kept for backward).
template <typename Scalar>
void gelu_forward(const std::vector<Scalar>& x, std::vector<Scalar>& y, std::vector<Scalar>& dydx);
// d *= dydx (gelu_forward's derivative), in place. With dbias non-null, d holds rows of `cols`
// values and dbias += their column sums (rows in order, as add_column_sums): the bias gradient of
// the linear layer that produced GELU's input, taken while d is in cache.
template <typename Scalar>
void gelu_backward(const std::vector<Scalar>& dydx, std::vector<Scalar>& d, std::int64_t cols,
                   Scalar* dbias);

// Rotates the query and key parts of fused qkv rows ([q | k | v], row_stride apart) by the
// rotary position angles; inverse=true applies the transposed rotation (its backward).
template <typename Scalar>
void rope_apply(Scalar* qkv, int batch, int seq, int heads, int head_dim, std::int64_t row_stride,
                bool inverse);

// Causal multi-head attention over fused qkv rows [q | k | v]; keeps softmax probabilities
// (batch*heads*seq*seq) for backward; out is [batch*seq, heads*head_dim].
template <typename Scalar>
void attention_forward(const Scalar* qkv, int batch, int seq, int heads, int head_dim,
                       std::vector<Scalar>& probs, std::vector<Scalar>& out);

template <typename Scalar>
void attention_backward(const Scalar* qkv, const std::vector<Scalar>& probs, const Scalar* dout,
                        int batch, int seq, int heads, int head_dim, std::vector<Scalar>& dqkv);

// Turns logits[n, v] into softmax probabilities in place and returns the mean cross-entropy
// over rows whose target is >= 0 (their count goes to `counted`).
template <typename Scalar>
double softmax_cross_entropy(std::vector<Scalar>& logits, const std::vector<std::int32_t>& targets,
                             std::int64_t n, std::int64_t v, std::int64_t& counted);

}  // namespace shardwise
