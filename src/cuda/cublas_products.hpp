// The cuBLAS products of the Newton-Schulz iterations (private to shardwise_cuda): a GEMM with
// typed operands, and the symmetric product X X^T formed one of three ways. Everything is
// column-major, as cuBLAS sees it; the m x m results are symmetric, so row- and column-major
// agree on them.
#pragma once

#include "cuda_status.hpp"

namespace shardwise::cuda::detail {

// The element types of a product (A and B share one; C may differ) and its compute type.
struct GemmTypes {
  cudaDataType input;
  cudaDataType output;
  cublasComputeType_t compute;
};

// C = alpha op(A) op(B) + beta C through cublasGemmEx (rows x cols, depth the inner dimension).
void gemm(cublasHandle_t handle, GemmTypes t, cublasOperation_t op_a, cublasOperation_t op_b,
          int rows, int cols, int depth, float alpha, const void* a, int lda, const void* b,
          int ldb, float beta, void* c, int ldc, const char* what);

// How a symmetric product forms its m x m result:
//   kGemm     one GEMM writing both triangles
//   kSyrk     cublasSsyrk on the upper triangle, then mirrored (fp32 only; cuBLAS's SYRK uses no
//             tensor cores, and has no bf16 form)
//   kBlocked  GEMMs on the upper triangle's blocks, then mirrored: the diagonal halved `levels`
//             times, one strided-batched GEMM per level for the blocks right of the diagonal and
//             one for the diagonal blocks (1 - 2^-(levels+1) of the GEMM's flops, in GEMMs
//             large enough for the tensor cores)
enum class SymmetricMethod { kGemm, kSyrk, kBlocked };

struct SymmetricPlan {
  SymmetricMethod method = SymmetricMethod::kGemm;
  int levels = 0;  // kBlocked: how many times the diagonal is halved (m divisible by 2^levels)
};

// How often an m x m product can be halved keeping blocks of at least `min_block` (at most
// `max_levels`); 0 when not even once.
int blocked_levels(int m, int min_block, int max_levels);

// The m x k operand X of a symmetric product: to cuBLAS either x^T (k x m, ld k: `transposed`,
// the row-major short-side view of a wide matrix) or x itself (m x k, ld m).
struct SymmetricOperand {
  const void* x;
  bool transposed;
  int m, k;
};

// c = alpha X X^T + beta c, c m x m (ld m) of t.output; afterwards both triangles hold the result.
void symmetric_product(cublasHandle_t handle, cudaStream_t stream, GemmTypes t, SymmetricPlan plan,
                       SymmetricOperand x, float alpha, float beta, void* c, const char* what);

// c = a b for m x m matrices (ld m) of t.input whose product is symmetric (they commute, as the
// Gram iteration's polynomials in R do): with kBlocked only the blocks on and above the diagonal
// are formed, then mirrored; otherwise (kGemm, and kSyrk, which needs a b = x x^T) one GEMM.
void symmetric_result_product(cublasHandle_t handle, cudaStream_t stream, GemmTypes t,
                              SymmetricPlan plan, const void* a, const void* b, int m, void* c,
                              const char* what);

}  // namespace shardwise::cuda::detail
