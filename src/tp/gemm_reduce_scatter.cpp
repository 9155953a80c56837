// ReduceScatter(input * op(b)) three ways (overlapped_gemm.hpp). Each rank's partial product of
// a row block is the same in every algorithm; the algorithms differ in the order the T partials
// of an output row are summed, hence the (T-1) * u * sum |partial| bound of docs/tp_overlap.md.
#include <vector>

#include "gemm_rows.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::tp {
namespace {

void gemm_then_reduce_scatter(ProcessGroup& group, ConstMatrix input, const RightOperand& b,
                              MutableMatrix out) {
  const std::int64_t numel = input.rows * out.cols;
  std::vector<float> partial(static_cast<std::size_t>(numel));
  gemm_rows(input.data, input.rows, b, partial.data());
  group.reduce_scatter(float_view(out.data, out.rows * out.cols),
                       float_view(partial.data(), numel), ReduceOp::kSum)->wait();
}

// At step s a rank multiplies its rows of block (rank - s - 1) while the running sum of that
// block arrives from the previous rank, adds it, and passes it on; after T steps every block
// has visited all T ranks and ends, complete, on its owner (the last step's block is its own).
void ring_exchange(ProcessGroup& group, ConstMatrix input, const RightOperand& b,
                   MutableMatrix out) {
  const int t = group.size();
  const int rank = group.rank();
  const std::int64_t m = out.rows;
  const std::int64_t block = m * out.cols;
  std::vector<float> partial[2] = {std::vector<float>(static_cast<std::size_t>(block)),
                                   std::vector<float>(static_cast<std::size_t>(block))};
  std::vector<float> received(static_cast<std::size_t>(block));
  WorkPtr sends[2];
  for (int step = 0; step < t; ++step) {
    const int target = ((rank - step - 1) % t + t) % t;
    WorkPtr recv;
    if (step > 0) {
      recv = group.recv(float_view(received.data(), block), (rank - 1 + t) % t,
                        kRingReduceScatterTag);
    }
    const bool last = step + 1 == t;
    float* sum = last ? out.data : partial[step % 2].data();
    if (!last && sends[step % 2]) sends[step % 2]->wait();  // that buffer is still being sent
    gemm_rows(input.data + target * m * input.cols, m, b, sum);
    if (recv) {
      recv->wait();
      for (std::int64_t i = 0; i < block; ++i) sum[i] = received[static_cast<std::size_t>(i)] + sum[i];
    }
    if (!last) sends[step % 2] = group.send(float_view(sum, block), (rank + 1) % t,
                                            kRingReduceScatterTag);
  }
  for (auto& send : sends) {
    if (send) send->wait();
  }
}

// Chunk c (rows [first, first + rows) of every rank's block) is multiplied, then its
// reduce-scatter starts and runs while chunk c+1 is multiplied.
void pipeline(ProcessGroup& group, int num_splits, ConstMatrix input, const RightOperand& b,
              MutableMatrix out) {
  const std::int64_t t = group.size();
  const std::int64_t m = out.rows;
  const std::int64_t k = input.cols;
  const std::int64_t n = out.cols;
  const std::vector<std::int64_t> chunks = row_chunks(m, num_splits);
  std::vector<float> partial(static_cast<std::size_t>(t * m * n));
  std::vector<WorkPtr> works;
  std::int64_t first = 0;
  for (const std::int64_t rows : chunks) {
    float* staged = partial.data() + t * first * n;  // [t, rows, n] for this chunk
    for (std::int64_t r = 0; r < t; ++r) {
      gemm_rows(input.data + (r * m + first) * k, rows, b, staged + r * rows * n);
    }
    works.push_back(group.reduce_scatter(float_view(out.data + first * n, rows * n),
                                         float_view(staged, t * rows * n), ReduceOp::kSum));
    first += rows;
  }
  for (auto& work : works) work->wait();
}

}  // namespace

void gemm_reduce_scatter(ProcessGroup& group, const OverlapChoice& choice, ConstMatrix input,
                         RightOperand b, MutableMatrix out) {
  const std::int64_t t = group.size();
  SW_REQUIRE(input.rows % t == 0, ShapeError, "gemm_reduce_scatter: input has ", input.rows,
             " rows, not a multiple of the TP size ", t);
  check_choice("gemm_reduce_scatter", choice);
  check_gemm_shapes("gemm_reduce_scatter", input, b, out, input.rows / t);
  if (t == 1) return gemm_rows(input.data, input.rows, b, out.data);
  switch (choice.algorithm) {
    case OverlapAlgorithm::kNone:
      return gemm_then_reduce_scatter(group, input, b, out);
    case OverlapAlgorithm::kRingExchange:
      return ring_exchange(group, input, b, out);
    case OverlapAlgorithm::kPipeline:
      return pipeline(group, choice.num_splits, input, b, out);
    case OverlapAlgorithm::kBulk:
      break;
  }
  throw InvalidArgument(
      "gemm_reduce_scatter: bulk overlap needs a GEMM independent of the collective, and this "
      "collective reduces the GEMM's output (use none, ring_exchange or pipeline)");
}

}  // namespace shardwise::tp
