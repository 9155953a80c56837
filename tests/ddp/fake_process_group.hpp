// A ProcessGroup for single-process tests: records every call (kind, buffers, op) and completes
// immediately without moving data, so tests can check what DDP issues, in which order, on which
// memory. Pretends to be rank `rank` of `size`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shardwise/comm/process_group.hpp"

namespace shardwise::testing_support {

struct RecordedCall {
  CollectiveKind kind;
  void* output = nullptr;
  std::int64_t output_numel = 0;
  void* input = nullptr;
  std::int64_t input_numel = 0;
  ReduceOp op = ReduceOp::kSum;
  std::vector<std::int64_t> counts;  // all_gather_v
};

class RecordedWork : public Work {
 public:
  explicit RecordedWork(int* waits) : waits_(waits) {}
  void wait() override { ++*waits_; }
  bool is_completed() override { return true; }

 private:
  int* waits_;
};

class FakeProcessGroup : public ProcessGroup {
 public:
  FakeProcessGroup(int rank, int size, std::string name = "fake")
      : rank_(rank), size_(size), name_(std::move(name)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }

  WorkPtr all_reduce(TensorView buffer, ReduceOp op) override {
    return record(
        {CollectiveKind::kAllReduce, buffer.data, buffer.numel, buffer.data, buffer.numel, op, {}});
  }
  WorkPtr reduce_scatter(TensorView output, TensorView input, ReduceOp op) override {
    return record({CollectiveKind::kReduceScatter,
                   output.data,
                   output.numel,
                   input.data,
                   input.numel,
                   op,
                   {}});
  }
  WorkPtr all_gather(TensorView output, TensorView input) override {
    return record({CollectiveKind::kAllGather,
                   output.data,
                   output.numel,
                   input.data,
                   input.numel,
                   ReduceOp::kSum,
                   {}});
  }
  WorkPtr all_gather_v(TensorView output, TensorView input,
                       const std::vector<std::int64_t>& counts) override {
    return record({CollectiveKind::kAllGatherV, output.data, output.numel, input.data, input.numel,
                   ReduceOp::kSum, counts});
  }
  WorkPtr broadcast(TensorView buffer, int) override {
    return record({CollectiveKind::kBroadcast,
                   buffer.data,
                   buffer.numel,
                   buffer.data,
                   buffer.numel,
                   ReduceOp::kSum,
                   {}});
  }
  WorkPtr send(TensorView buffer, int, int) override {
    return record(
        {CollectiveKind::kSend, nullptr, 0, buffer.data, buffer.numel, ReduceOp::kSum, {}});
  }
  WorkPtr recv(TensorView buffer, int, int) override {
    return record(
        {CollectiveKind::kRecv, buffer.data, buffer.numel, nullptr, 0, ReduceOp::kSum, {}});
  }
  WorkPtr barrier() override {
    return record({CollectiveKind::kBarrier, nullptr, 0, nullptr, 0, ReduceOp::kSum, {}});
  }
  void check_same_on_all_ranks(std::uint64_t value, const std::string& what) override {
    checked_values.push_back(value);
    checked_what.push_back(what);
    if (fail_checks) throw CommError("fake: ranks disagree on " + what);
  }
  TrafficCounters traffic() const override { return {}; }
  void reset_traffic() override {}

  std::vector<RecordedCall> calls;
  std::vector<std::uint64_t> checked_values;
  std::vector<std::string> checked_what;
  bool fail_checks = false;
  int waits = 0;

 private:
  WorkPtr record(RecordedCall call) {
    calls.push_back(std::move(call));
    return std::make_shared<RecordedWork>(&waits);
  }
  int rank_;
  int size_;
  std::string name_;
};

}  // namespace shardwise::testing_support
