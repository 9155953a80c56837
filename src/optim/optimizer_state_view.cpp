#include "shardwise/optim/optimizer_state_view.hpp"

#include <utility>

#include "shardwise/core/error.hpp"

namespace shardwise::optim {

std::span<const float> OptimizerStateView::hold(std::vector<float> values) {
  held_.push_back(std::move(values));
  return held_.back();
}

void OptimizerStateView::merge(OptimizerStateView&& other) {
  for (auto& [param, fields] : other.params_) {
    SW_CHECK(params_.emplace(param, std::move(fields)).second, "optimizer state view of param ",
             param, " given twice");
  }
  other.params_.clear();
  for (std::vector<float>& values : other.held_) held_.push_back(std::move(values));
  other.held_.clear();
}

}  // namespace shardwise::optim
