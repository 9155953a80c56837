#include "gemm_rows.hpp"

#include <algorithm>

#include "shardwise/core/error.hpp"

namespace shardwise::tp {

void gemm_rows(const float* a, std::int64_t rows, const RightOperand& b, float* c, float beta) {
  if (rows == 0) return;
  const std::int64_t k = b.inner();
  const std::int64_t n = b.outer();
  blas::sgemm(blas::Op::kNone, b.op, rows, n, k, 1.0f, a, k, b.matrix.data, b.matrix.cols, beta,
              c, n);
}

TensorView float_view(const float* data, std::int64_t numel) {
  return {const_cast<float*>(data), numel, DType::kFloat32};
}

std::vector<std::int64_t> row_chunks(std::int64_t rows, int splits) {
  SW_REQUIRE(splits >= 1, InvalidArgument, "num_splits must be >= 1 (got ", splits, ")");
  const std::int64_t count = std::max<std::int64_t>(1, std::min<std::int64_t>(splits, rows));
  std::vector<std::int64_t> chunks(static_cast<std::size_t>(count), rows / count);
  for (std::int64_t i = 0; i < rows % count; ++i) ++chunks[static_cast<std::size_t>(i)];
  return chunks;
}

void check_choice(std::string_view what, const OverlapChoice& choice) {
  SW_REQUIRE(choice.num_splits >= 1, InvalidArgument, what, ": ",
             overlap_algorithm_name(choice.algorithm), " num_splits must be >= 1 (got ",
             choice.num_splits, ")");
}

void check_gemm_shapes(std::string_view what, ConstMatrix input, const RightOperand& b,
                       const MutableMatrix& out, std::int64_t expected_out_rows) {
  SW_REQUIRE(input.rows >= 0 && input.cols >= 1 && b.matrix.rows >= 1 && b.matrix.cols >= 1,
             ShapeError, what, ": empty operand (input ", input.rows, "x", input.cols,
             ", weight ", b.matrix.rows, "x", b.matrix.cols, ")");
  SW_REQUIRE(input.cols == b.inner(), ShapeError, what, ": input has ", input.cols,
             " columns but the weight's inner dimension is ", b.inner());
  SW_REQUIRE(out.rows == expected_out_rows && out.cols == b.outer(), ShapeError, what,
             ": output is ", out.rows, "x", out.cols, ", expected ", expected_out_rows, "x",
             b.outer());
  SW_REQUIRE((input.data != nullptr || input.rows == 0) && b.matrix.data != nullptr &&
                 (out.data != nullptr || out.rows == 0),
             InvalidArgument, what, ": null buffer");
}

}  // namespace shardwise::tp
