#include "shardwise/comm/rank_flags.hpp"

namespace shardwise {

std::vector<int> ranks_with_flag(ProcessGroup& group, bool flag) {
  std::vector<float> flags(static_cast<std::size_t>(group.size()), 0.0f);
  flags[static_cast<std::size_t>(group.rank())] = flag ? 1.0f : 0.0f;
  group.all_reduce(TensorView{flags.data(), group.size(), DType::kFloat32}, ReduceOp::kSum)->wait();
  std::vector<int> out;
  for (int r = 0; r < group.size(); ++r) {
    if (flags[static_cast<std::size_t>(r)] != 0.0f) out.push_back(r);
  }
  return out;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace shardwise
