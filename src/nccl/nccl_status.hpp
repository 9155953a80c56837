// CUDA and NCCL statuses turned into shardwise errors naming the failing call, the types NCCL
// moves our dtypes as, and a guard that makes one device current (private to shardwise_nccl).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/core/dtype.hpp"

namespace shardwise::nccl_detail {

// Throws CommError "<what> failed: <error name>: <error string>" unless cudaSuccess.
void check_cuda(cudaError_t status, const char* what);
// Throws CommError "<what> failed: <NCCL's error string> (<last error>)" unless ncclSuccess.
void check_nccl(ncclResult_t status, const char* what);

// The NCCL type buffers of `dtype` travel as (fp8 and uint8 as raw bytes); throws
// InvalidArgument naming `where` for a dtype NCCL cannot move.
ncclDataType_t nccl_type(DType dtype, const std::string& where);
ncclRedOp_t nccl_op(ReduceOp op);

// Makes `device` current for its lifetime and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Throws InvalidArgument naming `device` unless it is a CUDA device of this process.
void require_device_exists(int device, const std::string& who);

}  // namespace shardwise::nccl_detail
