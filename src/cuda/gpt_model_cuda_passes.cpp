// GptModelCuda's per-block forward and backward and the embedding backward: the CPU model's
// steps (src/model/gpt_model.cpp) with the products on DeviceGemm and the rest in kernels.
// Row-major throughout: a linear layer is y[n, out] = x[n, in] w[out, in]^T + bias.
#include <cmath>

#include "gpt_kernels.hpp"
#include "gpt_model_cuda_state.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::cuda {

using detail::floats;
using detail::GemmOperand;

namespace {

constexpr float kLayerNormEps = 1e-5f;

// A row-major [rows, cols] array with no padding.
GemmOperand matrix(const float* data, std::int64_t rows, std::int64_t cols) {
  return {data, rows, cols, cols};
}

// `count` row-major [rows, cols] arrays, one after the other.
GemmOperand batch_of(const float* data, std::int64_t rows, std::int64_t cols) {
  return {data, rows, cols, cols, rows * cols};
}

// An A operand that holds what it held as the previous product's A (DeviceGemm may reuse its
// rounded copy).
GemmOperand again(GemmOperand operand) {
  operand.unchanged = true;
  return operand;
}

}  // namespace

// out = x_mid + mlp(ln2(x_mid)), x_mid = x_in + attn(ln1(x_in)).
void GptModelCuda::block_forward(int l, float* out) {
  State& s = *state_;
  detail::GptLayerActivations& a = s.layers[static_cast<std::size_t>(l)];
  const GptBlockParamIds& id = s.ids.blocks[static_cast<std::size_t>(l)];
  const std::int64_t n = s.n, h = config_.hidden, f = config_.ffn_hidden;
  detail::DeviceGemm& gemm = *s.gemm;
  detail::launch_layer_norm_forward(floats(a.x_in), use(id.ln1_w), use(id.ln1_b), n, config_.hidden,
                                    kLayerNormEps, floats(a.ln1_out), floats(a.ln1_mean),
                                    floats(a.ln1_rstd), s.stream);
  detail::launch_broadcast_rows(use(id.qkv_b), n, 3 * h, floats(s.rows3), s.stream);
  gemm.run(false, true, 1.0f, matrix(floats(a.ln1_out), n, h), matrix(use(id.qkv_w), 3 * h, h),
           1.0f, floats(s.rows3), 3 * h, "cublasGemmEx (qkv)");
  attention_forward(l);
  detail::launch_broadcast_rows(use(id.proj_b), n, h, floats(s.branch), s.stream);
  gemm.run(false, true, 1.0f, matrix(floats(a.attn_out), n, h), matrix(use(id.proj_w), h, h), 1.0f,
           floats(s.branch), h, "cublasGemmEx (proj)");
  detail::launch_add(floats(a.x_in), floats(s.branch), n * h, floats(a.x_mid), s.stream);
  detail::launch_layer_norm_forward(floats(a.x_mid), use(id.ln2_w), use(id.ln2_b), n,
                                    config_.hidden, kLayerNormEps, floats(a.ln2_out),
                                    floats(a.ln2_mean), floats(a.ln2_rstd), s.stream);
  detail::launch_broadcast_rows(use(id.fc1_b), n, f, floats(a.fc1_out), s.stream);
  gemm.run(false, true, 1.0f, matrix(floats(a.ln2_out), n, h), matrix(use(id.fc1_w), f, h), 1.0f,
           floats(a.fc1_out), f, "cublasGemmEx (fc1)");
  detail::launch_gelu_forward(floats(a.fc1_out), floats(a.gelu_out), n * f, s.stream);
  detail::launch_broadcast_rows(use(id.fc2_b), n, h, floats(s.branch), s.stream);
  gemm.run(false, true, 1.0f, matrix(floats(a.gelu_out), n, f), matrix(use(id.fc2_w), h, f), 1.0f,
           floats(s.branch), h, "cublasGemmEx (fc2)");
  detail::launch_add(floats(a.x_mid), floats(s.branch), n * h, out, s.stream);
}

// Causal attention from the qkv rows in s.rows3 to the block's attn_out: q, k (rotated) and v
// into head layout, scores = scale q k^T and softmax per (sequence, head), then p v back to rows.
void GptModelCuda::attention_forward(int l) {
  State& s = *state_;
  detail::GptLayerActivations& a = s.layers[static_cast<std::size_t>(l)];
  const int heads = config_.num_heads, hd = config_.head_dim(), seq = s.seq;
  const std::int64_t h = config_.hidden, nh = s.n * h, count = std::int64_t{s.batch} * heads;
  float* q = floats(a.qkv_heads);
  float* k = q + nh;
  float* v = k + nh;
  const detail::RopeTables rope{config_.rope ? floats(s.rope_cos) : nullptr, floats(s.rope_sin),
                                1.0f};
  const std::int64_t stride = 3 * h;
  detail::launch_rows_to_heads(floats(s.rows3), stride, 0, s.batch, seq, heads, hd, rope, q,
                               s.stream);
  detail::launch_rows_to_heads(floats(s.rows3), stride, h, s.batch, seq, heads, hd, rope, k,
                               s.stream);
  detail::launch_rows_to_heads(floats(s.rows3), stride, 2 * h, s.batch, seq, heads, hd, {}, v,
                               s.stream);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const auto batch = static_cast<int>(count);
  s.gemm->run(false, true, scale, batch_of(q, seq, hd), batch_of(k, seq, hd), 0.0f, floats(a.probs),
              seq, "cublasGemmStridedBatchedEx (scores)", batch, std::int64_t{seq} * seq);
  detail::launch_causal_softmax(floats(a.probs), count, seq, s.stream);
  s.gemm->run(false, false, 1.0f, batch_of(floats(a.probs), seq, seq), batch_of(v, seq, hd), 0.0f,
              floats(s.heads), hd, "cublasGemmStridedBatchedEx (probs x values)", batch,
              std::int64_t{seq} * hd);
  detail::launch_heads_to_rows(floats(s.heads), s.batch, seq, heads, hd, {}, floats(a.attn_out), h,
                               0, s.stream);
}

void GptModelCuda::backward(double loss_scale, const std::function<void(ParamId)>& grad_ready) {
  State& s = *state_;
  SW_REQUIRE(s.forward_done, InvalidArgument,
             "GptModelCuda::backward without a forward pass since the last backward");
  s.forward_done = false;
  const std::int64_t n = s.n, h = config_.hidden, v = config_.vocab_size;
  const float scale = s.counted > 0 ? static_cast<float>(loss_scale / s.counted) : 0.0f;
  detail::DeviceGemm& gemm = *s.gemm;
  auto ready = [&](ParamId id) {
    if (grad_ready) grad_ready(id);
  };
  // d loss / d logits, in place of the softmax.
  float* dlogits = floats(s.logits);
  detail::launch_cross_entropy_backward(dlogits, s.targets_d.as<std::int32_t>(), n, v, scale,
                                        s.stream);
  gemm.run(true, false, 1.0f, matrix(dlogits, n, v), matrix(floats(s.lnf_out), n, h), 1.0f,
           grads_[s.ids.head], h, "cublasGemmEx (output layer weight gradient)");
  gemm.run(false, false, 1.0f, again(matrix(dlogits, n, v)), matrix(values_[s.ids.head], v, h),
           0.0f, floats(s.dx), h, "cublasGemmEx (final norm output gradient)");
  if (s.ids.head != s.ids.wte) ready(s.ids.head);
  detail::launch_layer_norm_backward(floats(s.dx), floats(s.x_final), floats(s.lnf_mean),
                                     floats(s.lnf_rstd), values_[s.ids.lnf_w], n, config_.hidden,
                                     floats(s.dres), false, grads_[s.ids.lnf_w],
                                     grads_[s.ids.lnf_b], floats(s.partials), s.stream);
  ready(s.ids.lnf_b);
  ready(s.ids.lnf_w);
  for (int l = config_.num_layers - 1; l >= 0; --l) block_backward(l, grad_ready);
  embed_backward(grad_ready);
}

void GptModelCuda::block_backward(int l, const std::function<void(ParamId)>& grad_ready) {
  State& s = *state_;
  detail::GptLayerActivations& a = s.layers[static_cast<std::size_t>(l)];
  const GptBlockParamIds& id = s.ids.blocks[static_cast<std::size_t>(l)];
  const std::int64_t n = s.n, h = config_.hidden, f = config_.ffn_hidden;
  detail::DeviceGemm& gemm = *s.gemm;
  float* dres = floats(s.dres);
  float* partials = floats(s.partials);
  auto ready = [&](ParamId p) {
    if (grad_ready) grad_ready(p);
  };
  // MLP: x = x_mid + fc2(gelu(fc1(ln2(x_mid)))).
  gemm.run(true, false, 1.0f, matrix(dres, n, h), matrix(floats(a.gelu_out), n, f), 1.0f,
           grads_[id.fc2_w], f, "cublasGemmEx (fc2 weight gradient)");
  detail::launch_add_column_sums(dres, n, h, grads_[id.fc2_b], partials, s.stream);
  gemm.run(false, false, 1.0f, again(matrix(dres, n, h)), matrix(values_[id.fc2_w], h, f), 0.0f,
           floats(s.dffn), f, "cublasGemmEx (fc2 input gradient)");
  ready(id.fc2_b);
  ready(id.fc2_w);
  detail::launch_gelu_backward(floats(a.fc1_out), floats(s.dffn), n * f, s.stream);
  detail::launch_add_column_sums(floats(s.dffn), n, f, grads_[id.fc1_b], partials, s.stream);
  gemm.run(true, false, 1.0f, matrix(floats(s.dffn), n, f), matrix(floats(a.ln2_out), n, h), 1.0f,
           grads_[id.fc1_w], h, "cublasGemmEx (fc1 weight gradient)");
  gemm.run(false, false, 1.0f, again(matrix(floats(s.dffn), n, f)), matrix(values_[id.fc1_w], f, h),
           0.0f, floats(s.dln), h, "cublasGemmEx (fc1 input gradient)");
  ready(id.fc1_b);
  ready(id.fc1_w);
  detail::launch_layer_norm_backward(floats(s.dln), floats(a.x_mid), floats(a.ln2_mean),
                                     floats(a.ln2_rstd), values_[id.ln2_w], n, config_.hidden, dres,
                                     true, grads_[id.ln2_w], grads_[id.ln2_b], partials, s.stream);
  ready(id.ln2_b);
  ready(id.ln2_w);

  // Attention: x_mid = x_in + proj(attn(qkv(ln1(x_in)))).
  gemm.run(true, false, 1.0f, matrix(dres, n, h), matrix(floats(a.attn_out), n, h), 1.0f,
           grads_[id.proj_w], h, "cublasGemmEx (proj weight gradient)");
  detail::launch_add_column_sums(dres, n, h, grads_[id.proj_b], partials, s.stream);
  gemm.run(false, false, 1.0f, again(matrix(dres, n, h)), matrix(values_[id.proj_w], h, h), 0.0f,
           floats(s.dx), h, "cublasGemmEx (proj input gradient)");
  ready(id.proj_b);
  ready(id.proj_w);
  attention_backward(l);  // s.dx -> the qkv rows' gradient in s.rows3
  detail::launch_add_column_sums(floats(s.rows3), n, 3 * h, grads_[id.qkv_b], partials, s.stream);
  gemm.run(true, false, 1.0f, matrix(floats(s.rows3), n, 3 * h), matrix(floats(a.ln1_out), n, h),
           1.0f, grads_[id.qkv_w], h, "cublasGemmEx (qkv weight gradient)");
  gemm.run(false, false, 1.0f, again(matrix(floats(s.rows3), n, 3 * h)),
           matrix(values_[id.qkv_w], 3 * h, h), 0.0f, floats(s.dln), h,
           "cublasGemmEx (qkv input gradient)");
  ready(id.qkv_b);
  ready(id.qkv_w);
  detail::launch_layer_norm_backward(floats(s.dln), floats(a.x_in), floats(a.ln1_mean),
                                     floats(a.ln1_rstd), values_[id.ln1_w], n, config_.hidden, dres,
                                     true, grads_[id.ln1_w], grads_[id.ln1_b], partials, s.stream);
  ready(id.ln1_b);
  ready(id.ln1_w);
}

// From the attention output's gradient (s.dx, rows) to the qkv rows' gradient (s.rows3):
// dv = p^T dy, dp = dy v^T, ds = softmax'(dp), dq = ds k, dk = ds^T q, and the inverse rotation
// on dq and dk.
void GptModelCuda::attention_backward(int l) {
  State& s = *state_;
  detail::GptLayerActivations& a = s.layers[static_cast<std::size_t>(l)];
  const int heads = config_.num_heads, hd = config_.head_dim(), seq = s.seq;
  const std::int64_t h = config_.hidden, nh = s.n * h, count = std::int64_t{s.batch} * heads;
  const float* q = floats(a.qkv_heads);
  const float* k = q + nh;
  const float* v = k + nh;
  float* dq = floats(s.dqkv_heads);
  float* dk = dq + nh;
  float* dv = dk + nh;
  float* dy = floats(s.heads);
  float* dp = floats(s.dprobs);
  const auto batch = static_cast<int>(count);
  const std::int64_t ss = std::int64_t{seq} * seq, sd = std::int64_t{seq} * hd;
  detail::launch_rows_to_heads(floats(s.dx), h, 0, s.batch, seq, heads, hd, {}, dy, s.stream);
  s.gemm->run(true, false, 1.0f, batch_of(floats(a.probs), seq, seq), batch_of(dy, seq, hd), 0.0f,
              dv, hd, "cublasGemmStridedBatchedEx (values gradient)", batch, sd);
  s.gemm->run(false, true, 1.0f, batch_of(dy, seq, hd), batch_of(v, seq, hd), 0.0f, dp, seq,
              "cublasGemmStridedBatchedEx (probs gradient)", batch, ss);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  detail::launch_causal_softmax_backward(floats(a.probs), dp, count, seq, scale, s.stream);
  s.gemm->run(false, false, 1.0f, batch_of(dp, seq, seq), batch_of(k, seq, hd), 0.0f, dq, hd,
              "cublasGemmStridedBatchedEx (queries gradient)", batch, sd);
  s.gemm->run(true, false, 1.0f, again(batch_of(dp, seq, seq)), batch_of(q, seq, hd), 0.0f, dk, hd,
              "cublasGemmStridedBatchedEx (keys gradient)", batch, sd);
  const detail::RopeTables inverse{config_.rope ? floats(s.rope_cos) : nullptr, floats(s.rope_sin),
                                   -1.0f};
  const std::int64_t stride = 3 * h;
  detail::launch_heads_to_rows(dq, s.batch, seq, heads, hd, inverse, floats(s.rows3), stride, 0,
                               s.stream);
  detail::launch_heads_to_rows(dk, s.batch, seq, heads, hd, inverse, floats(s.rows3), stride, h,
                               s.stream);
  detail::launch_heads_to_rows(dv, s.batch, seq, heads, hd, {}, floats(s.rows3), stride, 2 * h,
                               s.stream);
}

void GptModelCuda::embed_backward(const std::function<void(ParamId)>& grad_ready) {
  State& s = *state_;
  if (s.ids.has_wpe) {
    detail::launch_position_backward(floats(s.dres), s.batch, s.seq, config_.hidden,
                                     grads_[s.ids.wpe], s.stream);
    if (grad_ready) grad_ready(s.ids.wpe);
  }
  detail::launch_embedding_backward(s.tokens_d.as<std::int32_t>(), floats(s.dres), s.n,
                                    config_.hidden, grads_[s.ids.wte], s.stream);
  if (grad_ready) grad_ready(s.ids.wte);
}

}  // namespace shardwise::cuda
