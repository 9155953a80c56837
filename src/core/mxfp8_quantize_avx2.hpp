// AVX2 quantize kernels of the MXFP8 codec (private to shardwise_core; mxfp8_kernels.cpp puts
// them in the AVX2 dispatch entry). They take whole blocks like the other kernels and hand the
// rare blocks they do not cover (NaN / Inf; for bf16 also tiny scales and E4M3 subnormals) to
// `general`, the GCC-vectorised loop of the same level, one block at a time. Output is
// bit-identical to that loop's.
#pragma once

#include <cstdint>

#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/core/mxfp8.hpp"

namespace shardwise::mxfp8_kernels {

template <typename In>
using QuantizeFn = void (*)(const In*, std::uint8_t*, std::uint8_t*, std::int64_t, Mxfp8ScaleRule);

#if SW_HAVE_ISA_LEVELS
// Call only on a CPU with AVX2.
void quantize_bf16_avx2_lanes(const std::uint16_t* src, std::uint8_t* data, std::uint8_t* scales,
                              std::int64_t nblocks, Mxfp8ScaleRule rule,
                              QuantizeFn<std::uint16_t> general);
void quantize_f32_avx2_lanes(const float* src, std::uint8_t* data, std::uint8_t* scales,
                             std::int64_t nblocks, Mxfp8ScaleRule rule, QuantizeFn<float> general);
#endif

}  // namespace shardwise::mxfp8_kernels
