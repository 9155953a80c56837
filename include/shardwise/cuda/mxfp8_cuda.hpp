// MXFP8 quantize / dequantize on an NVIDIA GPU (library shardwise_cuda, built when nvcc is found;
// see cmake/cuda.cmake). Same format and bits as the CPU codec in core/mxfp8.hpp for both scale
// rules (Mxfp8Options::rule; num_threads has no meaning here) and both scale layouts: E4M3 data
// row-major [rows, cols], one E8M0 scale per block of 32 along cols, row-major ([rows, ceil(cols /
// 32)]) or swizzled in 128x4 tiles (cuBLAS's layout; mxfp8_geometry gives its padded size), a
// partial last block scaled by its own elements; NaN/Inf elements stored as E4M3 NaN and left out
// of the block amax (ceil rule) or making the whole block NaN (floor rule).
//
// This header needs no CUDA headers: device pointers are void* / uint8_t*, and a stream is passed
// as an opaque pointer (a cudaStream_t; null = the default stream).
#pragma once

#include <cstdint>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/mxfp8.hpp"
#include "shardwise/core/tensor_view.hpp"

namespace shardwise::cuda {

// A CUDA runtime call failed (message names the call and the CUDA error string).
class CudaError : public Error {
 public:
  using Error::Error;
};

// Number of CUDA devices the runtime sees; 0 when there is no GPU or no usable driver (never
// throws). cudaGetDeviceCount underneath.
int device_count();
inline bool gpu_available() { return device_count() > 0; }

// Device-side entry points: every pointer is device memory. `input` holds rows * cols elements
// of `dtype` (fp32, bf16 or fp16); `data` receives rows * cols E4M3 bytes and `scale` the E8M0
// bytes in the options' layout (mxfp8_geometry(rows, cols, layout).scale_bytes; the swizzled
// layout's padding is left as it is). Dequantize reads scales in `layout`. Asynchronous on
// `stream`; throws InvalidArgument for a bad dtype or shape, CudaError when the launch fails.
void quantize_mxfp8_device(const void* input, DType dtype, std::int64_t rows, std::int64_t cols,
                           std::uint8_t* data, std::uint8_t* scale, void* stream = nullptr,
                           const Mxfp8Options& options = {});
// `output` receives rows * cols elements of `dtype` (fp32, bf16 or fp16), each
// e4m3 * 2^(scale - 127) computed in fp32 and rounded to nearest even, as the CPU codec does.
void dequantize_mxfp8_device(const std::uint8_t* data, const std::uint8_t* scale, std::int64_t rows,
                             std::int64_t cols, void* output, DType dtype, void* stream = nullptr,
                             Mxfp8ScaleLayout layout = Mxfp8ScaleLayout::kRowMajor);

// Host convenience wrappers: copy to the current device, run, copy back, synchronise.
// Throws CudaError when no GPU is present.
Mxfp8Tensor quantize_mxfp8_cuda(TensorView input, std::int64_t rows, std::int64_t cols,
                                const Mxfp8Options& options = {});
void dequantize_mxfp8_cuda(const Mxfp8ConstView& src, TensorView output);

}  // namespace shardwise::cuda
