#include "shardwise/cuda/gemm_precision.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise::cuda {

std::string to_string(GemmPrecision precision) {
  switch (precision) {
    case GemmPrecision::kFp32:
      return "fp32";
    case GemmPrecision::kTf32:
      return "tf32";
    case GemmPrecision::kBf16:
      return "bf16";
  }
  return "unknown";
}

GemmPrecision parse_gemm_precision(const std::string& name) {
  for (GemmPrecision p : {GemmPrecision::kFp32, GemmPrecision::kTf32, GemmPrecision::kBf16}) {
    if (to_string(p) == name) return p;
  }
  throw InvalidArgument(str_cat("GEMM precision '", name, "': expected fp32, tf32 or bf16"));
}

}  // namespace shardwise::cuda
