// How the device GPT's cuBLAS products compute: fp32 (TF32 off), fp32 data on TF32 tensor cores,
// or bf16 inputs with fp32 accumulation and fp32 outputs (params, grads and activations stay
// fp32; each product's inputs are rounded to bf16 right before it).
#pragma once

#include <string>

namespace shardwise::cuda {

enum class GemmPrecision { kFp32, kTf32, kBf16 };

// "fp32", "tf32", "bf16".
std::string to_string(GemmPrecision precision);
// The inverse of to_string; throws InvalidArgument naming the value otherwise.
GemmPrecision parse_gemm_precision(const std::string& name);

}  // namespace shardwise::cuda
