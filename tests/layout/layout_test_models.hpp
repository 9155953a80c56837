// Test helpers for the layout tests: model builders and an independent checker of shard-aligned
// layouts (written from the rules, sharing no code with the library's validate_layout).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "shardwise/core/error.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/param_info.hpp"
#include "shardwise/layout/param_layout.hpp"

namespace shardwise::layout_test {

inline ParamInfo matrix(std::string name, std::int64_t rows, std::int64_t cols) {
  ParamInfo p;
  p.name = std::move(name);
  p.shape = {rows, cols};
  return p;
}

inline ParamInfo vec(std::string name, std::int64_t n) {
  ParamInfo p;
  p.name = std::move(name);
  p.shape = {n};
  return p;
}

// Layout input for one buffer holding every param of `params`, split over dp ranks.
inline BufferLayoutInput whole_model(const ParamList& params, int dp,
                                     std::optional<std::int64_t> bucket) {
  BufferLayoutInput input;
  input.params = &params;
  for (ParamId id = 0; id < params.size(); ++id) input.buffer_params.push_back(id);
  input.data_parallel_size = dp;
  input.bucket_size = bucket;
  return input;
}

inline std::int64_t shape_numel(const ParamInfo& p) {
  std::int64_t n = 1;
  for (auto d : p.shape) n *= d;
  return n;
}

struct GptShape {
  int layers = 12;
  std::int64_t hidden = 1024;
  std::int64_t ffn = 4096;
  std::int64_t kv_heads_dim = 0;  // 0 = plain MHA (qkv = 3h x h); else GQA: h + 2*kv rows
  bool swiglu = false;            // fc1 has 2*ffn rows
  bool norms = true;
  bool biases = false;
  std::int64_t vocab = 0;  // > 0: tied embedding first and last (shared_embedding)
};

// A GPT-like model in forward order.
inline ParamList gpt_model(const GptShape& s) {
  ParamList params;
  auto add_embedding = [&](const char* name) {
    ParamInfo e = matrix(name, s.vocab, s.hidden);
    e.shared_embedding = true;
    e.embedding_or_output = true;
    params.push_back(e);
  };
  if (s.vocab > 0) add_embedding("embedding.word_embeddings.weight");
  const std::int64_t h = s.hidden;
  const std::int64_t kv = s.kv_heads_dim > 0 ? s.kv_heads_dim : h;
  for (int l = 0; l < s.layers; ++l) {
    const std::string pre = str_cat("layers.", l, ".");
    if (s.norms) params.push_back(vec(pre + "input_layernorm.weight", h));
    ParamInfo qkv = matrix(pre + "self_attention.linear_qkv.weight", h + 2 * kv, h);
    qkv.qkv_split = {h, kv, kv};
    params.push_back(qkv);
    if (s.biases) params.push_back(vec(pre + "self_attention.linear_qkv.bias", h + 2 * kv));
    params.push_back(matrix(pre + "self_attention.linear_proj.weight", h, h));
    if (s.biases) params.push_back(vec(pre + "self_attention.linear_proj.bias", h));
    if (s.norms) params.push_back(vec(pre + "pre_mlp_layernorm.weight", h));
    params.push_back(matrix(pre + "mlp.linear_fc1.weight", (s.swiglu ? 2 : 1) * s.ffn, h));
    if (s.biases) params.push_back(vec(pre + "mlp.linear_fc1.bias", (s.swiglu ? 2 : 1) * s.ffn));
    params.push_back(matrix(pre + "mlp.linear_fc2.weight", h, s.ffn));
    if (s.biases) params.push_back(vec(pre + "mlp.linear_fc2.bias", h));
  }
  if (s.norms) params.push_back(vec("final_layernorm.weight", h));
  if (s.vocab > 0) add_embedding("output_layer.weight");
  return params;
}

// A DeepSeek-V3-sized MoE: 61 layers of MLA attention, 3 dense-MLP layers, 58 MoE layers of
// 256 routed experts (3 matrices each, expert-parallel) plus a shared expert and a router.
inline ParamList deepseek_v3_like() {
  ParamList params;
  const std::int64_t h = 7168;
  ParamInfo emb = matrix("embedding.word_embeddings.weight", 129280, h);
  emb.embedding_or_output = true;
  params.push_back(emb);
  for (int l = 0; l < 61; ++l) {
    const std::string pre = str_cat("layers.", l, ".");
    params.push_back(vec(pre + "input_layernorm.weight", h));
    params.push_back(matrix(pre + "attn.q_a.weight", 1536, h));
    params.push_back(vec(pre + "attn.q_a_norm.weight", 1536));
    params.push_back(matrix(pre + "attn.q_b.weight", 128 * 192, 1536));
    params.push_back(matrix(pre + "attn.kv_a.weight", 576, h));
    params.push_back(vec(pre + "attn.kv_a_norm.weight", 512));
    params.push_back(matrix(pre + "attn.kv_b.weight", 128 * 256, 512));
    params.push_back(matrix(pre + "attn.o.weight", h, 128 * 128));
    params.push_back(vec(pre + "post_attention_layernorm.weight", h));
    if (l < 3) {
      params.push_back(matrix(pre + "mlp.fc1.weight", 2 * 18432, h));
      params.push_back(matrix(pre + "mlp.fc2.weight", h, 18432));
      continue;
    }
    params.push_back(matrix(pre + "mlp.router.weight", 256, h));
    params.push_back(vec(pre + "mlp.router.bias", 256));
    params.push_back(matrix(pre + "mlp.shared_experts.fc1.weight", 2 * 2048, h));
    params.push_back(matrix(pre + "mlp.shared_experts.fc2.weight", h, 2048));
    for (int e = 0; e < 256; ++e) {
      const std::string ex = str_cat(pre, "mlp.experts.", e, ".");
      for (ParamInfo p : {matrix(ex + "gate.weight", 2048, h), matrix(ex + "up.weight", 2048, h),
                          matrix(ex + "down.weight", h, 2048)}) {
        p.expert_parallel = true;
        params.push_back(p);
      }
    }
  }
  params.push_back(vec("final_layernorm.weight", h));
  ParamInfo out = matrix("output_layer.weight", 129280, h);
  out.embedding_or_output = true;
  params.push_back(out);
  return params;
}

// Total padding of a buffer: its size minus the elements of its params.
inline std::int64_t padding_elements(const ParamList& params, const PerBufferParamLayout& layout) {
  std::int64_t content = 0;
  for (const auto& r : layout.param_index_map) content += shape_numel(params[r.param]);
  return layout.numel() - content;
}

// Checks a shard-aligned layout of the buffer `forward_ids` against the rules, recomputed here
// from scratch. Returns an empty string when every rule holds, else the first violation.
// `absorbed`: also check our bucket-cut rule (a param that fits into the previous bucket's shard
// padding never opens a new bucket), which Megatron's baseline does not follow.
inline std::string check_shard_aligned(const ParamList& params, const PerBufferParamLayout& layout,
                                       const std::vector<ParamId>& forward_ids, int dp,
                                       bool high_busbw, std::optional<std::int64_t> bucket_size,
                                       bool absorbed) {
  auto fail = [](auto... parts) {
    std::string s;
    ((s += parts), ...);
    return s;
  };
  auto str = [](std::int64_t v) { return std::to_string(v); };
  const std::int64_t end_div =
      std::lcm(std::lcm(std::int64_t{dp}, std::int64_t{128}), high_busbw ? 65536 : 1);
  const std::int64_t shard_div = std::lcm(std::int64_t{64}, end_div / dp);
  if (!layout.shard_aligned) return "not flagged shard-aligned";
  if (layout.num_shards != dp) return fail("num_shards ", str(layout.num_shards));
  const auto& map = layout.param_index_map;
  if (map.size() != forward_ids.size()) return "wrong param count";
  for (std::size_t i = 0; i < map.size(); ++i) {
    if (map[i].param != forward_ids[forward_ids.size() - 1 - i]) return "not in backprop order";
  }
  const std::size_t nb = layout.bucket_indices.size();
  if (layout.per_bucket_numel_unpadded.size() != nb) return "unpadded count size";
  for (std::size_t b = 0; b < nb; ++b) {
    const auto& bk = layout.bucket_indices[b];
    if (bk.start != (b == 0 ? 0 : layout.bucket_indices[b - 1].end)) return "bucket gap";
    if (bk.end % end_div != 0) return fail("bucket end ", str(bk.end), " % ", str(end_div));
    if (bk.numel() <= 0 || bk.numel() % dp != 0) return "bucket not split in equal shards";
    if ((bk.numel() / dp) % shard_div != 0) return "shard size not a multiple of divisor";
  }
  // Buckets as backprop ranges.
  std::vector<std::size_t> first(nb + 1, map.size());
  for (std::size_t i = 0; i < map.size(); ++i) {
    if (map[i].bucket < 0 || static_cast<std::size_t>(map[i].bucket) >= nb) return "bad bucket";
    if (i > 0 && map[i].bucket < map[i - 1].bucket) return "bucket id decreases";
    if (i > 0 && map[i].bucket > map[i - 1].bucket + 1) return "bucket skipped";
    if (i == 0 && map[i].bucket != 0) return "first bucket not 0";
    first[static_cast<std::size_t>(map[i].bucket)] =
        std::min(first[static_cast<std::size_t>(map[i].bucket)], i);
  }
  if (!map.empty() && static_cast<std::size_t>(map.back().bucket) != nb - 1) return "empty bucket";
  for (std::size_t b = 0; b < nb; ++b) {
    const auto& bk = layout.bucket_indices[b];
    const std::int64_t shard = bk.numel() / dp;
    std::vector<std::pair<std::int64_t, std::int64_t>> spans;
    std::vector<std::int64_t> used(static_cast<std::size_t>(dp), 0);
    std::int64_t content = 0;
    bool has_shared = false;
    for (std::size_t i = first[b]; i < first[b + 1]; ++i) {
      const ParamInfo& p = params[map[i].param];
      const std::int64_t n = shape_numel(p);
      if (map[i].end - map[i].start != n) return fail(p.name, " wrong size");
      if (map[i].start % 64 != 0) return fail(p.name, " start not 64-aligned");
      if (map[i].start < bk.start || map[i].end > bk.end) return fail(p.name, " outside bucket");
      const std::int64_t s0 = (map[i].start - bk.start) / shard;
      const std::int64_t s1 = n > 0 ? (map[i].end - 1 - bk.start) / shard : s0;
      if (s0 != s1) return fail(p.name, " crosses a shard boundary");
      const std::int64_t slot = std::max<std::int64_t>(64, (n + 63) / 64 * 64);
      const std::int64_t off = map[i].start - bk.start - s0 * shard;
      if (off + slot > shard) return fail(p.name, " overruns its shard");
      used[static_cast<std::size_t>(s0)] = std::max(used[static_cast<std::size_t>(s0)], off + slot);
      spans.emplace_back(map[i].start, map[i].start + slot);
      content += n;
      has_shared = has_shared || p.shared_embedding;
    }
    std::sort(spans.begin(), spans.end());
    for (std::size_t k = 1; k < spans.size(); ++k) {
      if (spans[k - 1].second > spans[k].first) return fail("overlap in bucket ", str(b));
    }
    if (has_shared && first[b + 1] - first[b] != 1) return "shared embedding not alone";
    if (layout.per_bucket_numel_unpadded[b] != content) return "unpadded != content";
    // bucket_size is a soft minimum: a bucket may only be smaller before a shared embedding or
    // at the end of the buffer.
    if (b + 1 == nb || has_shared) continue;
    const ParamInfo& next = params[map[first[b + 1]].param];
    if (next.shared_embedding) continue;
    if (!bucket_size) return "more than one bucket per region without bucket_size";
    if (content < *bucket_size) return fail("bucket ", str(b), " below bucket_size");
    if (!absorbed) continue;
    const std::int64_t need = std::max<std::int64_t>(64, (shape_numel(next) + 63) / 64 * 64);
    for (int s = 0; s < dp; ++s) {
      if (used[static_cast<std::size_t>(s)] + need <= shard) {
        return fail(next.name, " would have fitted into shard ", str(s), " of bucket ", str(b));
      }
    }
  }
  return "";
}

// Layer-wise layout options at dp with the default bucket size, as Megatron sets them.
inline LayoutOptions megatron_options(int dp) {
  LayoutOptions options;
  options.algorithm = LayoutAlgorithm::kLayerWise;
  options.data_parallel_size = dp;
  options.bucket_size = default_bucket_size(dp);
  return options;
}

}  // namespace shardwise::layout_test
