// What GptModelCuda keeps between calls (private to shardwise_cuda): parameter ids, per-layer
// activations for backward, scratch, the cuBLAS products and the rotary tables. Every buffer only
// grows, so once the shapes repeat a step allocates nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "device_gemm.hpp"
#include "shardwise/cuda/device_buffer.hpp"
#include "shardwise/cuda/gpt_model_cuda.hpp"
#include "shardwise/model/gpt_param_ids.hpp"

namespace shardwise::cuda::detail {

// One block's forward values that backward reads. qkv_heads: q, k (both rotated with RoPE) and v
// one after the other, each [batch, heads, seq, head_dim]; probs: [batch, heads, seq, seq].
struct GptLayerActivations {
  DeviceBuffer x_in, ln1_out, ln1_mean, ln1_rstd, qkv_heads, probs, attn_out, x_mid, ln2_out,
      ln2_mean, ln2_rstd, fc1_out, gelu_out;
};

inline float* floats(const DeviceBuffer& b) { return b.as<float>(); }

}  // namespace shardwise::cuda::detail

namespace shardwise::cuda {

struct GptModelCuda::State {
  cudaStream_t stream = nullptr;
  std::unique_ptr<detail::DeviceGemm> gemm;
  GptParamIds ids;  // where each parameter sits in params()
  // The last forward's shapes and targets.
  int batch = 0, seq = 0;
  std::int64_t n = 0, counted = 0;
  bool forward_done = false;  // cleared by backward (which overwrites the softmax)
  std::vector<std::int32_t> targets;
  // cos / sin of every (position < config.seq_len, dimension pair), fp32 as the CPU model rounds.
  DeviceBuffer rope_cos, rope_sin;
  std::vector<detail::GptLayerActivations> layers;
  DeviceBuffer tokens_d, targets_d, x_final, lnf_out, lnf_mean, lnf_rstd, logits, row_loss, argmax;
  // Scratch. rows3: the qkv rows [n, 3h] (forward) or their gradient (backward); heads: the
  // attention output (forward) or its gradient (backward) in head layout; branch: a residual
  // branch's output; dres: the residual stream's gradient; dx, dln: [n, h] gradients; dffn:
  // [n, ffn]; dqkv_heads: dq, dk, dv in head layout; dprobs: the scores' gradient.
  DeviceBuffer rows3, heads, branch, dres, dx, dln, dffn, dqkv_heads, dprobs, partials;
};

}  // namespace shardwise::cuda
