// The reference GPT (model/gpt_model.hpp) on a CUDA device: the same parameter list (names,
// shapes, order: gpt_param_list), the same initial values, the same forward and backward math,
// with the products on cuBLAS (GemmPrecision: fp32, TF32, or bf16 inputs with fp32 accumulation)
// and everything else in kernels (src/cuda/gpt_*_kernels.cu). Parameters and gradients are fp32
// device memory the caller owns and binds (views into device DDP buffers), so a checkpoint of
// either model loads into the other.
//
// Every call queues its work on one CUDA stream (GptCudaOptions::stream; null: the legacy
// default stream). forward() returns once the loss is on the host; backward() returns with its
// work queued, and grad_ready(id) is called, in the CPU model's order, once everything that
// writes that gradient has been queued: work queued after it on the same stream (or ordered
// after it with an event) sees the final gradient. Tensor parallelism is not supported.
// No CUDA headers here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "shardwise/cuda/gemm_precision.hpp"
#include "shardwise/layout/param_info.hpp"
#include "shardwise/model/gpt_config.hpp"

namespace shardwise::cuda {

struct GptCudaOptions {
  GemmPrecision precision = GemmPrecision::kFp32;
  // Only 1: the device model has no tensor parallelism (a larger value is a ConfigError).
  int tensor_parallel_size = 1;
  void* stream = nullptr;  // cudaStream_t
};

class GptModelCuda {
 public:
  // Validates the config (as gpt_param_list) and the options before touching the device; throws
  // ConfigError for tensor_parallel_size != 1 and CudaError when there is no usable GPU.
  explicit GptModelCuda(const GptConfig& config, const GptCudaOptions& options = {});
  ~GptModelCuda();
  GptModelCuda(const GptModelCuda&) = delete;
  GptModelCuda& operator=(const GptModelCuda&) = delete;

  const GptConfig& config() const { return config_; }
  const GptCudaOptions& options() const { return options_; }
  // gpt_param_list(config): ids index this list.
  const ParamList& params() const { return params_; }

  // Device storage of every parameter's value and gradient (fp32, numel() elements each).
  // Throws InvalidArgument naming the parameter for a null or host pointer.
  void bind(std::vector<float*> values, std::vector<float*> grads);

  // The CPU model's initial values (computed on the host with GptModel<float>, then copied).
  void init_parameters(std::uint64_t seed);

  // Called with a param id right before forward first reads that parameter.
  void set_before_param_use(std::function<void(ParamId)> hook);

  // tokens / targets: host arrays, batch x seq row-major, seq <= config.seq_len; a target < 0 is
  // ignored. Returns the mean cross-entropy over counted targets; keeps activations for backward.
  double forward(const std::int32_t* tokens, const std::int32_t* targets, int batch, int seq);

  // Accumulates d(loss_scale * loss)/d(param) into the bound gradients; calls grad_ready(id) as
  // each parameter's gradient is final (see above). Needs a forward before each call.
  void backward(double loss_scale, const std::function<void(ParamId)>& grad_ready);

  // After forward: per sequence, whether every counted target is the argmax prediction (the
  // lowest index among equal largest logits).
  std::vector<bool> exact_match() const;

 private:
  struct State;
  const float* use(ParamId id);
  void reserve_activations(int batch, int seq);
  void embed_forward(float* x);
  void block_forward(int layer, float* out);
  void block_backward(int layer, const std::function<void(ParamId)>& grad_ready);
  void attention_forward(int layer);
  void attention_backward(int layer);
  void embed_backward(const std::function<void(ParamId)>& grad_ready);

  GptConfig config_;
  GptCudaOptions options_;
  ParamList params_;
  std::vector<float*> values_, grads_;
  std::function<void(ParamId)> before_use_;
  std::unique_ptr<State> state_;
};

// Model FLOPs per trained token, as bench/train_throughput.cpp counts them (PaLM's count): 6 per
// matmul weight (the LM head included) plus 12 * layers * seq * hidden for the attention scores
// and weighted values over the full seq x seq square.
double gpt_model_flops_per_token(const GptConfig& config, int seq);

}  // namespace shardwise::cuda
