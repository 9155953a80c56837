// Row-major GEMMs on cuBLAS in one of the GemmPrecision modes (private to shardwise_cuda).
// cuBLAS is column-major: a row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T,
// so each call swaps the operands and keeps the transpose flags. In bf16 mode both inputs are
// rounded into bf16 workspaces first (fp32 accumulation, fp32 C).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "shardwise/cuda/device_buffer.hpp"
#include "shardwise/cuda/gemm_precision.hpp"

namespace shardwise::cuda::detail {

// One row-major operand: `rows` x `cols` as stored (before op), `ld` >= cols apart; `stride`
// between the matrices of a batch.
struct GemmOperand {
  const float* data;
  std::int64_t rows, cols, ld;
  std::int64_t stride = 0;
};

class DeviceGemm {
 public:
  DeviceGemm(GemmPrecision precision, cudaStream_t stream);
  ~DeviceGemm();
  DeviceGemm(const DeviceGemm&) = delete;
  DeviceGemm& operator=(const DeviceGemm&) = delete;

  // C[m, n] (ldc) = alpha op(A) op(B) + beta C for each of `batch` matrices (C `stride_c`
  // apart); op(A) is m x k, op(B) k x n. `what` names the product in errors.
  void run(bool trans_a, bool trans_b, float alpha, const GemmOperand& a, const GemmOperand& b,
           float beta, float* c, std::int64_t ldc, const char* what, int batch = 1,
           std::int64_t stride_c = 0);

  GemmPrecision precision() const { return precision_; }

 private:
  const void* input(const GemmOperand& operand, int batch, DeviceBuffer& bf16);

  GemmPrecision precision_;
  cudaStream_t stream_;
  cublasHandle_t handle_ = nullptr;
  DeviceBuffer a16_, b16_;
};

}  // namespace shardwise::cuda::detail
