#include "cublas_products.hpp"

#include <cstdint>

#include "newton_schulz_kernels.hpp"

namespace shardwise::cuda::detail {

namespace {

std::int64_t element_bytes(cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; }

const char* at(const void* p, std::int64_t elements, cudaDataType type) {
  return static_cast<const char*>(p) + elements * element_bytes(type);
}
char* at(void* p, std::int64_t elements, cudaDataType type) {
  return static_cast<char*>(p) + elements * element_bytes(type);
}

void mirror(void* c, int m, cudaDataType type, cudaStream_t stream) {
  if (type == CUDA_R_32F) {
    launch_mirror_upper(static_cast<float*>(c), m, stream);
  } else {
    launch_mirror_upper(static_cast<std::uint16_t*>(c), m, stream);
  }
}

// `count` blocks of C, each size x size: C_i = alpha X_{r_i} X_{s_i}^T + beta C_i, with the row
// blocks r_i = first_row + i * step (s_i the same plus `offset` rows) and C_i at (r_i, s_i).
struct BlockRun {
  std::int64_t first_row, offset, step;
  int size, count;
};

void block_products(cublasHandle_t handle, GemmTypes t, SymmetricOperand x, BlockRun r, float alpha,
                    float beta, void* c) {
  const cublasOperation_t first = x.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t second = x.transposed ? CUBLAS_OP_N : CUBLAS_OP_T;
  const int ld = x.transposed ? x.k : x.m;
  const std::int64_t row_stride = x.transposed ? x.k : 1;  // elements between rows of X
  const std::int64_t m = x.m;
  const std::int64_t col = r.first_row + r.offset;
  check_cublas(cublasGemmStridedBatchedEx(
                   handle, first, second, r.size, r.size, x.k, &alpha,
                   at(x.x, r.first_row * row_stride, t.input), t.input, ld, r.step * row_stride,
                   at(x.x, col * row_stride, t.input), t.input, ld, r.step * row_stride, &beta,
                   at(c, r.first_row + col * m, t.output), t.output, static_cast<int>(m),
                   r.step * (m + 1), r.count, t.compute, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx (symmetric product blocks)");
}

// The same blocks of C = A B for two m x m operands, both as they are (op N, ld m): row block
// r_i of A, column block s_i of B.
void result_blocks(cublasHandle_t handle, GemmTypes t, const void* a, const void* b, int m,
                   BlockRun r, void* c) {
  const float alpha = 1.0f, beta = 0.0f;
  const std::int64_t col = r.first_row + r.offset;
  check_cublas(cublasGemmStridedBatchedEx(
                   handle, CUBLAS_OP_N, CUBLAS_OP_N, r.size, r.size, m, &alpha,
                   at(a, r.first_row, t.input), t.input, m, r.step, at(b, col * m, t.input),
                   t.input, m, r.step * m, &beta, at(c, r.first_row + col * m, t.output), t.output,
                   m, r.step * (std::int64_t{m} + 1), r.count, t.compute, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx (symmetric result blocks)");
}

}  // namespace

void gemm(cublasHandle_t handle, GemmTypes t, cublasOperation_t op_a, cublasOperation_t op_b,
          int rows, int cols, int depth, float alpha, const void* a, int lda, const void* b,
          int ldb, float beta, void* c, int ldc, const char* what) {
  check_cublas(cublasGemmEx(handle, op_a, op_b, rows, cols, depth, &alpha, a, t.input, lda, b,
                            t.input, ldb, &beta, c, t.output, ldc, t.compute, CUBLAS_GEMM_DEFAULT),
               what);
}

int blocked_levels(int m, int min_block, int max_levels) {
  int levels = 0;
  while (levels < max_levels && m % (2 << levels) == 0 && m / (2 << levels) >= min_block) {
    ++levels;
  }
  return levels;
}

void symmetric_product(cublasHandle_t handle, cudaStream_t stream, GemmTypes t, SymmetricPlan plan,
                       SymmetricOperand x, float alpha, float beta, void* c, const char* what) {
  const cublasOperation_t first = x.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ld = x.transposed ? x.k : x.m;
  switch (plan.method) {
    case SymmetricMethod::kGemm:
      gemm(handle, t, first, x.transposed ? CUBLAS_OP_N : CUBLAS_OP_T, x.m, x.m, x.k, alpha, x.x,
           ld, x.x, ld, beta, c, x.m, what);
      return;
    case SymmetricMethod::kSyrk:
      check_cublas(
          cublasSsyrk(handle, CUBLAS_FILL_MODE_UPPER, first, x.m, x.k, &alpha,
                      static_cast<const float*>(x.x), ld, &beta, static_cast<float*>(c), x.m),
          what);
      break;
    case SymmetricMethod::kBlocked: {
      // Level l: the 2^(l-1) blocks of size m / 2^l right of the diagonal blocks of level l - 1.
      for (int level = 1; level <= plan.levels; ++level) {
        const int size = x.m >> level;
        block_products(handle, t, x, {0, size, 2 * std::int64_t{size}, size, 1 << (level - 1)},
                       alpha, beta, c);
      }
      const int size = x.m >> plan.levels;
      block_products(handle, t, x, {0, 0, size, size, 1 << plan.levels}, alpha, beta, c);
      break;
    }
  }
  mirror(c, x.m, t.output, stream);
}

void symmetric_result_product(cublasHandle_t handle, cudaStream_t stream, GemmTypes t,
                              SymmetricPlan plan, const void* a, const void* b, int m, void* c,
                              const char* what) {
  if (plan.method != SymmetricMethod::kBlocked) {
    gemm(handle, t, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, 1.0f, a, m, b, m, 0.0f, c, m, what);
    return;
  }
  for (int level = 1; level <= plan.levels; ++level) {
    const int size = m >> level;
    result_blocks(handle, t, a, b, m, {0, size, 2 * std::int64_t{size}, size, 1 << (level - 1)}, c);
  }
  const int size = m >> plan.levels;
  result_blocks(handle, t, a, b, m, {0, 0, size, size, 1 << plan.levels}, c);
  mirror(c, m, t.output, stream);
}

}  // namespace shardwise::cuda::detail
