// Newton-Schulz on the GPU: cuBLAS for the three products of each step, small kernels
// (newton_schulz_kernels.cu) for the rest. cuBLAS is column-major: the row-major m x n short-side
// view X of the input is, to cuBLAS, the n x m matrix X^T, so each product of
// optim::NewtonSchulz is issued transposed (X X^T becomes (X^T)^T X^T, P X becomes X^T P^T);
// the m x m matrices are symmetric and read the same either way.
#include "shardwise/cuda/newton_schulz_cuda.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>
#include <vector>

#include "cublas_products.hpp"
#include "cuda_status.hpp"
#include "newton_schulz_kernels.hpp"
#include "reduction_kernels.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/cuda/device_buffer.hpp"
#include "shardwise/optim/newton_schulz_gram.hpp"

namespace shardwise::cuda {

using detail::check_cublas;
using detail::check_cuda;

struct detail::NewtonSchulzWorkspace {
  cublasHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  DeviceBuffer x, y;                      // the iterate and the next one (numel, fp32 or bf16)
  DeviceBuffer gram, poly;                // m x m (fp32 or bf16)
  DeviceBuffer q, t, r2;                  // Gram: Q and scratch (as gram), R^2 (fp32)
  DeviceBuffer partials, sum_of_squares;  // the input's squared norm (fp64)

  ~NewtonSchulzWorkspace() {
    if (handle != nullptr) cublasDestroy(handle);  // a destructor cannot throw
  }
};

namespace {

using detail::GemmTypes;
using detail::SymmetricMethod;
using detail::SymmetricOperand;
using detail::SymmetricPlan;
using Workspace = detail::NewtonSchulzWorkspace;

// One orthogonalization's shapes and types: m x n is the short-side view (m <= n), `wide` when it
// is the input itself; every GEMM input and the m x m matrices are of `types.input`.
struct Problem {
  bool wide;
  int m, n;
  std::int64_t numel;
  bool bf16;
  GemmTypes types;
  SymmetricPlan plan;         // X X^T and A A (R R in the Gram iteration)
  SymmetricPlan square_plan;  // Gram: P Q, P R, (P R) P, symmetric but not of the form x x^T
  std::size_t element_bytes() const { return bf16 ? 2 : 4; }
};

struct Coefficients {
  float a, b, c;
};

// To cuBLAS, X is X^T (n x m, ld n) when wide and X (m x n, ld m) when tall.
SymmetricOperand short_side(const Problem& p, const void* x) { return {x, p.wide, p.m, p.n}; }

// poly = b A + c A A: poly is first a copy of A (gram), then the symmetric product's C.
void polynomial(const Workspace& w, const Problem& p, Coefficients k) {
  const auto mm = static_cast<std::size_t>(p.m) * static_cast<std::size_t>(p.m);
  check_cuda(cudaMemcpyAsync(w.poly.data(), w.gram.data(), mm * p.element_bytes(),
                             cudaMemcpyDeviceToDevice, w.stream),
             "cudaMemcpyAsync (A into the polynomial)");
  detail::symmetric_product(w.handle, w.stream, p.types, p.plan, {w.gram.data(), false, p.m, p.m},
                            k.c, k.b, w.poly.data(), "symmetric product (A A)");
}

// y = P X + beta y (wide) or X P + beta y (tall), P m x m, X the iterate; y of `types.output`.
void apply_polynomial(const Workspace& w, const Problem& p, GemmTypes types, const void* poly,
                      const void* x, float beta, void* y) {
  if (p.wide) {  // (P X)^T = X^T P^T: n x m
    detail::gemm(w.handle, types, CUBLAS_OP_N, CUBLAS_OP_N, p.n, p.m, p.m, 1.0f, x, p.n, poly, p.m,
                 beta, y, p.n, "cublasGemmEx (P X)");
  } else {  // (X P)^T = P^T X^T: m x n
    detail::gemm(w.handle, types, CUBLAS_OP_N, CUBLAS_OP_N, p.m, p.n, p.m, 1.0f, poly, p.m, x, p.m,
                 beta, y, p.m, "cublasGemmEx (X P)");
  }
}

// One fp32 / TF32 step: y = (a I + b A + c A A) X with a folded into the diagonal.
void fp32_step(const Workspace& w, const Problem& p, Coefficients k, void* y) {
  detail::symmetric_product(w.handle, w.stream, p.types, p.plan, short_side(p, w.x.data()), 1.0f,
                            0.0f, w.gram.data(), "symmetric product (X X^T)");
  polynomial(w, p, k);
  detail::launch_add_diagonal(w.poly.as<float>(), p.m, k.a, w.stream);
  apply_polynomial(w, p, p.types, w.poly.data(), w.x.data(), 0.0f, y);
}

// One bf16 step with the rounding points of optim::NewtonSchulz and no rounding passes: X is
// bf16 already (rounded when the step before wrote it), A = X X^T and B = b A + c A A come out
// of cuBLAS rounded once from their fp32 accumulation, and y = a X + B X adds the exact a X as
// the GEMM's C (a bf16 copy of X) before the one rounding of y, which the CPU does when the next
// step rounds X. The last step writes fp32, as the CPU's output is.
void bf16_step(const Workspace& w, const Problem& p, Coefficients k, bool last, float* out) {
  detail::symmetric_product(w.handle, w.stream, p.types, p.plan, short_side(p, w.x.data()), 1.0f,
                            0.0f, w.gram.data(), "symmetric product (X X^T)");
  polynomial(w, p, k);
  if (last) {
    detail::launch_widen_bf16(w.x.as<std::uint16_t>(), out, p.numel, w.stream);
    const GemmTypes to_fp32{CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    apply_polynomial(w, p, to_fp32, w.poly.data(), w.x.data(), k.a, out);
    return;
  }
  check_cuda(cudaMemcpyAsync(w.y.data(), w.x.data(), static_cast<std::size_t>(p.numel) * 2,
                             cudaMemcpyDeviceToDevice, w.stream),
             "cudaMemcpyAsync (X into the next iterate)");
  apply_polynomial(w, p, p.types, w.poly.data(), w.x.data(), k.a, w.y.data());
}

// How the Gram iteration's m x m products with symmetric results are formed: on blocks whenever
// the symmetric products are not plain GEMMs (SYRK needs the form x x^T, so fp32 takes blocks
// there too).
SymmetricPlan gram_square_plan(const optim::NewtonSchulzOptions& o,
                               const NewtonSchulzCudaTuning& tuning, int m) {
  if (!o.use_syrk) return {};
  const int levels = detail::blocked_levels(m, tuning.min_block, tuning.max_levels);
  if (levels == 0) return {};
  return {SymmetricMethod::kBlocked, levels};
}

// How X X^T and A A are formed (see NewtonSchulzCudaTuning).
SymmetricPlan symmetric_plan(const optim::NewtonSchulzOptions& o, bool allow_tf32,
                             const NewtonSchulzCudaTuning& tuning, int m) {
  if (!o.use_syrk) return {};
  const bool cuda_cores = o.precision == optim::MatmulPrecision::kFp32 && !allow_tf32;
  if (cuda_cores && m >= tuning.syrk_min_side) return {SymmetricMethod::kSyrk, 0};
  const int levels = detail::blocked_levels(m, tuning.min_block, tuning.max_levels);
  if (levels == 0) return {};
  return {SymmetricMethod::kBlocked, levels};
}

// y = Q X (wide) or X Q (tall) with Q symmetric: the standard step's product with beta = 0.
void apply_q(const Workspace& w, const Problem& p, GemmTypes types, const void* q, const void* x,
             void* y) {
  apply_polynomial(w, p, types, q, x, 0.0f, y);
}

// c = a b for m x m matrices whose product is symmetric (optim's symmetric_result_product).
void square_product(const Workspace& w, const Problem& p, const DeviceBuffer& a,
                    const DeviceBuffer& b, DeviceBuffer& c, const char* what) {
  detail::symmetric_result_product(w.handle, w.stream, p.types, p.square_plan, a.data(), b.data(),
                                   p.m, c.data(), what);
}

// P = c R^2 + b R + a I into w.poly, with R^2 in fp32 (w.r2).
void gram_polynomial(const Workspace& w, const Problem& p, Coefficients k) {
  const GemmTypes to_fp32{p.types.input, CUDA_R_32F, p.types.compute};
  detail::symmetric_product(w.handle, w.stream, to_fp32, p.plan, {w.gram.data(), false, p.m, p.m},
                            1.0f, 0.0f, w.r2.data(), "symmetric product (R R)");
  if (p.bf16) {
    detail::launch_gram_polynomial(w.r2.as<float>(), w.gram.as<std::uint16_t>(),
                                   w.poly.as<std::uint16_t>(), p.m, k.a, k.b, k.c, w.stream);
  } else {
    detail::launch_gram_polynomial(w.r2.as<float>(), w.gram.as<float>(), w.poly.as<float>(), p.m,
                                   k.a, k.b, k.c, w.stream);
  }
}

// Gram Newton-Schulz (optim/newton_schulz_gram.hpp) from the normalised X in w.x, with the CPU
// path's restarts, products and rounding points; R lives in w.gram, P in w.poly, Q in w.q.
void gram_iteration(Workspace& w, const Problem& p, const optim::NewtonSchulzOptions& o,
                    float* out) {
  const std::vector<int> restarts = optim::gram_restart_steps(o);
  const auto is_restart = [&](int step) {
    return std::find(restarts.begin(), restarts.end(), step) != restarts.end();
  };
  const auto form_gram = [&] {
    detail::symmetric_product(w.handle, w.stream, p.types, p.plan, short_side(p, w.x.data()), 1.0f,
                              0.0f, w.gram.data(), "symmetric product (X X^T)");
  };
  form_gram();
  bool q_is_identity = true;
  for (int step = 0; step < o.steps; ++step) {
    if (is_restart(step)) {  // X <- Q X, R <- X X^T, Q <- I
      apply_q(w, p, p.types, w.q.data(), w.x.data(), w.y.data());
      std::swap(w.x, w.y);
      form_gram();
      q_is_identity = true;
    }
    const optim::NsStepCoefficients c = optim::ns_coefficients(o.coefficients, step);
    gram_polynomial(w, p,
                    {static_cast<float>(c[0]), static_cast<float>(c[1]), static_cast<float>(c[2])});
    if (q_is_identity) {
      std::swap(w.q, w.poly);
    } else {
      square_product(w, p, w.poly, w.q, w.t, "cublasGemmEx (P Q)");
      std::swap(w.q, w.t);
    }
    DeviceBuffer& poly = q_is_identity ? w.q : w.poly;
    DeviceBuffer& spare = q_is_identity ? w.poly : w.t;
    q_is_identity = false;
    if (step + 1 < o.steps && !is_restart(step + 1)) {  // R <- (P R) P
      square_product(w, p, poly, w.gram, spare, "cublasGemmEx (P R)");
      square_product(w, p, spare, poly, w.gram, "cublasGemmEx (P R P)");
    }
  }
  apply_q(w, p, {p.types.input, CUDA_R_32F, p.types.compute}, w.q.data(), w.x.data(), out);
}

void reserve_workspace(Workspace& w, const Problem& p, bool gram) {
  const std::size_t bytes = p.element_bytes();
  const auto mm = static_cast<std::size_t>(p.m) * static_cast<std::size_t>(p.m);
  if (gram) {
    w.q.reserve(mm * bytes);
    w.t.reserve(mm * bytes);
    w.r2.reserve(mm * sizeof(float));
  }
  w.x.reserve(static_cast<std::size_t>(p.numel) * bytes);
  w.y.reserve(static_cast<std::size_t>(p.numel) * bytes);
  w.gram.reserve(mm * bytes);
  w.poly.reserve(mm * bytes);
  w.partials.reserve(static_cast<std::size_t>(detail::sum_of_squares_partials(p.numel)) *
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
  // The math mode only matters for cublasSsyrk (used without TF32 only); the GEMMs name their
  // compute type.
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
  const bool wide = rows <= cols;
  const int m = static_cast<int>(wide ? rows : cols);
  const cudaDataType type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      allow_tf32_ && !bf16 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const Problem p{wide,
                  m,
                  static_cast<int>(wide ? cols : rows),
                  numel,
                  bf16,
                  {type, type, compute},
                  symmetric_plan(options_, allow_tf32_, tuning_, m),
                  gram_square_plan(options_, tuning_, m)};
  const bool gram = options_.algorithm == optim::NsAlgorithm::kGram;
  reserve_workspace(w, p, gram);

  detail::launch_sum_of_squares_partials(g, numel, w.partials.as<double>(), w.stream);
  detail::launch_sum_partials(w.partials.as<double>(), detail::sum_of_squares_partials(numel),
                              w.sum_of_squares.as<double>(), w.stream);
  const double* sum = w.sum_of_squares.as<double>();
  if (options_.steps == 0) {  // the normalisation alone, in fp32 as the CPU's
    detail::launch_normalise(sum, options_.eps, g, out, numel, w.stream);
    return;
  }
  if (bf16) {
    detail::launch_normalise_to_bf16(sum, options_.eps, g, w.x.as<std::uint16_t>(), numel,
                                     w.stream);
  } else {
    detail::launch_normalise(sum, options_.eps, g, w.x.as<float>(), numel, w.stream);
  }
  if (gram) {
    // TF32 products keep 10 mantissa bits, near bf16's 8 and far from fp32's 23: the Gram
    // restarts follow bf16's growth limit (without restarts, Q's growth of ~500 turned TF32
    // rounding into errors 5x those of the standard TF32 iteration on an H200).
    optim::NewtonSchulzOptions gram_options = options_;
    if (allow_tf32_ && !bf16 && gram_options.gram_growth_limit == 0.0) {
      gram_options.gram_growth_limit =
          optim::gram_default_growth_limit(optim::MatmulPrecision::kBf16);
    }
    gram_iteration(w, p, gram_options, out);
    return;
  }
  // The last step writes `out` (g is not read after the normalisation, so out may alias it).
  for (int step = 0; step < options_.steps; ++step) {
    const optim::NsStepCoefficients c = optim::ns_coefficients(options_.coefficients, step);
    const Coefficients k{static_cast<float>(c[0]), static_cast<float>(c[1]),
                         static_cast<float>(c[2])};
    const bool last = step + 1 == options_.steps;
    if (bf16) {
      bf16_step(w, p, k, last, out);
    } else {
      fp32_step(w, p, k, last ? out : w.y.as<float>());
    }
    std::swap(w.x, w.y);
  }
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
