#include "cuda_status.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise::cuda::detail {

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  throw CudaError(
      str_cat(what, " failed: ", cudaGetErrorName(status), ": ", cudaGetErrorString(status)));
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(
      str_cat(what, " failed: ", cublasGetStatusName(status), ": ", cublasGetStatusString(status)));
}

}  // namespace shardwise::cuda::detail
