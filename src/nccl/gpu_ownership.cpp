#include "shardwise/nccl/gpu_ownership.hpp"

#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "gpu_sharing.hpp"
#include "nccl_status.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/logging.hpp"

namespace shardwise {

namespace {

// A device's 16-byte UUID followed by one byte saying whether the device exists.
constexpr std::size_t kUuidBytes = 16;
constexpr std::size_t kEntryBytes = kUuidBytes + 1;

std::string uuid_text(const std::uint8_t* uuid) {
  static const char* hex = "0123456789abcdef";
  std::string text;
  for (std::size_t i = 0; i < kUuidBytes; ++i) {
    text += hex[uuid[i] >> 4];
    text += hex[uuid[i] & 15];
  }
  return text;
}

}  // namespace

std::string describe_shared_gpu(const ProcessGroupPtr& host_group, int device) {
  SW_REQUIRE(host_group != nullptr, InvalidArgument, "every_rank_has_own_gpu: no host group");
  const int rank = host_group->rank();
  const int size = host_group->size();
  const std::string who =
      str_cat("every_rank_has_own_gpu on group ", host_group->name(), " (rank ", rank, ")");
  std::vector<std::uint8_t> entries(kEntryBytes * static_cast<std::size_t>(size), 0);
  std::uint8_t* own = entries.data() + kEntryBytes * static_cast<std::size_t>(rank);
  // A rank whose device does not exist still joins the gather (no other rank is left waiting),
  // then throws.
  std::exception_ptr local_error;
  try {
    nccl_detail::require_device_exists(device, who);
    cudaDeviceProp properties;
    nccl_detail::check_cuda(cudaGetDeviceProperties(&properties, device),
                            "cudaGetDeviceProperties");
    std::memcpy(own, properties.uuid.bytes, kUuidBytes);
    own[kUuidBytes] = 1;
  } catch (const Error&) {
    local_error = std::current_exception();
  }
  const TensorView all{entries.data(), static_cast<std::int64_t>(entries.size()), DType::kUInt8};
  host_group
      ->all_gather(all, all.slice(static_cast<std::int64_t>(kEntryBytes) * rank,
                                  static_cast<std::int64_t>(kEntryBytes)))
      ->wait();
  if (local_error) std::rethrow_exception(local_error);
  for (int r = 0; r < size; ++r) {
    const std::uint8_t* entry = entries.data() + kEntryBytes * static_cast<std::size_t>(r);
    SW_REQUIRE(entry[kUuidBytes] == 1, InvalidArgument, who, ": rank ", r,
               " named a CUDA device that does not exist there");
  }
  for (int a = 0; a < size; ++a) {
    for (int b = a + 1; b < size; ++b) {
      const std::uint8_t* ua = entries.data() + kEntryBytes * static_cast<std::size_t>(a);
      const std::uint8_t* ub = entries.data() + kEntryBytes * static_cast<std::size_t>(b);
      if (std::memcmp(ua, ub, kUuidBytes) == 0) {
        return str_cat("ranks ", a, " and ", b, " of group ", host_group->name(), " share GPU ",
                       uuid_text(ua));
      }
    }
  }
  return "";
}

bool every_rank_has_own_gpu(const ProcessGroupPtr& host_group, int device) {
  const std::string shared = describe_shared_gpu(host_group, device);
  if (!shared.empty()) log::info(shared, " (NCCL needs one GPU per rank)");
  return shared.empty();
}

}  // namespace shardwise
