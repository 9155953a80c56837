// Thin wrappers over the CBLAS routines shardwise uses (OpenBLAS). All matrices are row-major
// with an explicit leading dimension (the distance in elements between consecutive rows).
#pragma once

#include <cstdint>
#include <string>

namespace shardwise::blas {

enum class Op : std::uint8_t { kNone, kTranspose };

// C = alpha * op(A) * op(B) + beta * C, where op(A) is m x k, op(B) is k x n and C is m x n.
// C must not overlap A or B. Sizes are checked against BLAS's 32-bit index range.
void sgemm(Op op_a, Op op_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc);

// Symmetric rank-k update, the Gram matrix at half the flops of a GEMM:
//   op_a == kNone:      C = alpha * A * A^T + beta * C   (A is n x k)
//   op_a == kTranspose: C = alpha * A^T * A + beta * C   (A is k x n)
// Only the upper triangle of the n x n matrix C is written; call fill_lower_from_upper when the
// full matrix is needed.
void ssyrk(Op op_a, std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
           float beta, float* c, std::int64_t ldc);

// Copies the upper triangle of the n x n matrix C onto its lower triangle.
void fill_lower_from_upper(std::int64_t n, float* c, std::int64_t ldc);

// BLAS thread pool size (OpenBLAS: OPENBLAS_NUM_THREADS, or the core count).
int num_threads();
void set_num_threads(int threads);
// Build description of the BLAS library, for benchmark output.
std::string library_config();

}  // namespace shardwise::blas
