// Invariant checks of layouts. Every violation throws InvariantError naming the buffer, bucket
// and param concerned.
#include <algorithm>
#include <vector>

#include "shardwise/core/error.hpp"
#include "shardwise/layout/buffer_grouping.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/padding.hpp"
#include "shardwise/layout/shard_packing.hpp"

namespace shardwise {

namespace {

enum class LayoutKind { kDefault, kDistOpt, kShardAligned };

LayoutKind kind_of(const BufferKey& key, const LayoutOptions& options) {
  if (options.algorithm == LayoutAlgorithm::kDefault) return LayoutKind::kDefault;
  if (options.algorithm == LayoutAlgorithm::kLayerWise && key.is_layer_wise) {
    return LayoutKind::kShardAligned;
  }
  return LayoutKind::kDistOpt;
}

// Shard-aligned rules: equal shards of a multiple of the shard divisor, no param crossing a
// shard boundary, bucket_size honoured as a minimum except before a shared embedding or the end.
void validate_shard_aligned(const ParamList& params, const PerBufferParamLayout& layout,
                            const std::vector<std::vector<std::size_t>>& members,
                            const std::vector<bool>& shared_bucket, const std::string& where,
                            const LayoutOptions& options, int dp, bool high_busbw) {
  const std::int64_t divisor = layer_wise_shard_divisor(dp, high_busbw);
  const std::size_t num_buckets = layout.bucket_indices.size();
  for (std::size_t b = 0; b < num_buckets; ++b) {
    const BucketRange& bucket = layout.bucket_indices[b];
    SW_CHECK(bucket.numel() > 0 && bucket.numel() % dp == 0, where, ": bucket ", b, " numel ",
             bucket.numel(), " is not a positive multiple of ", dp, " shards");
    const std::int64_t shard = bucket.numel() / dp;
    SW_CHECK(shard % divisor == 0, where, ": bucket ", b, " shard size ", shard,
             " is not a multiple of the shard divisor ", divisor);
    std::int64_t content = 0;
    for (std::size_t i : members[b]) {
      const ParamRange& r = layout.param_index_map[i];
      const std::int64_t first = (r.start - bucket.start) / shard;
      const std::int64_t last = r.numel() > 0 ? (r.end - 1 - bucket.start) / shard : first;
      SW_CHECK(first == last, where, ": param ", params[r.param].name, " [", r.start, ", ", r.end,
               ") crosses the boundary of shards ", first, " and ", last, " in bucket ", b);
      const std::int64_t occupied =
          r.start - bucket.start - first * shard + param_units(r.numel()) * kParamStartAlignment;
      SW_CHECK(occupied <= shard, where, ": param ", params[r.param].name,
               " overruns its shard in bucket ", b);
      content += r.numel();
    }
    SW_CHECK(layout.per_bucket_numel_unpadded[b] == content, where, ": bucket ", b,
             " per_bucket_numel_unpadded ", layout.per_bucket_numel_unpadded[b],
             " != its params' numel ", content);
    const bool next_in_region = b + 1 < num_buckets && !shared_bucket[b] && !shared_bucket[b + 1];
    SW_CHECK(!next_in_region || (options.bucket_size && content >= *options.bucket_size), where,
             ": bucket ", b, " holds ", content, " elements, below bucket_size, yet is not the ",
             "last bucket before a shared embedding or the buffer end");
  }
}

// What every check of one buffer needs.
struct BufferCheck {
  const ParamList& params;
  const PerBufferParamLayout& layout;
  LayoutKind kind;
  int dp;
  std::string where;  // "buffer <key>", the prefix of every message
};

// The buffer's own fields agree with each other and with the layout algorithm.
void check_buffer_fields(const BufferCheck& c) {
  const PerBufferParamLayout& layout = c.layout;
  const std::string& where = c.where;
  // A plain DDP buffer is all-reduced whole (one shard); the others are split across the dp ranks.
  const int expected_shards = c.kind == LayoutKind::kDefault ? 1 : c.dp;
  SW_CHECK(layout.num_shards == expected_shards, where, ": num_shards ", layout.num_shards,
           " != ", expected_shards);
  SW_CHECK(layout.shard_aligned == (c.kind == LayoutKind::kShardAligned), where,
           ": shard_aligned flag does not match the layout algorithm");
  SW_CHECK(layout.param_indices.size() == layout.param_index_map.size(), where, ": ",
           layout.param_indices.size(), " param_indices for ", layout.param_index_map.size(),
           " params");
  const std::size_t num_buckets = layout.bucket_indices.size();
  SW_CHECK(layout.per_bucket_numel_unpadded.size() == num_buckets, where, ": ",
           layout.per_bucket_numel_unpadded.size(), " unpadded counts for ", num_buckets,
           " buckets");
  SW_CHECK(num_buckets > 0 || layout.param_index_map.empty(), where, ": params but no buckets");
}

// Buckets tile the buffer from 0; with a distributed optimizer each ends on the end divisor.
void check_bucket_ranges(const BufferCheck& c, bool high_busbw) {
  const std::int64_t end_divisor = bucket_end_divisor(c.dp, high_busbw);
  const auto& buckets = c.layout.bucket_indices;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const BucketRange& bucket = buckets[b];
    const std::int64_t expected_start = b == 0 ? 0 : buckets[b - 1].end;
    SW_CHECK(bucket.start == expected_start && bucket.end >= bucket.start, c.where, ": bucket ", b,
             " [", bucket.start, ", ", bucket.end, ") does not continue at ", expected_start);
    if (c.kind != LayoutKind::kDefault) {
      SW_CHECK(bucket.end % end_divisor == 0, c.where, ": bucket ", b, " end ", bucket.end,
               " is not divisible by ", end_divisor);
    }
  }
}

// Params: backprop order, exact sizes, inside their bucket, aligned, bucket ids non-decreasing.
// Returns the entries of param_index_map in each bucket.
std::vector<std::vector<std::size_t>> check_param_ranges(const BufferCheck& c) {
  const PerBufferParamLayout& layout = c.layout;
  const std::string& where = c.where;
  const std::size_t num_buckets = layout.bucket_indices.size();
  std::vector<std::vector<std::size_t>> members(num_buckets);
  for (std::size_t i = 0; i < layout.param_index_map.size(); ++i) {
    const ParamRange& r = layout.param_index_map[i];
    SW_CHECK(r.param < c.params.size(), where, ": param id ", r.param, " out of range");
    const ParamInfo& p = c.params[r.param];
    SW_CHECK(i == 0 || layout.param_index_map[i - 1].param > r.param, where, ": param ", p.name,
             " is out of backprop order");
    SW_CHECK(r.numel() == p.numel() && r.start >= 0, where, ": param ", p.name, " range [", r.start,
             ", ", r.end, ") does not hold its ", p.numel(), " elements");
    SW_CHECK(r.bucket >= 0 && static_cast<std::size_t>(r.bucket) < num_buckets, where, ": param ",
             p.name, " in unknown bucket ", r.bucket);
    SW_CHECK(i == 0 || layout.param_index_map[i - 1].bucket <= r.bucket, where, ": param ", p.name,
             " goes back to an earlier bucket ", r.bucket);
    const BucketRange& bucket = layout.bucket_indices[static_cast<std::size_t>(r.bucket)];
    SW_CHECK(r.start >= bucket.start && r.end <= bucket.end, where, ": param ", p.name,
             " lies outside bucket ", r.bucket);
    if (c.kind != LayoutKind::kDefault) {
      SW_CHECK(r.start % kParamStartAlignment == 0, where, ": param ", p.name, " start ", r.start,
               " is not ", kParamStartAlignment, "-aligned");
    }
    members[static_cast<std::size_t>(r.bucket)].push_back(i);
  }
  return members;
}

void check_no_overlap(const BufferCheck& c) {
  std::vector<ParamRange> by_start = c.layout.param_index_map;
  std::sort(by_start.begin(), by_start.end(),
            [](const ParamRange& x, const ParamRange& y) { return x.start < y.start; });
  for (std::size_t i = 1; i < by_start.size(); ++i) {
    SW_CHECK(by_start[i - 1].end <= by_start[i].start || by_start[i - 1].numel() == 0, c.where,
             ": params ", c.params[by_start[i - 1].param].name, " and ",
             c.params[by_start[i].param].name, " overlap");
  }
}

// No empty bucket, a shared embedding alone in its bucket (distributed optimizers), and
// per-bucket unpadded counts that fit the algorithm. Returns which buckets hold a shared
// embedding.
std::vector<bool> check_bucket_contents(const BufferCheck& c,
                                        const std::vector<std::vector<std::size_t>>& members) {
  const PerBufferParamLayout& layout = c.layout;
  const std::string& where = c.where;
  std::vector<bool> shared_bucket(members.size(), false);
  for (std::size_t b = 0; b < members.size(); ++b) {
    SW_CHECK(!members[b].empty(), where, ": bucket ", b, " holds no param");
    const BucketRange& bucket = layout.bucket_indices[b];
    std::int64_t last_end = bucket.start;
    for (std::size_t i : members[b]) {
      const ParamRange& r = layout.param_index_map[i];
      last_end = std::max(last_end, r.end);
      if (c.kind != LayoutKind::kDefault && c.params[r.param].shared_embedding) {
        SW_CHECK(members[b].size() == 1, where, ": shared embedding ", c.params[r.param].name,
                 " shares bucket ", b, " with other params");
        shared_bucket[b] = true;
      }
    }
    const std::int64_t unpadded = layout.per_bucket_numel_unpadded[b];
    if (c.kind == LayoutKind::kDefault) {
      SW_CHECK(unpadded == bucket.numel(), where, ": bucket ", b, " unpadded ", unpadded,
               " != numel ", bucket.numel());
    } else if (c.kind == LayoutKind::kDistOpt) {
      SW_CHECK(unpadded >= last_end - bucket.start && unpadded <= bucket.numel(), where,
               ": bucket ", b, " unpadded ", unpadded, " outside [", last_end - bucket.start, ", ",
               bucket.numel(), "]");
    }
  }
  return shared_bucket;
}

}  // namespace

void validate_layout(const ParamList& params, const PerBufferParamLayout& layout,
                     const BufferKey& key, const LayoutOptions& options) {
  const int group_dp = key.is_expert_parallel ? options.expert_dp() : options.data_parallel_size;
  // Shard-aligned buffers are checked per shard group: S (or gcd(S, expert dp)) shards.
  const int dp =
      options.num_shards_for(kind_of(key, options) == LayoutKind::kShardAligned, group_dp);
  const bool high_busbw = options.pad_buckets_for_high_nccl_busbw;
  const BufferCheck check{params, layout, kind_of(key, options), dp,
                          str_cat("buffer ", key.to_string())};
  check_buffer_fields(check);
  check_bucket_ranges(check, high_busbw);
  const auto members = check_param_ranges(check);
  check_no_overlap(check);
  const std::vector<bool> shared_bucket = check_bucket_contents(check, members);
  if (check.kind == LayoutKind::kShardAligned) {
    validate_shard_aligned(params, layout, members, shared_bucket, check.where, options, dp,
                           high_busbw);
  }
}

void validate_layer_wise_bucket_cuts(const ParamList& params, const PerBufferParamLayout& layout) {
  SW_CHECK(layout.shard_aligned, "bucket cuts: layout is not shard-aligned");
  const std::size_t num_buckets = layout.bucket_indices.size();
  std::vector<std::size_t> first_of_bucket(num_buckets, layout.param_index_map.size());
  std::vector<bool> shared_bucket(num_buckets, false);
  for (std::size_t i = 0; i < layout.param_index_map.size(); ++i) {
    const ParamRange& r = layout.param_index_map[i];
    const auto b = static_cast<std::size_t>(r.bucket);
    SW_CHECK(b < num_buckets, "bucket cuts: param ", r.param, " in unknown bucket ", r.bucket);
    first_of_bucket[b] = std::min(first_of_bucket[b], i);
    if (params[r.param].shared_embedding) shared_bucket[b] = true;
  }
  std::vector<std::int64_t> used;
  for (std::size_t b = 0; b + 1 < num_buckets; ++b) {
    if (shared_bucket[b] || shared_bucket[b + 1]) continue;
    const std::int64_t shard = layout.shard_size(static_cast<int>(b));
    const BucketRange& bucket = layout.bucket_indices[b];
    used.assign(static_cast<std::size_t>(layout.num_shards), 0);
    for (std::size_t i = first_of_bucket[b]; i < first_of_bucket[b + 1]; ++i) {
      const ParamRange& r = layout.param_index_map[i];
      const int s = layout.owner_shard(r);
      auto& u = used[static_cast<std::size_t>(s)];
      u = std::max(
          u, r.start - bucket.start - s * shard + param_units(r.numel()) * kParamStartAlignment);
    }
    const ParamRange& next = layout.param_index_map[first_of_bucket[b + 1]];
    const std::int64_t need = param_units(next.numel()) * kParamStartAlignment;
    for (std::size_t s = 0; s < used.size(); ++s) {
      SW_CHECK(used[s] + need > shard, "bucket cuts: param ", params[next.param].name,
               " opens bucket ", b + 1, " although it fits into the padding of shard ", s,
               " of bucket ", b);
    }
  }
}

void validate_full_layout(const ParamList& params, const FullParamLayout& layout,
                          const LayoutOptions& options) {
  std::vector<int> seen(params.size(), 0);
  for (const auto& [key, buffer] : layout.layouts) {
    validate_layout(params, buffer, key, options);
    for (const ParamRange& r : buffer.param_index_map) {
      SW_CHECK(buffer_key_for(params[r.param], options) == key, "param ", params[r.param].name,
               " sits in buffer ", key.to_string(), " but belongs in ",
               buffer_key_for(params[r.param], options).to_string());
      ++seen[r.param];
    }
  }
  for (ParamId id = 0; id < params.size(); ++id) {
    SW_CHECK(seen[id] == 1, "param ", params[id].name, " appears in ", seen[id], " buffers");
  }
}

}  // namespace shardwise
