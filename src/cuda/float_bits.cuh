// fp32 <-> bf16 / fp16 on the device with the CPU converters' bits (core/float_convert.hpp):
// widening is exact; narrowing rounds to nearest even, overflows to infinity, and a NaN becomes
// the CPU's quiet NaN with the input's sign (the hardware conversions spell NaN their own way).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace shardwise::cuda::detail {

__device__ __forceinline__ float bf16_bits_to_float(std::uint16_t h) {
  return __uint_as_float(static_cast<std::uint32_t>(h) << 16);
}

// Finite values convert exactly either way; inf and NaN keep their sign and payload as the CPU
// converter keeps them (__half2float would return one canonical NaN).
__device__ __forceinline__ float fp16_bits_to_float(std::uint16_t h) {
  if ((h & 0x7c00u) == 0x7c00u) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    return __uint_as_float(sign | 0x7f800000u | (static_cast<std::uint32_t>(h & 0x3ffu) << 13));
  }
  return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ std::uint16_t float_to_bf16_bits(float f) {
  std::uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

__device__ __forceinline__ std::uint16_t float_to_fp16_bits(float f) {
  const std::uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | 0x7e00u);
  return __half_as_ushort(__float2half_rn(f));
}

}  // namespace shardwise::cuda::detail
