// Read-only views of an optimizer's state, field by field, pointing into the optimizer's own
// buffers: what a checkpoint writes from, so saving copies no state tensor. The views are valid
// until the optimizer is next stepped, loaded or destroyed.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

namespace shardwise::optim {

class OptimizerStateView {
 public:
  // Field name -> values, ordered by field name as in a ParamState.
  using Fields = std::map<std::string, std::span<const float>>;

  // Param name -> its fields.
  const std::map<std::string, Fields>& params() const { return params_; }
  // Where an optimizer puts the views of one param's fields.
  Fields& fields_of(const std::string& param) { return params_[param]; }

  // Keeps `values` for as long as this view lives (moves, merges included) and returns a view
  // of them: for state the optimizer does not hold as floats (step counts) or does not hold at
  // all yet (a param never stepped).
  std::span<const float> hold(std::vector<float> values);
  // Takes over the params and held values of `other`; its params must be new to this view.
  void merge(OptimizerStateView&& other);

 private:
  std::map<std::string, Fields> params_;
  // Moving a vector keeps its buffer, so the views stay valid as this grows.
  std::vector<std::vector<float>> held_;
};

}  // namespace shardwise::optim
