// cuBLAS Newton-Schulz (one orthogonalization: normalisation and five quintic steps) on
// Llama-3-8B-shaped matrices next to the rate cuBLAS reaches on the same GEMMs, measured in the
// same run: the limit replays each step's three products (X X^T, A A, P X) as plain GEMMs of the
// same shapes, dtypes and compute type, without the element-wise work between them. Both rates
// count the nominal GEMM flops (optim::newton_schulz_gemm_flops: 4 m^2 n + 2 m^3 per step), so
// SYRK's halved products can put the ratio above 1. Prints
//   bench: newton_schulz_cuda_<fp32|tf32|bf16>_<rows>x<cols> ours=<TFLOP/s> limit=<TFLOP/s> ...
// (with use_syrk, the default: SYRK for large fp32, GEMMs on the upper triangle's blocks for TF32
// and bf16) and, for fp32 and TF32, the all-GEMM variant (use_syrk = false) as
// newton_schulz_cuda_<dtype>_gemm_<rows>x<cols>; for TF32 and bf16 a `note:` line with 512-row
// blocks allowed (NewtonSchulzCudaTuning::min_block = 512), the default's nearest alternative.
// Then Gram Newton-Schulz (optim/newton_schulz_gram.hpp) against the standard iteration, both
// with the defaults above, per dtype and shape:
//   bench: newton_schulz_gram_cuda_<dtype>_<rows>x<cols> ours=<standard ms> limit=<gram ms> ...
// (ratio = standard time / Gram time: 1.54 is 35% less time).
// Usage: bench_newton_schulz_cuda [iters=3]; exits 0 without a GPU (prints why).
#include "shardwise/cuda/newton_schulz_cuda.hpp"

#include <cublas_v2.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "cuda_bench_support.hpp"
#include "shardwise/core/float_convert.hpp"
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

// `count` uniform values in [-1, 1) as fp32 or bf16 in `buffer`: random data, since tensor cores
// run faster on constant or zero operands than on real ones.
void fill_random(DeviceBuffer& buffer, std::int64_t count, bool bf16) {
  std::vector<float> values(static_cast<std::size_t>(count));
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  for (float& v : values) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = static_cast<float>(static_cast<double>(state >> 40) / 8388608.0 - 1.0);
  }
  if (!bf16) {
    shardwise::cuda::copy_to_device(buffer.data(), values.data(), values.size() * 4);
    return;
  }
  std::vector<std::uint16_t> halves(values.size());
  shardwise::float_to_bf16_n(values.data(), halves.data(), count);
  shardwise::cuda::copy_to_device(buffer.data(), halves.data(), halves.size() * 2);
}

struct Precision {
  const char* name;
  MatmulPrecision matmul;
  bool tf32;
};

// Operands for the limit's GEMMs: inputs in the dtype NS feeds cuBLAS (fp32 or bf16), outputs
// fp32 as in NS, no output aliasing an input.
struct GemmOperands {
  DeviceBuffer x, a;           // m x n and m x m inputs
  DeviceBuffer gram, poly, y;  // fp32 outputs
  GemmOperands(std::int64_t m, std::int64_t n, bool bf16) {
    const std::size_t input_bytes = bf16 ? 2 : 4;
    x.reserve(static_cast<std::size_t>(m * n) * input_bytes);
    a.reserve(static_cast<std::size_t>(m * m) * input_bytes);
    gram.reserve(static_cast<std::size_t>(m * m) * 4);
    poly.reserve(static_cast<std::size_t>(m * m) * 4);
    y.reserve(static_cast<std::size_t>(m * n) * 4);
    fill_random(x, m * n, bf16);
    fill_random(a, m * m, bf16);
  }
};

// Seconds for `steps` x (X X^T, A A, P X) as cuBLAS GEMMs, m <= n (the wide view; a tall
// matrix costs the same products), in NS's dtypes and compute type.
double gemm_seconds(cublasHandle_t handle, const Precision& p, std::int64_t m64, std::int64_t n64,
                    int steps, int iters) {
  const bool bf16 = p.matmul == MatmulPrecision::kBf16;
  const cudaDataType type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute = p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const int m = static_cast<int>(m64), n = static_cast<int>(n64);
  GemmOperands o(m64, n64, bf16);
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&](cublasOperation_t ta, cublasOperation_t tb, int rows, int cols, int depth,
                  const void* a, int lda, const void* b, int ldb, void* c, int ldc) {
    check_cublas(cublasGemmEx(handle, ta, tb, rows, cols, depth, &one, a, type, lda, b, type, ldb,
                              &zero, c, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  };
  return time_gpu(
      iters,
      [&] {
        for (int s = 0; s < steps; ++s) {
          gemm(CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, o.x.data(), n, o.x.data(), n, o.gram.data(), m);
          gemm(CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, o.a.data(), m, o.a.data(), m, o.poly.data(), m);
          gemm(CUBLAS_OP_N, CUBLAS_OP_N, n, m, m, o.x.data(), n, o.a.data(), m, o.y.data(), n);
        }
      },
      1);
}

double ns_seconds(
    const Precision& p, bool syrk, Shape s, const DeviceBuffer& g, DeviceBuffer& out, int iters,
    shardwise::optim::NsAlgorithm algorithm = shardwise::optim::NsAlgorithm::kStandard,
    shardwise::cuda::NewtonSchulzCudaTuning tuning = {}) {
  shardwise::optim::NewtonSchulzOptions options;
  options.precision = p.matmul;
  options.use_syrk = syrk;
  options.algorithm = algorithm;
  shardwise::cuda::NewtonSchulzCuda ns(options, p.tf32);
  ns.set_tuning(tuning);
  return time_gpu(
      iters, [&] { ns.orthogonalize(g.as<float>(), s.rows, s.cols, out.as<float>()); }, 1);
}

void measure(cublasHandle_t handle, const Precision& p, Shape s, int iters) {
  const std::int64_t m = s.rows < s.cols ? s.rows : s.cols;
  const std::int64_t n = s.rows < s.cols ? s.cols : s.rows;
  const int steps = shardwise::optim::NewtonSchulzOptions{}.steps;
  const double flops = shardwise::optim::newton_schulz_gemm_flops(s.rows, s.cols, steps);
  DeviceBuffer g(static_cast<std::size_t>(m * n) * 4), out(static_cast<std::size_t>(m * n) * 4);
  fill_random(g, m * n, false);
  const double limit = flops / gemm_seconds(handle, p, m, n, steps, iters) * 1e-12;
  const bool bf16 = p.matmul == MatmulPrecision::kBf16;
  const double ours = flops / ns_seconds(p, true, s, g, out, iters) * 1e-12;
  const std::string name = std::string("newton_schulz_cuda_") + p.name + "_" +
                           std::to_string(s.rows) + "x" + std::to_string(s.cols);
  shardwise::cuda::bench::print_figure(name, ours, limit, "TFLOP/s");
  if (p.tf32 || bf16) {  // the default's alternative below 2048 rows: halve the diagonal once
    shardwise::cuda::NewtonSchulzCudaTuning half{};
    half.min_block = 512;
    const double t = ns_seconds(p, true, s, g, out, iters, {}, half);
    std::printf("note: %s with 512-row blocks (min_block = 512): %.2f TFLOP/s\n", name.c_str(),
                flops / t * 1e-12);
  }
  if (!bf16) {  // fp32 / TF32 default to SYRK; the all-GEMM variant is the other choice
    const double all_gemm = flops / ns_seconds(p, false, s, g, out, iters) * 1e-12;
    shardwise::cuda::bench::print_figure(std::string("newton_schulz_cuda_") + p.name + "_gemm_" +
                                             std::to_string(s.rows) + "x" + std::to_string(s.cols),
                                         all_gemm, limit, "TFLOP/s");
  }
}

void measure_gram(const Precision& p, Shape s, int iters) {
  DeviceBuffer g(static_cast<std::size_t>(s.rows * s.cols) * 4);
  DeviceBuffer out(static_cast<std::size_t>(s.rows * s.cols) * 4);
  fill_random(g, s.rows * s.cols, false);
  const double standard = ns_seconds(p, true, s, g, out, iters);
  const double gram = ns_seconds(p, true, s, g, out, iters, shardwise::optim::NsAlgorithm::kGram);
  shardwise::cuda::bench::print_figure(std::string("newton_schulz_gram_cuda_") + p.name + "_" +
                                           std::to_string(s.rows) + "x" + std::to_string(s.cols),
                                       standard * 1e3, gram * 1e3, "ms");
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
    for (const Precision& p : {Precision{"fp32", MatmulPrecision::kFp32, false},
                               Precision{"tf32", MatmulPrecision::kFp32, true},
                               Precision{"bf16", MatmulPrecision::kBf16, false}}) {
      for (const Shape& s : {Shape{4096, 4096}, Shape{4096, 14336}, Shape{1024, 4096}}) {
        measure_gram(p, s, iters);
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
