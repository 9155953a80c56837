// The dtypes a model spec's parameters may have, shared by the spec reader, TransformerConfig's
// validate and `model-spec --dtype`, so that a spec the generator writes is one the reader accepts.
#pragma once

#include "shardwise/core/dtype.hpp"

namespace shardwise {

// Floating dtypes that hold a value on their own; E8M0 is a scale-only format (no sign, no
// mantissa), so a parameter stored in it could not be trained or refit.
inline bool is_param_dtype(DType dtype) {
  return is_floating(dtype) && dtype != DType::kFloat8E8M0;
}

inline constexpr const char* kParamDtypeNames = "fp32, bf16, fp16, e4m3";

}  // namespace shardwise
