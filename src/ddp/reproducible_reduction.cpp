#include "shardwise/ddp/reproducible_reduction.hpp"

#include <algorithm>
#include <cstring>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

// Leaves of one subtree: every `stride`-th leaf from `first`, `count` of them.
struct LeafRun {
  std::span<const float* const> leaves;
  std::size_t first = 0;
  std::size_t stride = 1;
  std::size_t count = 0;
};

// out = the tree sum of `run` (out holds `n` elements). `scratch` is one buffer per tree level
// level (`depth` indexes it), reused by the right subtrees; sized by the caller.
void tree_sum_run(float* out, std::size_t n, const LeafRun& run, std::vector<float>& scratch,
                  std::size_t depth) {
  if (run.count == 1) {
    std::memcpy(out, run.leaves[run.first], n * sizeof(float));
    return;
  }
  const LeafRun even{run.leaves, run.first, run.stride * 2, (run.count + 1) / 2};
  const LeafRun odd{run.leaves, run.first + run.stride, run.stride * 2, run.count / 2};
  tree_sum_run(out, n, even, scratch, depth + 1);
  if (odd.count == 1) {
    const float* right = run.leaves[odd.first];
    for (std::size_t i = 0; i < n; ++i) out[i] += right[i];
    return;
  }
  float* right = scratch.data() + depth * n;  // sized for the deepest level up front
  tree_sum_run(right, n, odd, scratch, depth + 1);
  for (std::size_t i = 0; i < n; ++i) out[i] += right[i];
}

bool is_power_of_two(int v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

void even_odd_tree_sum(std::span<float> out, std::span<const float* const> leaves) {
  SW_CHECK(!leaves.empty(), "even_odd_tree_sum: no leaves");
  std::size_t levels = 1;
  while ((std::size_t{1} << levels) < leaves.size()) ++levels;
  std::vector<float> scratch(levels * out.size());
  tree_sum_run(out.data(), out.size(), LeafRun{leaves, 0, 1, leaves.size()}, scratch, 0);
}

ReproducibleGradReduction::ReproducibleGradReduction(int data_parallel_size) {
  SW_REQUIRE(is_power_of_two(data_parallel_size), ConfigError,
             "ddp.reproducible_reduction needs a power-of-two data-parallel size (its summation "
             "tree splits the global micro-batches by rank only then); dp is ",
             data_parallel_size);
}

void ReproducibleGradReduction::close_microbatch(
    const std::vector<std::unique_ptr<ParamAndGradBuffer>>& buffers) {
  std::vector<std::vector<float>>& slot = slots_.emplace_back();
  std::int64_t bytes = 0;
  for (const auto& buffer : buffers) {
    const TensorView grad = buffer->grad_data();
    SW_REQUIRE(grad.dtype == DType::kFloat32 && !grad.on_device(), InvalidArgument,
               "ddp.reproducible_reduction sums fp32 host grad buffers; buffer ",
               buffer->key().to_string(), " holds ", dtype_name(grad.dtype),
               grad.on_device() ? " device memory" : "");
    const float* g = grad.as<float>();
    slot.emplace_back(g, g + grad.numel);
    buffer->zero_grad();
    bytes += grad.numel * static_cast<std::int64_t>(sizeof(float));
  }
  peak_extra_bytes_ = std::max(peak_extra_bytes_, bytes * closed_microbatches());
}

void ReproducibleGradReduction::reduce(
    const std::vector<std::unique_ptr<ParamAndGradBuffer>>& buffers, ProcessGroup& dp,
    bool average) {
  close_microbatch(buffers);
  const int ranks = dp.size();
  const std::size_t micros = slots_.size();
  std::int64_t slot_bytes = 0;
  for (const auto& b : buffers) slot_bytes += b->numel() * static_cast<std::int64_t>(sizeof(float));
  slot_bytes *= static_cast<std::int64_t>(micros);
  std::vector<float> partial, gathered;
  std::vector<const float*> leaves(std::max<std::size_t>(micros, ranks));
  for (std::size_t b = 0; b < buffers.size(); ++b) {
    const auto n = static_cast<std::size_t>(buffers[b]->numel());
    for (std::size_t m = 0; m < micros; ++m) leaves[m] = slots_[m][b].data();
    partial.resize(n);
    even_odd_tree_sum(partial, std::span(leaves.data(), micros));
    gathered.resize(n * static_cast<std::size_t>(ranks));
    dp.all_gather(
          TensorView{gathered.data(), static_cast<std::int64_t>(gathered.size()), DType::kFloat32},
          TensorView{partial.data(), static_cast<std::int64_t>(n), DType::kFloat32})
        ->wait();
    peak_extra_bytes_ =
        std::max(peak_extra_bytes_,
                 slot_bytes + static_cast<std::int64_t>((gathered.size() + n) * sizeof(float)));
    for (int r = 0; r < ranks; ++r) leaves[static_cast<std::size_t>(r)] = gathered.data() + n * r;
    float* grad = buffers[b]->grad_data().as<float>();
    even_odd_tree_sum(std::span(grad, n),
                      std::span(leaves.data(), static_cast<std::size_t>(ranks)));
    if (average) {
      scale_elements(buffers[b]->grad_data(), 1.0 / (static_cast<double>(micros) * ranks));
    }
  }
  slots_.clear();
}

}  // namespace shardwise
