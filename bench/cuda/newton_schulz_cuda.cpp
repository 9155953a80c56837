// cuBLAS Newton-Schulz (one orthogonalization: normalisation and five quintic steps) on
// Llama-3-8B-shaped matrices next to the rate cuBLAS reaches on the same GEMMs, measured in the
// same run: the limit replays each step's three products (X X^T, A A, P X) as plain GEMMs of the
// same shapes, dtypes and compute type, without the element-wise work between them. Both rates
// count the nominal GEMM flops (optim::newton_schulz_gemm_flops: 4 m^2 n + 2 m^3 per step), so
// SYRK's halved products can put the ratio above 1. Prints
//   bench: newton_schulz_cuda_<fp32|tf32|bf16>_<rows>x<cols> ours=<TFLOP/s> limit=<TFLOP/s> ...
// and, for fp32 and TF32, the all-GEMM variant (use_syrk = false) as an extra line.
// Usage: bench_newton_schulz_cuda [iters=3]; exits 0 without a GPU (prints why).
#include "shardwise/cuda/newton_schulz_cuda.hpp"

#include <cublas_v2.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "cuda_bench_support.hpp"
#include "shardwise/cuda/device_buffer.hpp"
#include "shardwise/cuda/mxfp8_cuda.hpp"

namespace {

using shardwise::cuda::DeviceBuffer;
using shardwise::cuda::bench::check;
using shardwise::cuda::bench::time_gpu;
using shardwise::optim::MatmulPrecision;

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "bench: %s failed: %s\n", what, cublasGetStatusString(status));
    std::exit(1);
  }
}

struct Shape {
  std::int64_t rows, cols;
};

struct Precision {
  const char* name;
  MatmulPrecision matmul;
  bool tf32;
};

// Operands for the limit's GEMMs, in the dtype NS feeds cuBLAS (fp32 or bf16; C is fp32).
struct GemmOperands {
  DeviceBuffer x, gram, y;
  GemmOperands(std::int64_t m, std::int64_t n, std::size_t input_bytes) {
    x.reserve(static_cast<std::size_t>(m * n) * input_bytes);
    gram.reserve(static_cast<std::size_t>(m * m) * 4);
    y.reserve(static_cast<std::size_t>(m * n) * 4);
    check(cudaMemset(x.data(), 0x3c, x.bytes()), "cudaMemset");
    check(cudaMemset(gram.data(), 0x3c, gram.bytes()), "cudaMemset");
  }
};

// Seconds for `steps` x (X X^T, A A, P X) as cuBLAS GEMMs, m <= n (the wide view; a tall
// matrix costs the same products). A and P are read as the input dtype from the fp32 gram buffer
// (its bytes are ordinary values either way; only the rate is of interest).
double gemm_seconds(cublasHandle_t handle, const Precision& p, std::int64_t m64, std::int64_t n64,
                    int steps, int iters) {
  const bool bf16 = p.matmul == MatmulPrecision::kBf16;
  const cudaDataType type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute = p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const int m = static_cast<int>(m64), n = static_cast<int>(n64);
  GemmOperands o(m64, n64, bf16 ? 2 : 4);
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&](cublasOperation_t ta, cublasOperation_t tb, int rows, int cols, int depth,
                  const void* a, int lda, const void* b, int ldb, float* c, int ldc) {
    check_cublas(cublasGemmEx(handle, ta, tb, rows, cols, depth, &one, a, type, lda, b, type, ldb,
                              &zero, c, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  };
  return time_gpu(
      iters,
      [&] {
        for (int s = 0; s < steps; ++s) {
          gemm(CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, o.x.data(), n, o.x.data(), n, o.gram.as<float>(),
               m);
          gemm(CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, o.gram.data(), m, o.gram.data(), m,
               o.gram.as<float>(), m);
          gemm(CUBLAS_OP_N, CUBLAS_OP_N, n, m, m, o.x.data(), n, o.gram.data(), m, o.y.as<float>(),
               n);
        }
      },
      1);
}

double ns_seconds(const Precision& p, bool syrk, Shape s, const DeviceBuffer& g, DeviceBuffer& out,
                  int iters) {
  shardwise::optim::NewtonSchulzOptions options;
  options.precision = p.matmul;
  options.use_syrk = syrk;
  shardwise::cuda::NewtonSchulzCuda ns(options, p.tf32);
  return time_gpu(
      iters, [&] { ns.orthogonalize(g.as<float>(), s.rows, s.cols, out.as<float>()); }, 1);
}

void measure(cublasHandle_t handle, const Precision& p, Shape s, int iters) {
  const std::int64_t m = s.rows < s.cols ? s.rows : s.cols;
  const std::int64_t n = s.rows < s.cols ? s.cols : s.rows;
  const int steps = shardwise::optim::NewtonSchulzOptions{}.steps;
  const double flops = shardwise::optim::newton_schulz_gemm_flops(s.rows, s.cols, steps);
  DeviceBuffer g(static_cast<std::size_t>(m * n) * 4), out(static_cast<std::size_t>(m * n) * 4);
  check(cudaMemset(g.data(), 0x3c, g.bytes()), "cudaMemset");
  const double limit = flops / gemm_seconds(handle, p, m, n, steps, iters) * 1e-12;
  const bool bf16 = p.matmul == MatmulPrecision::kBf16;
  const double ours = flops / ns_seconds(p, !bf16, s, g, out, iters) * 1e-12;
  const std::string name = std::string("newton_schulz_cuda_") + p.name + "_" +
                           std::to_string(s.rows) + "x" + std::to_string(s.cols);
  if (!bf16) {
    const double all_gemm = flops / ns_seconds(p, false, s, g, out, iters) * 1e-12;
    std::printf("  %-40s SYRK %7.1f  all-GEMM %7.1f  cuBLAS GEMM %7.1f TFLOP/s\n", name.c_str(),
                ours, all_gemm, limit);
  } else {
    std::printf("  %-40s GEMM %7.1f  cuBLAS GEMM %7.1f TFLOP/s\n", name.c_str(), ours, limit);
  }
  shardwise::cuda::bench::print_figure(name, ours, limit, "TFLOP/s");
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 3;
  if (!shardwise::cuda::gpu_available()) {
    std::printf("bench_newton_schulz_cuda: no CUDA device, nothing measured\n");
    return 0;
  }
  try {
    shardwise::cuda::bench::print_device();
    cublasHandle_t handle = nullptr;
    check_cublas(cublasCreate(&handle), "cublasCreate");
    // Llama-3-8B: attention (4096 x 4096), MLP (4096 x 14336), GQA key/value (1024 x 4096).
    for (const Precision& p : {Precision{"fp32", MatmulPrecision::kFp32, false},
                               Precision{"tf32", MatmulPrecision::kFp32, true},
                               Precision{"bf16", MatmulPrecision::kBf16, false}}) {
      for (const Shape& s : {Shape{4096, 4096}, Shape{4096, 14336}, Shape{1024, 4096}}) {
        measure(handle, p, s, iters);
      }
    }
    cublasDestroy(handle);
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_newton_schulz_cuda: %s\n", e.what());
    return 1;
  }
  return 0;
}
