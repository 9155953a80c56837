// How one TP GEMM overlaps its communication (see overlapped_gemm.hpp).
#pragma once

#include <string_view>

namespace shardwise::tp {

enum class OverlapAlgorithm { kNone, kRingExchange, kPipeline, kBulk };

// "none", "ring_exchange", "pipeline", "bulk" (the config's method names).
std::string_view overlap_algorithm_name(OverlapAlgorithm algorithm);
// The inverse; InvalidArgument naming `what` and the valid names for anything else.
OverlapAlgorithm overlap_algorithm_from_name(std::string_view name, std::string_view what);

struct OverlapChoice {
  OverlapAlgorithm algorithm = OverlapAlgorithm::kNone;
  int num_splits = 1;  // pipeline only: row chunks of the GEMM (clamped to the rows available)

  bool operator==(const OverlapChoice&) const = default;
};

}  // namespace shardwise::tp
