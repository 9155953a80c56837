// The fixed-order gradient sum behind ddp.reproducible_reduction: the step's gradient is the sum
// of its G global micro-batch gradients taken as one balanced tree over the global micro-batch
// index g, whatever dp is. The tree splits a run of leaves into its even and odd positions:
//   sum(v) = sum(v[0::2]) + sum(v[1::2]),   sum([x]) = x.
// The trainer gives rank r the micro-batches g = micro * dp + r, so for a power-of-two dp the
// top log2(dp) levels of that tree split exactly by rank and the subtree under each rank is the
// same rule over its own micro-batches: every rank sums its micro-batches with the rule, the
// partials are all-gathered, and every rank combines them with the rule again, in rank order.
// Each add is one fp32 add of the same two numbers at any dp, so the bits do not depend on dp.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/ddp/param_and_grad_buffer.hpp"

namespace shardwise {

// out[i] = the even/odd tree sum of leaves[0][i], leaves[1][i], ... Every leaf has out's size;
// at least one leaf. out may alias no leaf.
void even_odd_tree_sum(std::span<float> out, std::span<const float* const> leaves);

// Per-buffer copies of each closed micro-batch's grads and the reduction over them.
class ReproducibleGradReduction {
 public:
  // Throws ConfigError naming dp unless dp is a power of two.
  explicit ReproducibleGradReduction(int data_parallel_size);

  // Moves the grads in `buffers` into a new slot (one copy per buffer) and zeros the buffers:
  // the micro-batch they hold is closed.
  void close_microbatch(const std::vector<std::unique_ptr<ParamAndGradBuffer>>& buffers);
  int closed_microbatches() const { return static_cast<int>(slots_.size()); }

  // Closes the micro-batch in the buffers, sums every closed micro-batch of every rank of `dp`
  // in tree order into every rank's whole grad buffers and, with `average`, multiplies them once
  // by 1/G (G = dp * micro-batches per rank, the same double at any dp). Forgets the slots.
  // Collective over `dp`; every rank must have closed as many micro-batches.
  void reduce(const std::vector<std::unique_ptr<ParamAndGradBuffer>>& buffers, ProcessGroup& dp,
              bool average);

  // Most bytes the mode held above the grad buffers so far (slots plus one gathered buffer).
  std::int64_t peak_extra_bytes() const { return peak_extra_bytes_; }
  void clear() { slots_.clear(); }

 private:
  // slots_[micro][buffer]: the grads of one closed micro-batch.
  std::vector<std::vector<std::vector<float>>> slots_;
  std::int64_t peak_extra_bytes_ = 0;
};

}  // namespace shardwise
