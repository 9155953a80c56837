// AllGather(input) * op(b) three ways (overlapped_gemm.hpp). The products are computed row block
// by row block from the same inputs in every algorithm, so the three agree to the BLAS's own
// row-count dependence (none for OpenBLAS's sgemm in tests/tp/mpi).
#include <cstring>
#include <vector>

#include "gemm_rows.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::tp {
namespace {

void copy_rows(const float* from, std::int64_t rows, std::int64_t cols, float* to) {
  if (rows > 0) std::memcpy(to, from, static_cast<std::size_t>(rows * cols) * sizeof(float));
}

void gather_then_gemm(ProcessGroup& group, ConstMatrix input, const RightOperand& b,
                      MutableMatrix out, float* gathered) {
  const std::int64_t t = group.size();
  std::vector<float> own;
  if (gathered == nullptr) {
    own.resize(static_cast<std::size_t>(t * input.rows * input.cols));
    gathered = own.data();
  }
  group.all_gather(float_view(gathered, t * input.rows * input.cols),
                   float_view(input.data, input.rows * input.cols))->wait();
  gemm_rows(gathered, t * input.rows, b, out.data);
}

// Step s multiplies the shard of rank (rank - s) while the shard of rank (rank - s - 1) travels
// from the previous rank; each shard moves one hop per step, T-1 hops in all.
void ring_exchange(ProcessGroup& group, ConstMatrix input, const RightOperand& b,
                   MutableMatrix out, float* gathered) {
  const int t = group.size();
  const int rank = group.rank();
  const std::int64_t m = input.rows;
  const std::int64_t shard = m * input.cols;
  const std::int64_t n = out.cols;
  std::vector<float> arriving[2] = {std::vector<float>(static_cast<std::size_t>(shard)),
                                    std::vector<float>(static_cast<std::size_t>(shard))};
  const float* current = input.data;
  for (int step = 0; step < t; ++step) {
    const int source = (rank - step + t) % t;
    WorkPtr recv;
    WorkPtr send;
    float* next = arriving[step % 2].data();
    if (step + 1 < t) {
      recv = group.recv(float_view(next, shard), (rank - 1 + t) % t, kRingAllGatherTag);
      send = group.send(float_view(current, shard), (rank + 1) % t, kRingAllGatherTag);
    }
    gemm_rows(current, m, b, out.data + source * m * n);
    if (gathered != nullptr) copy_rows(current, m, input.cols, gathered + source * shard);
    if (step + 1 < t) {
      recv->wait();
      send->wait();
      current = next;
    }
  }
}

// Chunk c of every rank's rows is all-gathered while chunk c-1 is multiplied.
void pipeline(ProcessGroup& group, int num_splits, ConstMatrix input, const RightOperand& b,
              MutableMatrix out, float* gathered) {
  const std::int64_t t = group.size();
  const std::int64_t m = input.rows;
  const std::int64_t k = input.cols;
  const std::int64_t n = out.cols;
  const std::vector<std::int64_t> chunks = row_chunks(m, num_splits);
  std::vector<std::vector<float>> staged(chunks.size());
  std::vector<WorkPtr> works(chunks.size());
  std::vector<std::int64_t> first_row(chunks.size(), 0);
  auto start = [&](std::size_t c) {
    staged[c].resize(static_cast<std::size_t>(t * chunks[c] * k));
    works[c] = group.all_gather(float_view(staged[c].data(), t * chunks[c] * k),
                                float_view(input.data + first_row[c] * k, chunks[c] * k));
  };
  for (std::size_t c = 1; c < chunks.size(); ++c) first_row[c] = first_row[c - 1] + chunks[c - 1];
  start(0);
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    if (c + 1 < chunks.size()) start(c + 1);
    works[c]->wait();
    for (std::int64_t r = 0; r < t; ++r) {
      const float* rows = staged[c].data() + r * chunks[c] * k;
      const std::int64_t row = r * m + first_row[c];
      gemm_rows(rows, chunks[c], b, out.data + row * n);
      if (gathered != nullptr) copy_rows(rows, chunks[c], k, gathered + row * k);
    }
    std::vector<float>().swap(staged[c]);
  }
}

}  // namespace

void all_gather_gemm(ProcessGroup& group, const OverlapChoice& choice, ConstMatrix input,
                     RightOperand b, MutableMatrix out, float* gathered) {
  check_choice("all_gather_gemm", choice);
  check_gemm_shapes("all_gather_gemm", input, b, out, group.size() * input.rows);
  if (group.size() == 1) {
    gemm_rows(input.data, input.rows, b, out.data);
    if (gathered != nullptr) copy_rows(input.data, input.rows, input.cols, gathered);
    return;
  }
  switch (choice.algorithm) {
    case OverlapAlgorithm::kNone:
      return gather_then_gemm(group, input, b, out, gathered);
    case OverlapAlgorithm::kRingExchange:
      return ring_exchange(group, input, b, out, gathered);
    case OverlapAlgorithm::kPipeline:
      return pipeline(group, choice.num_splits, input, b, out, gathered);
    case OverlapAlgorithm::kBulk:
      break;
  }
  throw InvalidArgument(
      "all_gather_gemm: bulk overlap needs a GEMM independent of the collective, and this GEMM "
      "multiplies the gathered input (use none, ring_exchange or pipeline)");
}

}  // namespace shardwise::tp
