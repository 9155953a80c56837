// Newton-Schulz on the GPU: cuBLAS for the three products of each step, small kernels
// (newton_schulz_kernels.cu) for the rest. cuBLAS is column-major: the row-major m x n short-side
// view X of the input is, to cuBLAS, the n x m matrix X^T, so each product of
// optim::NewtonSchulz is issued transposed (X X^T becomes (X^T)^T X^T, P X becomes X^T P^T);
// the m x m matrices are symmetric and read the same either way.
#include "shardwise/cuda/newton_schulz_cuda.hpp"

#include <climits>
#include <cstdint>
#include <utility>

#include "cuda_status.hpp"
#include "newton_schulz_kernels.hpp"
#include "reduction_kernels.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/cuda/device_buffer.hpp"

namespace shardwise::cuda {

using detail::check_cublas;
using detail::check_cuda;

struct detail::NewtonSchulzWorkspace {
  cublasHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  DeviceBuffer x, y;                      // fp32 iterate and next iterate (numel)
  DeviceBuffer gram, poly;                // fp32 m x m
  DeviceBuffer x16, gram16, poly16;       // bf16 copies of the GEMM inputs (bf16 precision only)
  DeviceBuffer partials, sum_of_squares;  // the input's squared norm (fp64)

  ~NewtonSchulzWorkspace() {
    if (handle != nullptr) cublasDestroy(handle);  // a destructor cannot throw
  }
  float* xf() const { return x.as<float>(); }
  float* yf() const { return y.as<float>(); }
};

namespace {

using Workspace = detail::NewtonSchulzWorkspace;

// One step's shapes: m x n is the short-side view (m <= n), `wide` when it is the input itself.
struct StepShape {
  bool wide;
  int m, n;
};

struct Coefficients {
  float a, b, c;
};

// C (fp32, column-major) = alpha op(A) op(B) + beta C with A, B of `type` (fp32 or bf16).
void gemm(const Workspace& w, cublasComputeType_t compute, cudaDataType type,
          cublasOperation_t op_a, cublasOperation_t op_b, int rows, int cols, int depth,
          float alpha, const void* a, int lda, const void* b, int ldb, float beta, float* c,
          int ldc, const char* what) {
  check_cublas(cublasGemmEx(w.handle, op_a, op_b, rows, cols, depth, &alpha, a, type, lda, b, type,
                            ldb, &beta, c, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT),
               what);
}

// gram = X X^T (m x m) from the fp32 or bf16 iterate `x`; SYRK (upper triangle, then mirrored)
// for fp32 when asked, otherwise a GEMM writing both triangles.
void gram_product(const Workspace& w, StepShape s, cublasComputeType_t compute, cudaDataType type,
                  const void* x, bool syrk) {
  float* gram = w.gram.as<float>();
  // To cuBLAS, X is X^T (n x m, ld n) when wide and X (m x n, ld m) when tall.
  const cublasOperation_t first = s.wide ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ld = s.wide ? s.n : s.m;
  if (syrk) {
    const float one = 1.0f, zero = 0.0f;
    check_cublas(cublasSsyrk(w.handle, CUBLAS_FILL_MODE_UPPER, first, s.m, s.n, &one,
                             static_cast<const float*>(x), ld, &zero, gram, s.m),
                 "cublasSsyrk (X X^T)");
    detail::launch_mirror_upper(gram, s.m, w.stream);
    return;
  }
  const cublasOperation_t second = s.wide ? CUBLAS_OP_N : CUBLAS_OP_T;
  gemm(w, compute, type, first, second, s.m, s.m, s.n, 1.0f, x, ld, x, ld, 0.0f, gram, s.m,
       "cublasGemmEx (X X^T)");
}

// poly = b A + c A A, where poly already holds A (fp32) and `a_in` is A as a GEMM input.
void polynomial(const Workspace& w, StepShape s, cublasComputeType_t compute, cudaDataType type,
                const void* a_in, Coefficients k, bool syrk) {
  float* poly = w.poly.as<float>();
  if (syrk) {
    check_cublas(cublasSsyrk(w.handle, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_N, s.m, s.m, &k.c,
                             static_cast<const float*>(a_in), s.m, &k.b, poly, s.m),
                 "cublasSsyrk (A A)");
    detail::launch_mirror_upper(poly, s.m, w.stream);
    return;
  }
  gemm(w, compute, type, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.m, s.m, k.c, a_in, s.m, a_in, s.m, k.b,
       poly, s.m, "cublasGemmEx (A A)");
}

// y = P X + beta y (wide) or X P + beta y (tall), P m x m, X the iterate as a GEMM input.
void apply_polynomial(const Workspace& w, StepShape s, cublasComputeType_t compute,
                      cudaDataType type, const void* p, const void* x, float beta) {
  if (s.wide) {  // (P X)^T = X^T P^T: n x m
    gemm(w, compute, type, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.m, 1.0f, x, s.n, p, s.m, beta,
         w.yf(), s.n, "cublasGemmEx (P X)");
  } else {  // (X P)^T = P^T X^T: m x n
    gemm(w, compute, type, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n, s.m, 1.0f, p, s.m, x, s.m, beta,
         w.yf(), s.m, "cublasGemmEx (X P)");
  }
}

// One fp32 / TF32 step: X <- (a I + b A + c A A) X with a folded into the diagonal.
void fp32_step(const Workspace& w, StepShape s, cublasComputeType_t compute, Coefficients k,
               bool syrk) {
  gram_product(w, s, compute, CUDA_R_32F, w.xf(), syrk);
  const auto mm = static_cast<std::size_t>(s.m) * static_cast<std::size_t>(s.m);
  check_cuda(cudaMemcpyAsync(w.poly.data(), w.gram.data(), mm * sizeof(float),
                             cudaMemcpyDeviceToDevice, w.stream),
             "cudaMemcpyAsync (A into the polynomial)");
  polynomial(w, s, compute, CUDA_R_32F, w.gram.data(), k, syrk);
  detail::launch_add_diagonal(w.poly.as<float>(), s.m, k.a, w.stream);
  apply_polynomial(w, s, compute, CUDA_R_32F, w.poly.data(), w.xf(), 0.0f);
}

// One bf16 step, rounding where optim::NewtonSchulz rounds: X, A and B (= b A + c A A) go into
// the GEMMs as bf16; a X is added in fp32 from the rounded X, which the rounding pass writes
// straight into y (the GEMM's C with beta = a) instead of copying it there afterwards.
void bf16_step(const Workspace& w, StepShape s, std::int64_t numel, Coefficients k) {
  const auto mm = static_cast<std::int64_t>(s.m) * s.m;
  auto* x16 = w.x16.as<std::uint16_t>();
  detail::launch_round_to_bf16(w.xf(), x16, w.yf(), numel, w.stream);
  gram_product(w, s, CUBLAS_COMPUTE_32F, CUDA_R_16BF, x16, false);
  // gram16 = bf16(A); poly = A rounded, in fp32, ready for beta = b.
  detail::launch_round_to_bf16(w.gram.as<float>(), w.gram16.as<std::uint16_t>(), w.poly.as<float>(),
                               mm, w.stream);
  polynomial(w, s, CUBLAS_COMPUTE_32F, CUDA_R_16BF, w.gram16.data(), k, false);
  detail::launch_round_to_bf16(w.poly.as<float>(), w.poly16.as<std::uint16_t>(), nullptr, mm,
                               w.stream);
  apply_polynomial(w, s, CUBLAS_COMPUTE_32F, CUDA_R_16BF, w.poly16.data(), x16, k.a);
}

void reserve_workspace(Workspace& w, std::int64_t numel, std::int64_t m, bool bf16) {
  const auto n = static_cast<std::size_t>(numel);
  const auto mm = static_cast<std::size_t>(m * m);
  w.x.reserve(n * sizeof(float));
  w.y.reserve(n * sizeof(float));
  w.gram.reserve(mm * sizeof(float));
  w.poly.reserve(mm * sizeof(float));
  if (bf16) {
    w.x16.reserve(n * sizeof(std::uint16_t));
    w.gram16.reserve(mm * sizeof(std::uint16_t));
    w.poly16.reserve(mm * sizeof(std::uint16_t));
  }
  w.partials.reserve(static_cast<std::size_t>(detail::sum_of_squares_partials(numel)) *
                     sizeof(double));
  w.sum_of_squares.reserve(sizeof(double));
}

}  // namespace

NewtonSchulzCuda::NewtonSchulzCuda(optim::NewtonSchulzOptions options, bool allow_tf32,
                                   void* stream)
    : options_(options),
      allow_tf32_(allow_tf32),
      stream_(stream),
      workspace_(std::make_unique<detail::NewtonSchulzWorkspace>()) {
  static_cast<void>(optim::NewtonSchulz(options_));  // the CPU class validates steps and eps
  workspace_->stream = detail::as_stream(stream);
  check_cublas(cublasCreate(&workspace_->handle), "cublasCreate");
  check_cublas(cublasSetStream(workspace_->handle, workspace_->stream), "cublasSetStream");
  // The math mode only matters for cublasSsyrk; the GEMMs name their compute type.
  check_cublas(cublasSetMathMode(workspace_->handle,
                                 allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
               "cublasSetMathMode");
}

NewtonSchulzCuda::~NewtonSchulzCuda() = default;

void NewtonSchulzCuda::orthogonalize(const float* g, std::int64_t rows, std::int64_t cols,
                                     float* out) {
  SW_REQUIRE(rows >= 0 && cols >= 0, ShapeError, "NewtonSchulzCuda: a ", rows, " x ", cols,
             " matrix");
  SW_REQUIRE(rows <= INT_MAX && cols <= INT_MAX, ShapeError, "NewtonSchulzCuda: a ", rows, " x ",
             cols, " matrix exceeds cuBLAS's 32-bit dimensions");
  const std::int64_t numel = rows * cols;
  if (numel == 0) return;
  detail::NewtonSchulzWorkspace& w = *workspace_;
  const bool bf16 = options_.precision == optim::MatmulPrecision::kBf16;
  const StepShape s{rows <= cols, static_cast<int>(rows <= cols ? rows : cols),
                    static_cast<int>(rows <= cols ? cols : rows)};
  reserve_workspace(w, numel, s.m, bf16);

  detail::launch_sum_of_squares_partials(g, numel, w.partials.as<double>(), w.stream);
  detail::launch_sum_partials(w.partials.as<double>(), detail::sum_of_squares_partials(numel),
                              w.sum_of_squares.as<double>(), w.stream);
  detail::launch_normalise(w.sum_of_squares.as<double>(), options_.eps, g, w.xf(), numel, w.stream);

  const cublasComputeType_t compute =
      allow_tf32_ ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  for (int step = 0; step < options_.steps; ++step) {
    const optim::NsStepCoefficients c = optim::ns_coefficients(options_.coefficients, step);
    const Coefficients k{static_cast<float>(c[0]), static_cast<float>(c[1]),
                         static_cast<float>(c[2])};
    if (bf16) {
      bf16_step(w, s, numel, k);
    } else {
      fp32_step(w, s, compute, k, options_.use_syrk);
    }
    std::swap(w.x, w.y);
  }
  check_cuda(cudaMemcpyAsync(out, w.x.data(), static_cast<std::size_t>(numel) * sizeof(float),
                             cudaMemcpyDeviceToDevice, w.stream),
             "cudaMemcpyAsync (result)");
}

void NewtonSchulzCuda::orthogonalize_row_blocks(const float* g, std::int64_t rows,
                                                std::int64_t cols,
                                                std::span<const std::int64_t> row_split,
                                                float* out) {
  optim::for_each_row_block(rows, row_split, [&](std::int64_t first, std::int64_t r) {
    orthogonalize(g + first * cols, r, cols, out + first * cols);
  });
}

}  // namespace shardwise::cuda
