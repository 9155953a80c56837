// Inner loops of the MXFP8 codec (private to shardwise_core). Each works on `nblocks` whole
// blocks of 32 contiguous elements; the caller handles partial blocks, threads and scale
// layouts. `scales` holds one E8M0 byte per block, contiguous.
#pragma once

#include <cstdint>

#include "shardwise/core/mxfp8.hpp"

namespace shardwise::mxfp8_kernels {

// Elements per MXFP8 block, as the kernels index with it.
inline constexpr int kBlock = static_cast<int>(kMxfp8BlockSize);

void quantize_f32(const float* src, std::uint8_t* data, std::uint8_t* scales, std::int64_t nblocks,
                  Mxfp8ScaleRule rule);
void quantize_bf16(const std::uint16_t* src, std::uint8_t* data, std::uint8_t* scales,
                   std::int64_t nblocks, Mxfp8ScaleRule rule);
void quantize_f16(const std::uint16_t* src, std::uint8_t* data, std::uint8_t* scales,
                  std::int64_t nblocks, Mxfp8ScaleRule rule);

void dequantize_f32(const std::uint8_t* data, const std::uint8_t* scales, float* out,
                    std::int64_t nblocks);
void dequantize_bf16(const std::uint8_t* data, const std::uint8_t* scales, std::uint16_t* out,
                     std::int64_t nblocks);
void dequantize_f16(const std::uint8_t* data, const std::uint8_t* scales, std::uint16_t* out,
                    std::int64_t nblocks);

}  // namespace shardwise::mxfp8_kernels
