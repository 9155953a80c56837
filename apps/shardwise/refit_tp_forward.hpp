// `shardwise refit`'s end-to-end check of the inference side: the inference ranks run a TP forward
// of the weights a refit delivered (bf16, or MXFP8 dequantized to bf16) on a fixed held-out batch
// and compare it with the training model's forward (the full fp32 weights, tp = 1) on the same
// batch. Compared: the normalised logits (log-softmax, what the logits mean up to the per-position
// shift softmax ignores) and the loss. Each difference is checked against a first-order bound
// built from the actual weight perturbation (docs/tensor_parallel_training.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/model/gpt_config.hpp"
#include "shardwise/reshard/refit.hpp"

namespace shardwise::cli {

// A held-out batch: `batch` sequences of `seq` tokens and their targets (-1: not counted).
struct HeldOutBatch {
  int batch = 0, seq = 0;
  std::vector<std::int32_t> tokens, targets;
};

struct TpForwardReport {
  double max_abs_logit_error = 0;  // max |log p_tp - log p_ref| over positions and vocabulary
  double max_rel_logit_error = 0;  // that over max |log p_ref|
  double loss = 0, reference_loss = 0;
  double loss_difference = 0;    // loss - reference_loss
  double loss_bound = 0;         // what |loss_difference| must stay within
  double worst_logit_ratio = 0;  // max over outputs of |error| / its bound (<= 1 passes)
  bool within_bounds() const {
    return worst_logit_ratio <= 1.0 && std::abs(loss_difference) <= loss_bound;
  }
};

// Collective over `inference_group` (the refit's TP ranks, in TP-rank order). `weights`: this
// rank's refitted tensors; `reference`: every param's full fp32 value (the training weights).
// Throws FormatError when a delivered tensor is not its reference rounded to bf16 or MXFP8 (an
// export cut from another checkpoint) or names no param of the model.
TpForwardReport check_tp_forward(const std::vector<InferenceTensor>& weights,
                                 const std::map<std::string, std::vector<float>>& reference,
                                 const GptConfig& config, const HeldOutBatch& batch,
                                 ProcessGroup& inference_group);

// TP rank `tp_rank`'s tensors of a `shardwise reshard --tp N` export (DIR/tp-rank-RR-of-NN
// .safetensors) as the inference path holds them: plain tensors rounded to bf16, MXFP8 data and
// scales as written. Throws FormatError naming the file when it is not such an export of size tp.
std::vector<InferenceTensor> read_tp_export_rank(const std::filesystem::path& dir, int tp,
                                                 int tp_rank);

}  // namespace shardwise::cli
