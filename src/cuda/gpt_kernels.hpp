// The non-GEMM pieces of the device GPT (private to shardwise_cuda): embedding, rotary positions
// and the head layout, layer norm, GELU, causal softmax, cross-entropy, residuals and bias
// gradients. Row-major like the CPU model (src/model); every launcher is asynchronous on
// `stream`. Backward launchers accumulate (+=) into parameter gradients and overwrite (=)
// activation gradients unless they say otherwise.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace shardwise::cuda::detail {

// ---- embedding (gpt_embedding_kernels.cu) ----

// x[i, :] = wte[tokens[i], :] (+ wpe[i % seq, :] when wpe is not null), i < n.
void launch_embedding_forward(const std::int32_t* tokens, const float* wte, const float* wpe,
                              std::int64_t n, int seq, int hidden, float* x, cudaStream_t stream);
// wte_grad[tokens[i], :] += dx[i, :] (atomic adds: rows with the same token meet in any order).
void launch_embedding_backward(const std::int32_t* tokens, const float* dx, std::int64_t n,
                               int hidden, float* wte_grad, cudaStream_t stream);
// wpe_grad[t, :] += dx[b * seq + t, :] for b = 0, 1, ... in order (the CPU model's order).
void launch_position_backward(const float* dx, int batch, int seq, int hidden, float* wpe_grad,
                              cudaStream_t stream);

// ---- head layout and rotary positions (gpt_attention_kernels.cu) ----

// Rotation of one fused-row part: cos / sin tables [seq, head_dim / 2] and the sign of the sine
// (+1 forward, -1 the transposed rotation of backward). cos null: no rotation.
struct RopeTables {
  const float* cos = nullptr;
  const float* sin = nullptr;
  float sign = 1.0f;
};

// heads[b, head, s, :] = rows[b * seq + s, col0 + head * head_dim + :] (rotated by `rope`).
void launch_rows_to_heads(const float* rows, std::int64_t row_stride, std::int64_t col0, int batch,
                          int seq, int heads, int head_dim, RopeTables rope, float* out,
                          cudaStream_t stream);
// rows[b * seq + s, col0 + head * head_dim + :] = heads[b, head, s, :] (rotated by `rope`).
void launch_heads_to_rows(const float* heads_in, int batch, int seq, int heads, int head_dim,
                          RopeTables rope, float* rows, std::int64_t row_stride, std::int64_t col0,
                          cudaStream_t stream);
// Each of `count` seq x seq score blocks, row i: softmax over columns j <= i, zero beyond.
void launch_causal_softmax(float* scores, std::int64_t count, int seq, cudaStream_t stream);
// ds = p * (ds - sum_j ds_j p_j) * scale over j <= i, zero beyond (in place on ds).
void launch_causal_softmax_backward(const float* probs, float* ds, std::int64_t count, int seq,
                                    float scale, cudaStream_t stream);

// ---- layer norm (gpt_layer_norm_kernels.cu) ----

// y = (x - mean) * rstd * w + b per row of [n, h]; keeps mean and rstd.
void launch_layer_norm_forward(const float* x, const float* w, const float* b, std::int64_t n,
                               int h, float eps, float* y, float* mean, float* rstd,
                               cudaStream_t stream);
// dx (= or += with add) the input gradient; dw += sum over rows of dy * xhat, db += sum of dy
// (through `partials`, layer_norm_partials(n, h) floats).
void launch_layer_norm_backward(const float* dy, const float* x, const float* mean,
                                const float* rstd, const float* w, std::int64_t n, int h, float* dx,
                                bool add, float* dw, float* db, float* partials,
                                cudaStream_t stream);
std::int64_t layer_norm_partials(std::int64_t n, std::int64_t h);

// ---- element-wise and column sums (gpt_elementwise_kernels.cu) ----

// y[i, :] = bias for n rows of `cols` (the C a GEMM then adds its product to).
void launch_broadcast_rows(const float* bias, std::int64_t n, std::int64_t cols, float* y,
                           cudaStream_t stream);
// out = a + b over `count` values (out may alias a or b).
void launch_add(const float* a, const float* b, std::int64_t count, float* out,
                cudaStream_t stream);
// y = gelu(x) (the CPU model's tanh form through 1 / (1 + exp(-2u))).
void launch_gelu_forward(const float* x, float* y, std::int64_t count, cudaStream_t stream);
// d *= gelu'(x), in place.
void launch_gelu_backward(const float* x, float* d, std::int64_t count, cudaStream_t stream);
// sums[c] += sum over rows of m[rows, cols] column c (through `partials`,
// column_sum_partials(rows, cols) floats).
void launch_add_column_sums(const float* m, std::int64_t rows, std::int64_t cols, float* sums,
                            float* partials, cudaStream_t stream);
std::int64_t column_sum_partials(std::int64_t rows, std::int64_t cols);

// ---- cross-entropy (gpt_loss_kernels.cu) ----

// Per row of logits [n, vocab]: softmax in place, row_loss[i] = -log p[target] (0 for target < 0)
// and argmax[i] = the lowest index of the row's largest logit.
void launch_softmax_cross_entropy(float* logits, const std::int32_t* targets, std::int64_t n,
                                  std::int64_t vocab, double* row_loss, std::int32_t* argmax,
                                  cudaStream_t stream);
// probs -> d loss / d logits in place: (p - onehot(target)) * scale, zero rows for target < 0.
void launch_cross_entropy_backward(float* probs, const std::int32_t* targets, std::int64_t n,
                                   std::int64_t vocab, float scale, cudaStream_t stream);

}  // namespace shardwise::cuda::detail
