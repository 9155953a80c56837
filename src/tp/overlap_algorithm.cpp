#include "shardwise/tp/overlap_algorithm.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise::tp {

std::string_view overlap_algorithm_name(OverlapAlgorithm algorithm) {
  switch (algorithm) {
    case OverlapAlgorithm::kNone:
      return "none";
    case OverlapAlgorithm::kRingExchange:
      return "ring_exchange";
    case OverlapAlgorithm::kPipeline:
      return "pipeline";
    case OverlapAlgorithm::kBulk:
      return "bulk";
  }
  return "?";
}

OverlapAlgorithm overlap_algorithm_from_name(std::string_view name, std::string_view what) {
  for (auto algorithm : {OverlapAlgorithm::kNone, OverlapAlgorithm::kRingExchange,
                         OverlapAlgorithm::kPipeline, OverlapAlgorithm::kBulk}) {
    if (overlap_algorithm_name(algorithm) == name) return algorithm;
  }
  throw InvalidArgument(str_cat(what, ": unknown TP overlap algorithm '", name,
                                "' (valid: none, ring_exchange, pipeline, bulk)"));
}

}  // namespace shardwise::tp
