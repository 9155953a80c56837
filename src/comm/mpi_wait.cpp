#include "mpi_wait.hpp"

#include <chrono>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return str_cat("MPI error code ", rc);
  return std::string(text, static_cast<std::size_t>(len));
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kBFloat16:
    case DType::kFloat16:
      return MPI_UINT16_T;  // moved as bits; reduced through fp32
    case DType::kFloat8E4M3:
    case DType::kFloat8E8M0:
    case DType::kUInt8:
      return MPI_UINT8_T;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    default:  // storage-only dtypes are never communicated
      break;
  }
  throw InvariantError(str_cat("no MPI type for dtype ", dtype_safetensors_name(dtype)));
}

int wait_all_or_abort(int count, MPI_Request* requests, MPI_Status* statuses,
                      double timeout_seconds,
                      const std::function<CommWaitDescription()>& describe) {
  const auto start = std::chrono::steady_clock::now();
  int rc = MPI_SUCCESS;
  const bool finished = poll_until(
      [&] {
        int flag = 0;
        rc = MPI_Testall(count, requests, &flag, statuses);
        return rc != MPI_SUCCESS || flag != 0;
      },
      std::chrono::duration<double>(timeout_seconds), PollMode::kDrivesProgress);
  if (!finished) {
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    abort_on_comm_timeout(describe(), waited, timeout_seconds);
  }
  return rc;
}

void abort_on_comm_timeout(const CommWaitDescription& wait, double waited_seconds,
                           double timeout_seconds) {
  abort_world(comm_timeout_message(wait, waited_seconds, timeout_seconds), kCommTimeoutExitCode);
}

}  // namespace shardwise
