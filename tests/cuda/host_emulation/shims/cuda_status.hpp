// Host stand-ins for the CUDA runtime and cuBLAS calls of src/cuda/newton_schulz_cuda.cpp,
// muon_cuda.cpp and the device GPT's host code (used in place of src/cuda/cuda_status.hpp by
// cuda_host_emulation_test): the column-major cuBLAS products run as CBLAS column-major products
// with the same arguments, bf16 operands widen exactly, a bf16 output rounds once from fp32, and
// SYRK leaves garbage in the triangle cuBLAS leaves undefined, so a missing mirror shows. Device
// memory is host memory; streams do nothing.
#pragma once

#include <cblas.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "shardwise/core/error.hpp"
#include "shardwise/core/float_convert.hpp"

namespace shardwise::cuda {
class CudaError : public Error {
 public:
  using Error::Error;
};
}  // namespace shardwise::cuda

using cublasHandle_t = struct EmulatedHandle*;
using cudaStream_t = struct EmulatedStream*;
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS };
enum cudaError_t { cudaSuccess };
enum cublasOperation_t { CUBLAS_OP_N, CUBLAS_OP_T };
enum cublasFillMode_t { CUBLAS_FILL_MODE_UPPER };
enum cudaDataType { CUDA_R_32F, CUDA_R_16BF };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT };
enum cublasMath_t { CUBLAS_DEFAULT_MATH, CUBLAS_TF32_TENSOR_OP_MATH };
enum cudaMemcpyKind { cudaMemcpyDeviceToDevice, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost };

inline cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = nullptr;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
inline cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) {
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) {
  return CUBLAS_STATUS_SUCCESS;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind,
                                   cudaStream_t) {
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

namespace shardwise::cuda::emulation {

// A column-major rows x cols operand (leading dimension ld) of `type` as fp32.
// A rows x cols column-major operand with leading dimension ld as fp32. Reads only what cuBLAS
// reads: the last column ends at row `rows`, so a block at the end of a larger matrix (the
// batched symmetric products) is not read past its end; the tail of the copy stays zero.
inline std::vector<float> widen(const void* p, cudaDataType type, int rows, int ld, int cols) {
  std::vector<float> v(static_cast<std::size_t>(ld) * static_cast<std::size_t>(cols), 0.0f);
  const std::size_t n = cols == 0
                            ? 0
                            : static_cast<std::size_t>(ld) * static_cast<std::size_t>(cols - 1) +
                                  static_cast<std::size_t>(rows);
  if (type == CUDA_R_32F) {
    std::memcpy(v.data(), p, n * sizeof(float));
  } else {
    for (std::size_t i = 0; i < n; ++i) v[i] = bf16_to_float(static_cast<const bf16_bits*>(p)[i]);
  }
  return v;
}

inline CBLAS_TRANSPOSE transpose(cublasOperation_t op) {
  return op == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
}

}  // namespace shardwise::cuda::emulation

inline cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t op_a, cublasOperation_t op_b,
                                   int m, int n, int k, const float* alpha, const void* a,
                                   cudaDataType type_a, int lda, const void* b, cudaDataType type_b,
                                   int ldb, const float* beta, void* c, cudaDataType type_c,
                                   int ldc, cublasComputeType_t, cublasGemmAlgo_t) {
  using namespace shardwise::cuda::emulation;
  const std::vector<float> av =
      op_a == CUBLAS_OP_N ? widen(a, type_a, m, lda, k) : widen(a, type_a, k, lda, m);
  const std::vector<float> bv =
      op_b == CUBLAS_OP_N ? widen(b, type_b, k, ldb, n) : widen(b, type_b, n, ldb, k);
  if (type_c == CUDA_R_32F) {
    cblas_sgemm(CblasColMajor, transpose(op_a), transpose(op_b), m, n, k, *alpha, av.data(), lda,
                bv.data(), ldb, *beta, static_cast<float*>(c), ldc);
    return CUBLAS_STATUS_SUCCESS;
  }
  // A bf16 C: alpha A B + beta C in fp32, rounded once on output.
  std::vector<float> cv = widen(c, type_c, m, ldc, n);
  cblas_sgemm(CblasColMajor, transpose(op_a), transpose(op_b), m, n, k, *alpha, av.data(), lda,
              bv.data(), ldb, *beta, cv.data(), ldc);
  auto* out = static_cast<shardwise::bf16_bits*>(c);
  for (std::int64_t j = 0; j < n; ++j) {
    for (std::int64_t i = 0; i < m; ++i) {
      out[i + j * ldc] = shardwise::float_to_bf16(cv[static_cast<std::size_t>(i + j * ldc)]);
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
    const float* alpha, const void* a, cudaDataType type_a, int lda, long long stride_a,
    const void* b, cudaDataType type_b, int ldb, long long stride_b, const float* beta, void* c,
    cudaDataType type_c, int ldc, long long stride_c, int count, cublasComputeType_t compute,
    cublasGemmAlgo_t algo) {
  auto bytes = [](cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; };
  for (int i = 0; i < count; ++i) {
    cublasGemmEx(handle, op_a, op_b, m, n, k, alpha,
                 static_cast<const char*>(a) + i * stride_a * bytes(type_a), type_a, lda,
                 static_cast<const char*>(b) + i * stride_b * bytes(type_b), type_b, ldb, beta,
                 static_cast<char*>(c) + i * stride_c * bytes(type_c), type_c, ldc, compute, algo);
  }
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasSsyrk(cublasHandle_t, cublasFillMode_t, cublasOperation_t op, int n,
                                  int k, const float* alpha, const float* a, int lda,
                                  const float* beta, float* c, int ldc) {
  using namespace shardwise::cuda::emulation;
  cblas_ssyrk(CblasColMajor, CblasUpper, transpose(op), n, k, *alpha, a, lda, *beta, c, ldc);
  for (std::int64_t j = 0; j < n; ++j) {
    for (std::int64_t i = j + 1; i < n; ++i) c[i + j * ldc] = 1e30f;  // undefined in cuBLAS
  }
  return CUBLAS_STATUS_SUCCESS;
}

inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
enum cudaMemoryType {
  cudaMemoryTypeUnregistered,
  cudaMemoryTypeHost,
  cudaMemoryTypeDevice,
  cudaMemoryTypeManaged
};
struct cudaPointerAttributes {
  cudaMemoryType type = cudaMemoryTypeUnregistered;
};
// Host memory stands in for device memory: every pointer counts as a device pointer.
inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void*) {
  attributes->type = cudaMemoryTypeDevice;
  return cudaSuccess;
}

namespace shardwise::cuda {
inline bool gpu_available() { return true; }
}  // namespace shardwise::cuda

namespace shardwise::cuda::detail {
inline void check_cuda(cudaError_t, const char*) {}
inline void check_cublas(cublasStatus_t, const char*) {}
inline void check_launch(const char*) {}
inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }
}  // namespace shardwise::cuda::detail
