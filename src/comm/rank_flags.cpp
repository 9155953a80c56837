#include "shardwise/comm/rank_flags.hpp"

#include <exception>

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

std::vector<int> ranks_differing_from_rank0(ProcessGroup& group, std::uint64_t value) {
  auto rank0 = static_cast<std::int64_t>(value);  // the backends all move int64
  group.broadcast(TensorView{&rank0, 1, DType::kInt64}, 0)->wait();
  return ranks_with_flag(group, rank0 != static_cast<std::int64_t>(value));
}

std::vector<int> run_on_every_rank(ProcessGroup& group, const std::function<void()>& step) {
  std::exception_ptr failure;
  try {
    step();
  } catch (...) {
    failure = std::current_exception();
  }
  std::vector<int> failed = ranks_with_flag(group, failure != nullptr);
  if (failure) std::rethrow_exception(failure);
  return failed;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

std::string broadcast_text(ProcessGroup& group, const std::string& text, int root) {
  std::int64_t size = static_cast<std::int64_t>(text.size());
  group.broadcast(TensorView{&size, 1, DType::kInt64}, root)->wait();
  std::string out = group.rank() == root ? text : std::string(static_cast<std::size_t>(size), ' ');
  if (size > 0) group.broadcast(TensorView{out.data(), size, DType::kUInt8}, root)->wait();
  return out;
}

}  // namespace shardwise
