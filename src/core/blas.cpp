#include "shardwise/core/blas.hpp"

#include <cblas.h>

#include <algorithm>
#include <limits>

#include "shardwise/core/error.hpp"

namespace shardwise::blas {

namespace {

blasint to_blas_int(std::int64_t value, const char* what) {
  SW_CHECK(value >= 0 && value <= std::numeric_limits<blasint>::max(), "BLAS argument ", what,
           " = ", value, " is outside the BLAS index range");
  return static_cast<blasint>(value);
}

CBLAS_TRANSPOSE to_cblas(Op op) { return op == Op::kNone ? CblasNoTrans : CblasTrans; }

}  // namespace

void sgemm(Op op_a, Op op_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc) {
  // Row-major storage needs lda >= number of stored columns.
  SW_CHECK(lda >= std::max<std::int64_t>(1, op_a == Op::kNone ? k : m), "sgemm lda ", lda);
  SW_CHECK(ldb >= std::max<std::int64_t>(1, op_b == Op::kNone ? n : k), "sgemm ldb ", ldb);
  SW_CHECK(ldc >= std::max<std::int64_t>(1, n), "sgemm ldc ", ldc);
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, to_cblas(op_a), to_cblas(op_b), to_blas_int(m, "m"),
              to_blas_int(n, "n"), to_blas_int(k, "k"), alpha, a, to_blas_int(lda, "lda"), b,
              to_blas_int(ldb, "ldb"), beta, c, to_blas_int(ldc, "ldc"));
}

void ssyrk(Op op_a, std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
           float beta, float* c, std::int64_t ldc) {
  SW_CHECK(lda >= std::max<std::int64_t>(1, op_a == Op::kNone ? k : n), "ssyrk lda ", lda);
  SW_CHECK(ldc >= std::max<std::int64_t>(1, n), "ssyrk ldc ", ldc);
  if (n == 0) return;
  cblas_ssyrk(CblasRowMajor, CblasUpper, to_cblas(op_a), to_blas_int(n, "n"), to_blas_int(k, "k"),
              alpha, a, to_blas_int(lda, "lda"), beta, c, to_blas_int(ldc, "ldc"));
}

void fill_lower_from_upper(std::int64_t n, float* c, std::int64_t ldc) {
  // Tiled so both the row reads and the column writes stay in cache.
  constexpr std::int64_t kTile = 64;
  for (std::int64_t i0 = 0; i0 < n; i0 += kTile) {
    for (std::int64_t j0 = 0; j0 <= i0; j0 += kTile) {
      const std::int64_t i1 = std::min(n, i0 + kTile);
      const std::int64_t j1 = std::min(n, j0 + kTile);
      for (std::int64_t i = i0; i < i1; ++i) {
        for (std::int64_t j = j0; j < std::min(j1, i); ++j) c[i * ldc + j] = c[j * ldc + i];
      }
    }
  }
}

int num_threads() { return openblas_get_num_threads(); }

void set_num_threads(int threads) {
  SW_REQUIRE(threads >= 1, InvalidArgument, "BLAS thread count must be >= 1, got ", threads);
  openblas_set_num_threads(threads);
}

std::string library_config() {
  return str_cat(openblas_get_config(), " core=", openblas_get_corename());  // "OpenBLAS 0.3.x ..."
}

}  // namespace shardwise::blas
