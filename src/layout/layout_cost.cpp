#include "shardwise/layout/layout_cost.hpp"

#include <cmath>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

std::int64_t state_bytes_per_element(const BufferKey& key) {
  const std::int64_t main_params = key.param_dtype == DType::kFloat32 ? 0 : 4;
  return main_params + (key.is_layer_wise ? 4 : 8);
}

// (S-1)/S * numel * bytes, exact because every bucket's numel is divisible by its shard count.
std::int64_t reduce_scatter_bytes(std::int64_t numel, int shards, std::int64_t bytes) {
  return numel / shards * (shards - 1) * bytes;
}

BufferCost buffer_cost(const BufferKey& key, const PerBufferParamLayout& buffer,
                       const LayoutOptions& options) {
  const int group_dp = key.is_expert_parallel ? options.expert_dp() : options.data_parallel_size;
  const bool plain_ddp = options.algorithm == LayoutAlgorithm::kDefault;
  BufferCost cost;
  cost.numel_padded = buffer.numel();
  cost.numel_unpadded = buffer.numel_unpadded();
  cost.num_shards = plain_ddp ? 1 : buffer.num_shards;
  SW_CHECK(cost.num_shards >= 1 && group_dp % cost.num_shards == 0, "buffer ", key.to_string(),
           ": ", cost.num_shards, " shards do not divide its DP group of ", group_dp);
  cost.replicas = group_dp / cost.num_shards;
  const auto p = static_cast<std::int64_t>(dtype_size(key.param_dtype));
  const auto g = static_cast<std::int64_t>(dtype_size(key.grad_dtype));
  const int s = cost.num_shards;
  const int r = cost.replicas;
  cost.param_bytes = cost.numel_padded * p;
  cost.grad_bytes = cost.numel_padded * g;
  cost.optimizer_state_bytes = cost.numel_padded / s * state_bytes_per_element(key);
  double all_reduce = 0.0;
  for (const BucketRange& bucket : buffer.bucket_indices) {
    const std::int64_t shard = bucket.numel() / s;
    cost.comm_bytes += reduce_scatter_bytes(bucket.numel(), s, g + p);
    all_reduce += 2.0 * (r - 1) / r * static_cast<double>(shard * g);
  }
  cost.comm_bytes += std::llround(all_reduce);
  if (!buffer.bucket_indices.empty() && s > 1) {
    cost.exposed_rs_bytes = reduce_scatter_bytes(buffer.bucket_indices.back().numel(), s, g);
  }
  return cost;
}

}  // namespace

BufferCost& BufferCost::operator+=(const BufferCost& other) {
  numel_padded += other.numel_padded;
  numel_unpadded += other.numel_unpadded;
  param_bytes += other.param_bytes;
  grad_bytes += other.grad_bytes;
  optimizer_state_bytes += other.optimizer_state_bytes;
  comm_bytes += other.comm_bytes;
  exposed_rs_bytes += other.exposed_rs_bytes;
  return *this;
}

double BufferCost::padding_fraction() const {
  return numel_padded > 0 ? static_cast<double>(padding_numel()) / static_cast<double>(numel_padded)
                          : 0.0;
}

double LayoutCost::padding_fraction() const { return total.padding_fraction(); }

LayoutCost compute_layout_cost(const FullParamLayout& layout, const LayoutOptions& options) {
  LayoutCost cost;
  for (const auto& [key, buffer] : layout.layouts) {
    cost.buffers.emplace_back(key, buffer_cost(key, buffer, options));
    cost.total += cost.buffers.back().second;
  }
  return cost;
}

}  // namespace shardwise
