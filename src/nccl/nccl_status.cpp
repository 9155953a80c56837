#include "nccl_status.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise::nccl_detail {

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  throw CommError(
      str_cat(what, " failed: ", cudaGetErrorName(status), ": ", cudaGetErrorString(status)));
}

void check_nccl(ncclResult_t status, const char* what) {
  if (status == ncclSuccess) return;
  const char* last = ncclGetLastError(nullptr);
  throw CommError(str_cat(what, " failed: ", ncclGetErrorString(status),
                          last != nullptr && *last != '\0' ? str_cat(" (", last, ")") : ""));
}

ncclDataType_t nccl_type(DType dtype, const std::string& where) {
  switch (dtype) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kBFloat16:
      return ncclBfloat16;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kUInt8:
    case DType::kFloat8E4M3:
    case DType::kFloat8E8M0:
      return ncclUint8;  // moved as bytes, never reduced
    default:
      break;
  }
  throw InvalidArgument(str_cat(where, ": NCCL does not move ", dtype_name(dtype), " buffers"));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
  }
  throw InvariantError("unknown ReduceOp");
}

DeviceGuard::DeviceGuard(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

DeviceGuard::~DeviceGuard() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_) cudaSetDevice(previous_);
}

void require_device_exists(int device, const std::string& who) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) count = 0;
  SW_REQUIRE(device >= 0 && device < count, InvalidArgument, who, ": CUDA device ", device,
             " does not exist (", count, " device", count == 1 ? "" : "s", " visible",
             status != cudaSuccess ? str_cat("; cudaGetDeviceCount: ", cudaGetErrorString(status))
                                   : std::string(),
             ")");
}

}  // namespace shardwise::nccl_detail
