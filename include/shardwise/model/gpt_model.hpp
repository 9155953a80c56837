// Reference GPT decoder on the CPU: token embedding tied with the output head, learned or rotary
// positions, pre-LayerNorm blocks (causal multi-head attention with a fused QKV weight, GELU MLP),
// final LayerNorm, cross-entropy loss. Forward and backward are written here; GEMMs go through
// BLAS.
//
// The model does not own its parameters: bind() hands it one value and one gradient pointer per
// parameter (views into the DDP buckets), so there is no copy between the model and the
// distributed runtime. Backward accumulates into the gradient views and reports each parameter
// the moment its gradient is final, so the caller can start reducing that bucket while backward
// continues.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "shardwise/layout/param_info.hpp"
#include "shardwise/model/gpt_config.hpp"
#include "shardwise/model/tensor_parallel.hpp"

namespace shardwise {

// The reference GPT's parameters in forward order at TP size tp_size: at tp_size 1 the whole
// model; above, this TP rank's shards (the same for every rank: shapes do not depend on the
// rank), with tp_partition_dim / tp_stride / tp_duplicate filled in. Validates the config.
ParamList gpt_param_list(const GptConfig& config, int tp_size = 1);

// Scalar is float for training and double for the finite-difference gradient check.
template <typename Scalar>
class GptModel {
 public:
  explicit GptModel(const GptConfig& config);
  // Tensor-parallel model: this rank's shard of every layer (see docs/tensor_parallel.md). Every
  // TP rank of tp.group must call forward/backward (and exact_match/probabilities) together with
  // the same tokens. With tp.group null or of size 1 this is GptModel(config). Throws ConfigError
  // when the config does not split at this TP size (validate_tensor_parallel), InvalidArgument
  // for a TP group with Scalar other than float.
  GptModel(const GptConfig& config, const TensorParallelOptions& tp);
  ~GptModel();
  GptModel(const GptModel&) = delete;
  GptModel& operator=(const GptModel&) = delete;

  const GptConfig& config() const { return config_; }
  const TensorParallelOptions& tensor_parallel() const { return tp_; }
  // Parameters in forward order; ids index this list.
  const ParamList& params() const { return params_; }

  // Value and gradient storage of every parameter (params().size() entries each, numel()
  // elements behind each pointer).
  void bind(std::vector<Scalar*> values, std::vector<Scalar*> grads);

  // Deterministic initialisation from a seed: each parameter draws from its own stream derived
  // from (seed, param name), so the values do not depend on layout, rank or world size.
  void init_parameters(std::uint64_t seed);

  // Called with a param id right before forward first reads that parameter (the hook DDP uses
  // to wait for that bucket group's all-gather).
  void set_before_param_use(std::function<void(ParamId)> hook);

  // tokens/targets: batch x seq row-major, seq <= config.seq_len; a target < 0 is ignored.
  // Returns the mean cross-entropy over counted targets and keeps activations for backward.
  // With tensor parallelism every TP rank passes the whole batch; with sequence parallelism
  // batch * seq must be divisible by the TP size.
  double forward(const std::int32_t* tokens, const std::int32_t* targets, int batch, int seq);

  // Accumulates d(loss_scale * loss)/d(param) into the bound gradients; calls grad_ready(id)
  // as soon as a parameter's gradient is final for this backward.
  void backward(double loss_scale, const std::function<void(ParamId)>& grad_ready);

  // After forward: per sequence, whether every counted target is the argmax prediction (with
  // teacher forcing this equals greedy-decoding exact match).
  std::vector<bool> exact_match() const;

  // After forward: the model's next-token distribution (softmax of the logits, vocab_size
  // values) at position t of sequence b. Valid until the next forward (and, with tensor
  // parallelism, where it is a collective over the TP group, until the next call).
  std::span<const Scalar> probabilities(int b, int t) const;

 private:
  struct Activations;
  void register_params();
  std::vector<Scalar> full_initial_value(const ParamInfo& full, std::uint64_t seed) const;
  const Scalar* use(ParamId id);
  // Forward and backward pieces; x / dres hold this rank's rows (all of them without SP).
  void embed_forward(std::vector<Scalar>& x);
  void block_forward(int layer, std::vector<Scalar>& out);
  void block_backward(int layer, std::vector<Scalar>& dres,
                      const std::function<void(ParamId)>& grad_ready);
  void embed_backward(std::vector<Scalar>& dres, const std::function<void(ParamId)>& grad_ready);
  // Where backward accumulates a parameter's gradient, and its hand-over once final (replicated
  // params under SP go through a scratch buffer all-reduced over the TP group).
  Scalar* grad_target(ParamId id);
  void grad_done(ParamId id, const std::function<void(ParamId)>& grad_ready);

  GptConfig config_;
  TensorParallelOptions tp_;
  ParamList params_;
  std::vector<Scalar*> values_;
  std::vector<Scalar*> grads_;
  std::function<void(ParamId)> before_use_;
  std::unique_ptr<Activations> acts_;
};

extern template class GptModel<float>;
extern template class GptModel<double>;

}  // namespace shardwise
