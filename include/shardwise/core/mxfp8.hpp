// MXFP8: a [rows, cols] tensor stored as E4M3 elements (one byte each, row-major) plus one E8M0
// scale byte per block of 32 consecutive elements along the last dimension (cols). Element
// (r, c) decodes to e4m3(data[r * cols + c]) * e8m0(scale of block (r, c / 32)).
//
// Scale rules (Mxfp8ScaleRule), with amax = max |x| over the block:
//  - kCeil (default; Transformer Engine / Megatron): scale = amax / 448 rounded UP to a power of
//    two, so amax / scale <= 448 and no element saturates. Elements are x / scale rounded to
//    E4M3 (RNE). An all-zero block gets scale byte 0 (2^-127) and all-zero data: byte 0 then just
//    means "nothing to scale", every element decodes to (+-)0.
//    NaN / Inf: handled per element. amax is taken over the finite elements only, so finite
//    neighbours keep full precision; a NaN or +-Inf element is stored as E4M3 NaN (0x7F, or 0xFF
//    when negative) - E4M3FN has no infinity, and saturating an Inf to 448 would hide it.
//    At the very top of the range the element rounding can still overflow on the way back: a
//    block whose amax is within 2^-8 of 2^128 (fp32 / bf16 max) gets scale 2^120 and an element
//    of 255.9.. that rounds to 256, which dequantizes to 2^128 = inf. Kept: those bytes are what
//    the rule gives (any codec following it stores the same); kFloor saturates there instead.
//  - kFloor (OCP Microscaling v1.0): shared exponent = floor(log2(amax)) - 8 (8 = emax of
//    E4M3), elements x / 2^exp rounded to E4M3 (RNE) with saturation to +-448 (the top of the
//    block, in [448, 512) after scaling, may saturate). An all-zero block gets byte 0.
//    NaN / Inf: as in the OCP reference, a block containing any NaN or Inf gets scale NaN
//    (0xFF); its element bytes are all E4M3 NaN (0x7F / 0xFF by sign of the input).
//  Both rules clamp the exponent to the E8M0 range [-127, 127]; for fp32/bf16/fp16 inputs only
//  the lower clamp can bind (tiny blocks get scale 2^-127, their elements may round to zero).
//
// Scale layouts (Mxfp8ScaleLayout):
//  - kRowMajor: the logical [rows, blocks_per_row] matrix, row-major.
//  - kSwizzled128x4: the 1-D layout cuBLAS / cuDNN / Transformer Engine expect for block-scaled
//    GEMMs. Scale (r, c) lives in tile (r / 128, c / 4); tiles are 512 bytes, row-major over
//    ceil(blocks_per_row / 4) tiles per tile-row; inside a tile the offset is
//    (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4. The buffer is padded to whole tiles
//    (round_up(rows, 128) * round_up(blocks_per_row, 4) bytes); the padding is zero.
//
// A cols that is not a multiple of 32 is supported: the last block of each row is partial
// (Mxfp8Geometry::last_block_size < 32) and its scale is computed from the elements it has.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/fp8.hpp"
#include "shardwise/core/tensor_view.hpp"

namespace shardwise {

inline constexpr std::int64_t kMxfp8BlockSize = 32;

enum class Mxfp8ScaleRule : std::uint8_t { kCeil, kFloor };
enum class Mxfp8ScaleLayout : std::uint8_t { kRowMajor, kSwizzled128x4 };

struct Mxfp8Options {
  Mxfp8ScaleRule rule = Mxfp8ScaleRule::kCeil;
  Mxfp8ScaleLayout layout = Mxfp8ScaleLayout::kRowMajor;
  int num_threads = 0;  // OpenMP threads; 0 = the OpenMP default (OMP_NUM_THREADS)
};

// Sizes that follow from (rows, cols, layout).
struct Mxfp8Geometry {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t blocks_per_row = 0;   // ceil(cols / 32)
  std::int64_t last_block_size = 0;  // elements in the last block of a row: 1..32 (0 if cols==0)
  std::int64_t data_bytes = 0;       // rows * cols
  std::int64_t scale_bytes = 0;      // including the zero padding of the swizzled layout
  bool has_partial_block() const { return last_block_size != 0 && last_block_size != 32; }
};

Mxfp8Geometry mxfp8_geometry(std::int64_t rows, std::int64_t cols, Mxfp8ScaleLayout layout);

// Byte offset of the scale of block (row, block_col) in a scale buffer of the given layout.
std::int64_t mxfp8_scale_offset(Mxfp8ScaleLayout layout, std::int64_t row, std::int64_t block_col,
                                std::int64_t blocks_per_row);

struct Mxfp8ConstView;

// Writable MXFP8 storage owned elsewhere (e.g. persistent buffers whose addresses must not move).
struct Mxfp8View {
  std::span<std::uint8_t> data;   // rows * cols E4M3 bytes
  std::span<std::uint8_t> scale;  // mxfp8_geometry(rows, cols, layout).scale_bytes E8M0 bytes
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  Mxfp8ScaleLayout layout = Mxfp8ScaleLayout::kRowMajor;

  // Implicit, like span<T> -> span<const T>.
  operator Mxfp8ConstView() const;  // NOLINT(google-explicit-constructor)
};

struct Mxfp8ConstView {
  std::span<const std::uint8_t> data;
  std::span<const std::uint8_t> scale;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  Mxfp8ScaleLayout layout = Mxfp8ScaleLayout::kRowMajor;
};

inline Mxfp8View::operator Mxfp8ConstView() const { return {data, scale, rows, cols, layout}; }

// An owning MXFP8 tensor.
struct Mxfp8Tensor {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  Mxfp8ScaleRule rule = Mxfp8ScaleRule::kCeil;
  Mxfp8ScaleLayout layout = Mxfp8ScaleLayout::kRowMajor;
  std::vector<std::uint8_t> data;   // E4M3, row-major [rows, cols]
  std::vector<std::uint8_t> scale;  // E8M0, in `layout`

  // Zero-filled storage for a [rows, cols] tensor.
  static Mxfp8Tensor allocate(std::int64_t rows, std::int64_t cols,
                              Mxfp8ScaleLayout layout = Mxfp8ScaleLayout::kRowMajor);
  Mxfp8Geometry geometry() const { return mxfp8_geometry(rows, cols, layout); }
  Mxfp8View view() { return {data, scale, rows, cols, layout}; }
  Mxfp8ConstView view() const { return {data, scale, rows, cols, layout}; }
};

// Quantizes a row-major [rows, cols] fp32 / bf16 / fp16 tensor. Throws InvalidArgument for a
// dtype that is not one of those, ShapeError when input.numel != rows * cols.
Mxfp8Tensor quantize_mxfp8(TensorView input, std::int64_t rows, std::int64_t cols,
                           const Mxfp8Options& options = {});

// Quantizes a row-major [rows, cols] input into the sub-rectangle of `dst` that starts at
// (row_offset, col_offset), writing data and scales in place (no allocation). col_offset must
// be a multiple of 32, and cols too unless the rectangle ends at dst.cols (partial last block).
// The layout is dst.layout (options.layout is ignored); padding bytes are left untouched.
void quantize_mxfp8_into(TensorView input, std::int64_t rows, std::int64_t cols, Mxfp8View dst,
                         std::int64_t row_offset = 0, std::int64_t col_offset = 0,
                         const Mxfp8Options& options = {});

// Dequantizes all of `src` into `out` (fp32, bf16 or fp16; numel == rows * cols), row-major.
// Each value is e4m3 * scale computed exactly in fp32 and rounded (RNE) to the output dtype.
void dequantize_mxfp8_into(const Mxfp8ConstView& src, TensorView out, int num_threads = 0);
std::vector<float> dequantize_mxfp8_to_float(const Mxfp8Tensor& src, int num_threads = 0);

// Half-open index range [start, stop).
struct IndexRange {
  std::int64_t start = 0;
  std::int64_t stop = 0;
  bool operator==(const IndexRange&) const = default;
};

// Maps an MXFP8 data slice to the slice of the logical (row-major) scale tensor it covers: all
// dimensions but the last pass through; the last becomes [start / 32, ceil(stop / 32)).
// The last-dimension bounds must be block aligned: start % 32 == 0 and (stop % 32 == 0 or
// stop == last_dim_size, the end of a partial last block); otherwise InvalidArgument naming the
// bounds. Also rejects bounds outside [0, last_dim_size] and an empty slice list.
std::vector<IndexRange> scale_slice_from_data_slice(std::span<const IndexRange> data_slice,
                                                    std::int64_t last_dim_size,
                                                    std::int64_t block_size = kMxfp8BlockSize);

}  // namespace shardwise
