// Layout data (Megatron-Core's param_layout): which buffer each parameter lives in, where, and in
// which bucket. Computed by the optimizer's layout algorithm, consumed by DDP. Plain data: params
// are ParamIds.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/core/dtype.hpp"
#include "shardwise/layout/param_info.hpp"

namespace shardwise {

// Identifies one contiguous buffer. Params with equal keys share a buffer.
struct BufferKey {
  DType param_dtype = DType::kFloat32;  // storage dtype; uint8 for fp8-stored params
  DType grad_dtype = DType::kFloat32;   // gradient reduction dtype
  bool is_expert_parallel = false;      // reduced over the expert-data-parallel group
  bool is_layer_wise = false;           // shard-aligned buffer managed by the layer-wise optimizer

  auto operator<=>(const BufferKey&) const = default;
  std::string to_string() const;
};

// Where one parameter sits in its buffer: [start, end) elements, in bucket `bucket`.
struct ParamRange {
  ParamId param = 0;
  std::int64_t start = 0;
  std::int64_t end = 0;
  int bucket = 0;

  std::int64_t numel() const { return end - start; }
  bool operator==(const ParamRange&) const = default;
};

struct BucketRange {
  std::int64_t start = 0;
  std::int64_t end = 0;

  std::int64_t numel() const { return end - start; }
  bool operator==(const BucketRange&) const = default;
};

struct PerBufferParamLayout {
  // One entry per param of the buffer, in backprop order (the order DDP sees grads become ready).
  std::vector<ParamRange> param_index_map;
  std::vector<BucketRange> bucket_indices;
  std::vector<std::int64_t> per_bucket_numel_unpadded;
  // Index of each param among params of the same dtype (parallel to param_index_map).
  std::vector<std::int64_t> param_indices;
  // Number of data-parallel shards each bucket is split into (dp, or expert-dp for expert
  // buffers). Every bucket's numel is divisible by it.
  int num_shards = 1;
  // True when no param crosses a shard boundary (layer-wise layout): then every param has an
  // owning shard. False for element-sharded layouts.
  bool shard_aligned = false;

  std::int64_t numel() const { return bucket_indices.empty() ? 0 : bucket_indices.back().end; }
  std::int64_t numel_unpadded() const;
  // Entry for a param, or nullptr when the param is not in this buffer.
  const ParamRange* find(ParamId param) const;
  // Size of one shard of bucket b: bucket numel / num_shards.
  std::int64_t shard_size(int bucket) const;
  // Owning shard of a param in a shard-aligned layout: (start - bucket_start) / shard_size.
  // Throws InvariantError if the param straddles a shard boundary.
  int owner_shard(const ParamRange& range) const;

  bool operator==(const PerBufferParamLayout&) const = default;
};

// One PerBufferParamLayout per BufferKey (for one model chunk).
struct FullParamLayout {
  std::map<BufferKey, PerBufferParamLayout> layouts;

  // Buffer key and entry of a param; nullopt when it is in no buffer.
  std::optional<std::pair<BufferKey, ParamRange>> find(ParamId param) const;
  bool operator==(const FullParamLayout&) const = default;
};

}  // namespace shardwise
