// Where each of the reference GPT's parameters sits in gpt_param_list's order: the ids both the
// CPU model and the device model (cuda::GptModelCuda) index their values and gradients by.
#pragma once

#include <vector>

#include "shardwise/layout/param_info.hpp"
#include "shardwise/model/gpt_config.hpp"

namespace shardwise {

struct GptBlockParamIds {
  ParamId ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
};

struct GptParamIds {
  std::vector<GptBlockParamIds> blocks;  // one per layer
  ParamId wte = 0, wpe = 0, lnf_w = 0, lnf_b = 0;
  ParamId head = 0;       // == wte when the embeddings are tied
  bool has_wpe = false;   // learned positions (not RoPE)
  std::size_t count = 0;  // how many parameters the list holds
};

// The ids of gpt_param_list(config, tp) (the order does not depend on the TP size).
GptParamIds gpt_param_ids(const GptConfig& config);

}  // namespace shardwise
