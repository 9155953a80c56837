// MXFP8 quantize / dequantize drivers: validation, scale layouts, partial blocks and threading
// around the block kernels of mxfp8_kernels.cpp.
#include "shardwise/core/mxfp8.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "mxfp8_kernels.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

constexpr std::int64_t kBlock = kMxfp8BlockSize;
// One work item is (row, up to kChunkBlocks blocks): 2048 elements, enough to amortise the
// per-item bookkeeping while still splitting a single long row across threads.
constexpr std::int64_t kChunkBlocks = 64;
// Below this many elements threads cost more than they save.
constexpr std::int64_t kParallelThreshold = 1 << 15;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// Along one row the scale of block column c sits at mxfp8_scale_offset(layout, row, 0, ...) plus
// this (see mxfp8_scale_offset): the per-block loops below add it instead of calling that
// function, with its divisions, for every block.
std::int64_t scale_offset_along_row(Mxfp8ScaleLayout layout, std::int64_t c) {
  return layout == Mxfp8ScaleLayout::kRowMajor ? c : (c / 4) * 512 + c % 4;
}

int thread_count(int requested) { return requested > 0 ? requested : omp_get_max_threads(); }

void check_input_dtype(DType dtype, const char* what) {
  SW_REQUIRE(dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16,
             InvalidArgument, what, ": dtype ", dtype_name(dtype),
             " is not supported (expected fp32, bf16 or fp16)");
}

template <typename In>
using QuantizeKernel = void (*)(const In*, std::uint8_t*, std::uint8_t*, std::int64_t,
                                Mxfp8ScaleRule);
template <typename Out>
using DequantizeKernel = void (*)(const std::uint8_t*, const std::uint8_t*, Out*, std::int64_t);

template <typename In>
void quantize_typed(const In* input, std::int64_t rows, std::int64_t cols, const Mxfp8View& dst,
                    std::int64_t row_offset, std::int64_t col_offset, Mxfp8ScaleRule rule,
                    int num_threads, QuantizeKernel<In> kernel) {
  const std::int64_t blocks = ceil_div(cols, kBlock);
  const std::int64_t tail = cols % kBlock;  // elements in a partial last block, 0 if none
  const std::int64_t chunks_per_row = ceil_div(blocks, kChunkBlocks);
  const std::int64_t items = rows * chunks_per_row;
  const std::int64_t dst_blocks_per_row = ceil_div(dst.cols, kBlock);
  const std::int64_t block_offset = col_offset / kBlock;
  std::uint8_t* const data = dst.data.data();
  std::uint8_t* const scale = dst.scale.data();
  const int threads = thread_count(num_threads);
#pragma omp parallel for schedule(static) \
    num_threads(threads) if (threads > 1 && rows * cols >= kParallelThreshold)
  for (std::int64_t item = 0; item < items; ++item) {
    const std::int64_t r = item / chunks_per_row;
    const std::int64_t b0 = (item % chunks_per_row) * kChunkBlocks;
    const std::int64_t b1 = std::min(b0 + kChunkBlocks, blocks);
    const bool has_tail = tail != 0 && b1 == blocks;
    const std::int64_t full = b1 - b0 - (has_tail ? 1 : 0);
    const In* src = input + r * cols + b0 * kBlock;
    std::uint8_t* out = data + (row_offset + r) * dst.cols + col_offset + b0 * kBlock;
    const std::int64_t row = row_offset + r;
    // Row-major scales are contiguous along a row: the kernel writes them in place. Otherwise
    // they are staged and scattered below.
    std::uint8_t staged[kChunkBlocks];
    std::uint8_t* const scales =
        dst.layout == Mxfp8ScaleLayout::kRowMajor
            ? scale + mxfp8_scale_offset(dst.layout, row, block_offset + b0, dst_blocks_per_row)
            : staged;
    kernel(src, out, scales, full, rule);
    if (has_tail) {
      // Zero padding does not change amax, so the partial block gets the scale of its elements.
      In padded[kBlock] = {};
      std::uint8_t codes[kBlock];
      std::memcpy(padded, src + full * kBlock, static_cast<std::size_t>(tail) * sizeof(In));
      kernel(padded, codes, scales + full, 1, rule);
      std::memcpy(out + full * kBlock, codes, static_cast<std::size_t>(tail));
    }
    if (scales != staged) continue;
    std::uint8_t* const row_scales =
        scale + mxfp8_scale_offset(dst.layout, row, 0, dst_blocks_per_row);
    for (std::int64_t j = 0; j < b1 - b0; ++j)
      row_scales[scale_offset_along_row(dst.layout, block_offset + b0 + j)] = staged[j];
  }
}

template <typename Out>
void dequantize_typed(const Mxfp8ConstView& src, Out* output, int num_threads,
                      DequantizeKernel<Out> kernel) {
  const std::int64_t rows = src.rows, cols = src.cols;
  const std::int64_t blocks = ceil_div(cols, kBlock);
  const std::int64_t tail = cols % kBlock;
  const std::int64_t chunks_per_row = ceil_div(blocks, kChunkBlocks);
  const std::int64_t items = rows * chunks_per_row;
  const std::uint8_t* const data = src.data.data();
  const std::uint8_t* const scale = src.scale.data();
  const int threads = thread_count(num_threads);
#pragma omp parallel for schedule(static) \
    num_threads(threads) if (threads > 1 && rows * cols >= kParallelThreshold)
  for (std::int64_t item = 0; item < items; ++item) {
    const std::int64_t r = item / chunks_per_row;
    const std::int64_t b0 = (item % chunks_per_row) * kChunkBlocks;
    const std::int64_t b1 = std::min(b0 + kChunkBlocks, blocks);
    const bool has_tail = tail != 0 && b1 == blocks;
    const std::int64_t full = b1 - b0 - (has_tail ? 1 : 0);
    // Row-major scales are read in place; other layouts are gathered first.
    std::uint8_t staged[kChunkBlocks];
    const std::uint8_t* scales = staged;
    if (src.layout == Mxfp8ScaleLayout::kRowMajor) {
      scales = scale + mxfp8_scale_offset(src.layout, r, b0, blocks);
    } else {
      const std::uint8_t* const row_scales = scale + mxfp8_scale_offset(src.layout, r, 0, blocks);
      for (std::int64_t j = 0; j < b1 - b0; ++j)
        staged[j] = row_scales[scale_offset_along_row(src.layout, b0 + j)];
    }
    const std::uint8_t* in = data + r * cols + b0 * kBlock;
    Out* out = output + r * cols + b0 * kBlock;
    kernel(in, scales, out, full);
    if (has_tail) {
      std::uint8_t codes[kBlock] = {};
      Out values[kBlock];
      std::memcpy(codes, in + full * kBlock, static_cast<std::size_t>(tail));
      kernel(codes, scales + full, values, 1);
      std::memcpy(out + full * kBlock, values, static_cast<std::size_t>(tail) * sizeof(Out));
    }
  }
}

void check_storage(std::int64_t rows, std::int64_t cols, Mxfp8ScaleLayout layout,
                   std::size_t data_size, std::size_t scale_size, const char* what) {
  SW_REQUIRE(rows >= 0 && cols >= 0, ShapeError, what, ": negative shape [", rows, ", ", cols, "]");
  const Mxfp8Geometry g = mxfp8_geometry(rows, cols, layout);
  SW_REQUIRE(static_cast<std::int64_t>(data_size) >= g.data_bytes, ShapeError, what,
             ": data buffer holds ", data_size, " bytes, [", rows, ", ", cols, "] needs ",
             g.data_bytes);
  SW_REQUIRE(static_cast<std::int64_t>(scale_size) >= g.scale_bytes, ShapeError, what,
             ": scale buffer holds ", scale_size, " bytes, [", rows, ", ", cols, "] needs ",
             g.scale_bytes);
}

}  // namespace

Mxfp8Geometry mxfp8_geometry(std::int64_t rows, std::int64_t cols, Mxfp8ScaleLayout layout) {
  SW_REQUIRE(rows >= 0 && cols >= 0, ShapeError, "mxfp8 shape [", rows, ", ", cols,
             "] has a negative dimension");
  // Byte counts of a shape no memory holds would wrap (to 0, say, and pass every size check);
  // an empty tensor may still have one huge dimension.
  constexpr std::int64_t kMaxBytes = std::int64_t{1} << 56;
  constexpr std::int64_t kMaxDimension = std::numeric_limits<std::int64_t>::max() - 1024;
  const auto bytes = [&](std::int64_t a, std::int64_t b) {
    const std::optional<std::int64_t> product = checked_mul(a, b);
    SW_REQUIRE(product && *product <= kMaxBytes, ShapeError, "mxfp8 shape [", rows, ", ", cols,
               "] is too large (over 2^56 bytes)");
    return *product;
  };
  SW_REQUIRE(rows <= kMaxDimension && cols <= kMaxDimension, ShapeError, "mxfp8 shape [", rows,
             ", ", cols, "] is too large");
  Mxfp8Geometry g;
  g.rows = rows;
  g.cols = cols;
  g.blocks_per_row = ceil_div(cols, kBlock);
  g.last_block_size = cols == 0 ? 0 : cols - (g.blocks_per_row - 1) * kBlock;
  g.data_bytes = bytes(rows, cols);
  g.scale_bytes = layout == Mxfp8ScaleLayout::kRowMajor
                      ? bytes(rows, g.blocks_per_row)
                      : bytes(round_up(rows, 128), round_up(g.blocks_per_row, 4));
  return g;
}

std::int64_t mxfp8_scale_offset(Mxfp8ScaleLayout layout, std::int64_t row, std::int64_t block_col,
                                std::int64_t blocks_per_row) {
  if (layout == Mxfp8ScaleLayout::kRowMajor) return row * blocks_per_row + block_col;
  // 128x4 tiles of 512 bytes, row-major over tiles; inside a tile rows r and r + 32k interleave
  // so that the 4 scales of 4 rows 32 apart form one 16-byte group (cuBLAS layout).
  const std::int64_t tiles_per_row = ceil_div(blocks_per_row, 4);
  const std::int64_t tile = (row / 128) * tiles_per_row + block_col / 4;
  return tile * 512 + (row % 32) * 16 + ((row % 128) / 32) * 4 + block_col % 4;
}

Mxfp8Tensor Mxfp8Tensor::allocate(std::int64_t rows, std::int64_t cols, Mxfp8ScaleLayout layout) {
  const Mxfp8Geometry g = mxfp8_geometry(rows, cols, layout);
  Mxfp8Tensor t;
  t.rows = rows;
  t.cols = cols;
  t.layout = layout;
  t.data.assign(static_cast<std::size_t>(g.data_bytes), 0);
  t.scale.assign(static_cast<std::size_t>(g.scale_bytes), 0);
  return t;
}

Mxfp8Tensor quantize_mxfp8(TensorView input, std::int64_t rows, std::int64_t cols,
                           const Mxfp8Options& options) {
  Mxfp8Tensor t = Mxfp8Tensor::allocate(rows, cols, options.layout);
  t.rule = options.rule;
  quantize_mxfp8_into(input, rows, cols, t.view(), 0, 0, options);
  return t;
}

void quantize_mxfp8_into(TensorView input, std::int64_t rows, std::int64_t cols, Mxfp8View dst,
                         std::int64_t row_offset, std::int64_t col_offset,
                         const Mxfp8Options& options) {
  check_input_dtype(input.dtype, "quantize_mxfp8 input");
  require_host_view(input, "quantize_mxfp8 input");
  SW_REQUIRE(rows >= 0 && cols >= 0, ShapeError, "quantize_mxfp8: negative shape [", rows, ", ",
             cols, "]");
  // The geometry refuses a shape whose element count overflows.
  const std::int64_t elements = mxfp8_geometry(rows, cols, dst.layout).data_bytes;
  SW_REQUIRE(input.numel == elements, ShapeError, "quantize_mxfp8: input has ", input.numel,
             " elements, shape [", rows, ", ", cols, "] needs ", elements);
  check_storage(dst.rows, dst.cols, dst.layout, dst.data.size(), dst.scale.size(),
                "quantize_mxfp8 destination");
  SW_REQUIRE(row_offset >= 0 && col_offset >= 0 && row_offset + rows <= dst.rows &&
                 col_offset + cols <= dst.cols,
             ShapeError, "quantize_mxfp8: rows [", row_offset, ", ", row_offset + rows,
             ") x cols [", col_offset, ", ", col_offset + cols, ") do not fit the destination [",
             dst.rows, ", ", dst.cols, "]");
  SW_REQUIRE(col_offset % kBlock == 0, InvalidArgument, "quantize_mxfp8: col_offset ", col_offset,
             " is not a multiple of the block size ", kBlock);
  SW_REQUIRE(cols % kBlock == 0 || col_offset + cols == dst.cols, InvalidArgument,
             "quantize_mxfp8: cols [", col_offset, ", ", col_offset + cols,
             ") end inside a block of 32 that is not the last of the row (destination has ",
             dst.cols, " cols)");
  if (rows == 0 || cols == 0) return;
  SW_REQUIRE(input.data != nullptr, InvalidArgument, "quantize_mxfp8: input data is null");
  switch (input.dtype) {
    case DType::kFloat32:
      quantize_typed<float>(input.as<float>(), rows, cols, dst, row_offset, col_offset,
                            options.rule, options.num_threads, &mxfp8_kernels::quantize_f32);
      break;
    case DType::kBFloat16:
      quantize_typed<std::uint16_t>(input.as<std::uint16_t>(), rows, cols, dst, row_offset,
                                    col_offset, options.rule, options.num_threads,
                                    &mxfp8_kernels::quantize_bf16);
      break;
    default:
      quantize_typed<std::uint16_t>(input.as<std::uint16_t>(), rows, cols, dst, row_offset,
                                    col_offset, options.rule, options.num_threads,
                                    &mxfp8_kernels::quantize_f16);
      break;
  }
}

void dequantize_mxfp8_into(const Mxfp8ConstView& src, TensorView out, int num_threads) {
  check_input_dtype(out.dtype, "dequantize_mxfp8 output");
  require_host_view(out, "dequantize_mxfp8 output");
  check_storage(src.rows, src.cols, src.layout, src.data.size(), src.scale.size(),
                "dequantize_mxfp8 source");
  SW_REQUIRE(out.numel == src.rows * src.cols, ShapeError, "dequantize_mxfp8: output has ",
             out.numel, " elements, shape [", src.rows, ", ", src.cols, "] needs ",
             src.rows * src.cols);
  if (out.numel == 0) return;
  SW_REQUIRE(out.data != nullptr, InvalidArgument, "dequantize_mxfp8: output data is null");
  switch (out.dtype) {
    case DType::kFloat32:
      dequantize_typed<float>(src, out.as<float>(), num_threads, &mxfp8_kernels::dequantize_f32);
      break;
    case DType::kBFloat16:
      dequantize_typed<std::uint16_t>(src, out.as<std::uint16_t>(), num_threads,
                                      &mxfp8_kernels::dequantize_bf16);
      break;
    default:
      dequantize_typed<std::uint16_t>(src, out.as<std::uint16_t>(), num_threads,
                                      &mxfp8_kernels::dequantize_f16);
      break;
  }
}

std::vector<float> dequantize_mxfp8_to_float(const Mxfp8Tensor& src, int num_threads) {
  std::vector<float> out(static_cast<std::size_t>(src.rows * src.cols));
  dequantize_mxfp8_into(src.view(), {out.data(), src.rows * src.cols, DType::kFloat32},
                        num_threads);
  return out;
}

std::vector<IndexRange> scale_slice_from_data_slice(std::span<const IndexRange> data_slice,
                                                    std::int64_t last_dim_size,
                                                    std::int64_t block_size) {
  SW_REQUIRE(block_size > 0, InvalidArgument, "scale_slice_from_data_slice: block_size ",
             block_size, " must be positive");
  SW_REQUIRE(!data_slice.empty(), InvalidArgument,
             "scale_slice_from_data_slice: the data slice has no dimensions");
  const IndexRange last = data_slice.back();
  SW_REQUIRE(0 <= last.start && last.start <= last.stop && last.stop <= last_dim_size,
             InvalidArgument, "scale_slice_from_data_slice: last-dim bounds [", last.start, ", ",
             last.stop, ") are outside [0, ", last_dim_size, "]");
  SW_REQUIRE(
      last.start % block_size == 0 && (last.stop % block_size == 0 || last.stop == last_dim_size),
      InvalidArgument, "scale_slice_from_data_slice: last-dim bounds [", last.start, ", ",
      last.stop, ") are not aligned to blocks of ", block_size,
      " (start must be a multiple, stop a multiple or the dimension size ", last_dim_size, ")");
  std::vector<IndexRange> scale_slice(data_slice.begin(), data_slice.end());
  scale_slice.back() = {last.start / block_size, ceil_div(last.stop, block_size)};
  return scale_slice;
}

}  // namespace shardwise
