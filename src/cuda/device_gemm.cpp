#include "device_gemm.hpp"

#include <climits>

#include "cuda_status.hpp"
#include "newton_schulz_kernels.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::cuda::detail {

namespace {

int as_int(std::int64_t v, const char* what) {
  SW_CHECK(v >= 0 && v <= INT_MAX, what, ": ", v, " does not fit cuBLAS's int");
  return static_cast<int>(v);
}

cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

}  // namespace

DeviceGemm::DeviceGemm(GemmPrecision precision, cudaStream_t stream)
    : precision_(precision), stream_(stream) {
  check_cublas(cublasCreate(&handle_), "cublasCreate");
  check_cublas(cublasSetStream(handle_, stream_), "cublasSetStream");
}

DeviceGemm::~DeviceGemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);  // a destructor cannot throw
}

// The operand as cuBLAS reads it: fp32 as it is, or rounded to bf16 in `bf16` (every element of
// every matrix of the batch, from the first to the last one read).
const void* DeviceGemm::input(const GemmOperand& operand, int batch, DeviceBuffer& bf16) {
  if (precision_ != GemmPrecision::kBf16) return operand.data;
  const std::int64_t count =
      (batch - 1) * operand.stride + (operand.rows - 1) * operand.ld + operand.cols;
  bf16.reserve(static_cast<std::size_t>(count) * sizeof(std::uint16_t));
  launch_round_to_bf16(operand.data, bf16.as<std::uint16_t>(), nullptr, count, stream_);
  return bf16.data();
}

void DeviceGemm::run(bool trans_a, bool trans_b, float alpha, const GemmOperand& a,
                     const GemmOperand& b, float beta, float* c, std::int64_t ldc, const char* what,
                     int batch, std::int64_t stride_c) {
  const std::int64_t m = trans_a ? a.cols : a.rows, k = trans_a ? a.rows : a.cols;
  const std::int64_t n = trans_b ? b.rows : b.cols;
  SW_CHECK((trans_b ? b.cols : b.rows) == k, what, ": inner dimensions ", k, " and ",
           trans_b ? b.cols : b.rows, " differ");
  const bool bf16 = precision_ == GemmPrecision::kBf16;
  const cudaDataType type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      precision_ == GemmPrecision::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const void* pa = input(a, batch, a16_);
  const void* pb = input(b, batch, b16_);
  // Column-major C^T (n x m) = op(B)^T op(A)^T: B first, flags unchanged.
  const int cn = as_int(n, what), cm = as_int(m, what), ck = as_int(k, what);
  const int lda = as_int(a.ld, what), ldb = as_int(b.ld, what), ldcc = as_int(ldc, what);
  if (batch == 1) {
    check_cublas(
        cublasGemmEx(handle_, op(trans_b), op(trans_a), cn, cm, ck, &alpha, pb, type, ldb, pa, type,
                     lda, &beta, c, CUDA_R_32F, ldcc, compute, CUBLAS_GEMM_DEFAULT),
        what);
    return;
  }
  check_cublas(
      cublasGemmStridedBatchedEx(handle_, op(trans_b), op(trans_a), cn, cm, ck, &alpha, pb, type,
                                 ldb, b.stride, pa, type, lda, a.stride, &beta, c, CUDA_R_32F, ldcc,
                                 stride_c, batch, compute, CUBLAS_GEMM_DEFAULT),
      what);
}

}  // namespace shardwise::cuda::detail
