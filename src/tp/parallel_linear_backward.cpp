// Backward passes of column- and row-parallel linears with sequence parallelism, with the
// bulk overlaps of Transformer Engine's userbuffers: the all-gather of the layer input runs
// beside the dgrad GEMM, the reduce-scatter of the dgrad beside the wgrad GEMM.
#include <vector>

#include "gemm_rows.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::tp {
namespace {

bool is(const OverlapChoice& choice, OverlapAlgorithm algorithm) {
  return choice.algorithm == algorithm;
}

// grad_weight [n, k] = beta * grad_weight + a^T [n, rows] * x [rows, k].
void wgrad_gemm(const float* a, std::int64_t rows, std::int64_t n, const float* x, std::int64_t k,
                MutableMatrix grad_weight, float beta) {
  blas::sgemm(blas::Op::kTranspose, blas::Op::kNone, n, k, rows, 1.0f, a, n, x, k, beta,
              grad_weight.data, k);
}

void check_matrix(std::string_view what, const char* name, std::int64_t rows, std::int64_t cols,
                  std::int64_t want_rows, std::int64_t want_cols) {
  SW_REQUIRE(rows == want_rows && cols == want_cols, ShapeError, what, ": ", name, " is ", rows,
             "x", cols, ", expected ", want_rows, "x", want_cols);
}

}  // namespace

void column_parallel_backward(ProcessGroup& group, const OverlapChoice& dgrad,
                              const OverlapChoice& wgrad, ConstMatrix input_shard,
                              ConstMatrix weight, ConstMatrix grad_output,
                              const ColumnParallelGrads& grads) {
  constexpr std::string_view what = "column_parallel_backward";
  const std::int64_t t = group.size();
  const std::int64_t m = input_shard.rows;
  const std::int64_t k = input_shard.cols;
  const std::int64_t n = weight.rows;
  check_choice(what, dgrad);
  check_matrix(what, "weight", weight.rows, weight.cols, n, k);
  check_matrix(what, "grad_output", grad_output.rows, grad_output.cols, t * m, n);
  check_matrix(what, "grad_weight", grads.grad_weight.rows, grads.grad_weight.cols, n, k);
  SW_REQUIRE(is(wgrad, OverlapAlgorithm::kNone) || is(wgrad, OverlapAlgorithm::kBulk),
             InvalidArgument, what, ": wgrad overlap '", overlap_algorithm_name(wgrad.algorithm),
             "' is not applicable (none or bulk: the dgrad's reduce-scatter beside the wgrad GEMM)");
  const RightOperand w{weight, blas::Op::kNone};
  std::vector<float> gathered(static_cast<std::size_t>(t * m * k));
  const TensorView input_view = float_view(input_shard.data, m * k);
  const TensorView gathered_view = float_view(gathered.data(), t * m * k);

  if (is(dgrad, OverlapAlgorithm::kRingExchange) || is(dgrad, OverlapAlgorithm::kPipeline)) {
    // The dgrad's reduce-scatter is fused into its GEMM; a bulk wgrad overlaps the input's
    // all-gather with that GEMM instead (it runs first on the group's worker).
    WorkPtr gather = group.all_gather(gathered_view, input_view);
    if (!is(wgrad, OverlapAlgorithm::kBulk)) gather->wait();
    gemm_reduce_scatter(group, dgrad, grad_output, w, grads.grad_input);
    gather->wait();
    wgrad_gemm(grad_output.data, t * m, n, gathered.data(), k, grads.grad_weight,
               grads.grad_weight_beta);
    return;
  }
  check_matrix(what, "grad_input", grads.grad_input.rows, grads.grad_input.cols, m, k);
  std::vector<float> dgrad_full(static_cast<std::size_t>(t * m * k));
  WorkPtr gather = group.all_gather(gathered_view, input_view);
  if (!is(dgrad, OverlapAlgorithm::kBulk)) gather->wait();
  gemm_rows(grad_output.data, t * m, w, dgrad_full.data());
  gather->wait();
  WorkPtr scatter = group.reduce_scatter(float_view(grads.grad_input.data, m * k),
                                         float_view(dgrad_full.data(), t * m * k), ReduceOp::kSum);
  if (!is(wgrad, OverlapAlgorithm::kBulk)) scatter->wait();
  wgrad_gemm(grad_output.data, t * m, n, gathered.data(), k, grads.grad_weight,
             grads.grad_weight_beta);
  scatter->wait();
}

void row_parallel_backward(ProcessGroup& group, const OverlapChoice& dgrad, ConstMatrix input,
                           ConstMatrix weight, ConstMatrix grad_output_shard,
                           MutableMatrix grad_input, MutableMatrix grad_weight,
                           float grad_weight_beta) {
  constexpr std::string_view what = "row_parallel_backward";
  const std::int64_t t = group.size();
  const std::int64_t m = grad_output_shard.rows;
  const std::int64_t n = weight.rows;
  const std::int64_t k = weight.cols;
  check_matrix(what, "input", input.rows, input.cols, t * m, k);
  check_matrix(what, "grad_weight", grad_weight.rows, grad_weight.cols, n, k);
  std::vector<float> gathered(static_cast<std::size_t>(t * m * n));
  all_gather_gemm(group, dgrad, grad_output_shard, {weight, blas::Op::kNone}, grad_input,
                  gathered.data());
  wgrad_gemm(gathered.data(), t * m, n, input.data, k, grad_weight, grad_weight_beta);
}

}  // namespace shardwise::tp
