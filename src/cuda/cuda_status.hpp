// CUDA runtime and cuBLAS statuses turned into shardwise errors that name the failing call
// (private to shardwise_cuda; the public headers need no CUDA headers).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "shardwise/cuda/mxfp8_cuda.hpp"

namespace shardwise::cuda::detail {

// Throws CudaError "<what> failed: <error name>: <error string>" unless `status` is cudaSuccess.
void check_cuda(cudaError_t status, const char* what);

// Throws CudaError "<what> failed: <status name>: <status string>" unless CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t status, const char* what);

// Throws CudaError after a kernel launch that failed (bad configuration, no device, ...).
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace shardwise::cuda::detail
