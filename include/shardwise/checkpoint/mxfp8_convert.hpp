// Converting safetensors checkpoints to and from MXFP8 (`shardwise convert`).
//
// To MXFP8: every selected 2-D fp32 / bf16 / fp16 tensor NAME [rows, cols] becomes two tensors,
//   NAME        F8_E4M3 [rows, cols]                       the element codes
//   NAME_scale  F8_E8M0 [rows, ceil(cols / 32)]            scale layout "2d" (row-major), or
//               F8_E8M0 [round_up(rows, 128), round_up(ceil(cols / 32), 4)]   layout "swizzled"
//                                                          (cuBLAS 128x4 tiles, zero padded)
// bit-identical to quantize_mxfp8() on the whole tensor. Every other tensor is copied unchanged
// (dtype, shape, bytes) and the input's `__metadata__` entries are kept. The conversion is
// recorded in `__metadata__` (all values are strings, as safetensors requires):
//   shardwise.mxfp8.block_size     "32"
//   shardwise.mxfp8.scale_rule     "ceil" | "floor"
//   shardwise.mxfp8.scale_layout   "2d" | "swizzled"
//   shardwise.mxfp8.tensors        comma-separated names of the converted tensors, in file order
//   shardwise.mxfp8.tensor.NAME    JSON: {"dtype":"BF16","shape":[rows,cols],
//                                         "blocks_per_row":B,"last_block_size":L}
//                                  (L < 32 means the last block of each row is partial)
//
// From MXFP8: the pairs listed in shardwise.mxfp8.tensors are dequantized back to NAME with the
// original shape (in bf16 by default); everything else is copied and the shardwise.mxfp8.*
// metadata is dropped.
//
// Both directions stream: tensors are read from the memory-mapped input and written one at a
// time (in row chunks) into an atomic write of the output, so memory stays at a few chunks plus
// one tensor's scales however large the checkpoint is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/mxfp8.hpp"

namespace shardwise {

// Metadata keys written by the conversion.
inline constexpr std::string_view kMxfp8MetaBlockSize = "shardwise.mxfp8.block_size";
inline constexpr std::string_view kMxfp8MetaScaleRule = "shardwise.mxfp8.scale_rule";
inline constexpr std::string_view kMxfp8MetaScaleLayout = "shardwise.mxfp8.scale_layout";
inline constexpr std::string_view kMxfp8MetaTensors = "shardwise.mxfp8.tensors";
inline constexpr std::string_view kMxfp8MetaTensorPrefix = "shardwise.mxfp8.tensor.";
inline constexpr std::string_view kMxfp8ScaleSuffix = "_scale";

// Names of tensors that stay in high precision unless --include asks for them: embeddings, the
// output projection and normalisation weights. RE2 regex, searched anywhere in the name.
inline constexpr std::string_view kMxfp8DefaultExcludePattern =
    "embed|wte|wpe|lm_head|output_layer|norm|(^|[._])ln";

// Called after each chunk with (input tensor bytes processed, total input tensor bytes).
using ConvertProgress = std::function<void(std::uint64_t done, std::uint64_t total)>;

struct Mxfp8ConvertOptions {
  Mxfp8ScaleRule rule = Mxfp8ScaleRule::kCeil;
  Mxfp8ScaleLayout layout = Mxfp8ScaleLayout::kRowMajor;
  // Selection (RE2 regexes, searched anywhere in the name: the ECMAScript subset without
  // backreferences or lookaround, matched in linear time). A tensor is converted when it is
  // 2-D fp32/bf16/fp16, matches one of `include` (every name when empty) and matches none of
  // `exclude`. kMxfp8DefaultExcludePattern is added to `exclude` when `include` is empty.
  std::vector<std::string> include;
  std::vector<std::string> exclude;
  int num_threads = 0;  // OpenMP threads for the codec; 0 = OpenMP default
  ConvertProgress progress;
};

struct Mxfp8RestoreOptions {
  DType dtype = DType::kBFloat16;  // fp32, bf16 or fp16
  int num_threads = 0;
  ConvertProgress progress;
};

struct ConvertSummary {
  std::size_t converted = 0;          // tensors quantized (to MXFP8) or dequantized (from)
  std::size_t copied = 0;             // tensors written unchanged
  std::size_t skipped_not_2d = 0;     // float tensors selected by name but not 2-D (copied)
  std::size_t skipped_not_float = 0;  // tensors selected by name that are not fp32/bf16/fp16
  std::uint64_t bytes_in = 0;         // input file size
  std::uint64_t bytes_out = 0;        // output file size
  std::vector<std::string> converted_names;
};

// What convert_safetensors_to_mxfp8 would do with a tensor of this name, shape and dtype.
enum class Mxfp8Selection { kConvert, kNotSelected, kNotTwoD, kNotFloat };
// Compiled selection rules (throws InvalidArgument naming the bad pattern).
class Mxfp8TensorFilter {
 public:
  Mxfp8TensorFilter(const std::vector<std::string>& include,
                    const std::vector<std::string>& exclude);
  ~Mxfp8TensorFilter();
  Mxfp8TensorFilter(Mxfp8TensorFilter&&) noexcept;
  Mxfp8TensorFilter& operator=(Mxfp8TensorFilter&&) noexcept;
  // Matches the name patterns only.
  bool selects_name(std::string_view name) const;
  Mxfp8Selection classify(std::string_view name, DType dtype,
                          const std::vector<std::int64_t>& shape) const;

 private:
  struct Patterns;
  std::unique_ptr<Patterns> patterns_;
};

// Writes `out` atomically. Throws InvalidArgument (out == in, bad regex, already-MXFP8 input,
// name collision with an existing NAME_scale, tensor name with a comma), IoError, FormatError.
ConvertSummary convert_safetensors_to_mxfp8(const std::filesystem::path& in,
                                            const std::filesystem::path& out,
                                            const Mxfp8ConvertOptions& options = {});

// Reverses convert_safetensors_to_mxfp8. Throws FormatError when `in` carries no (or
// inconsistent) shardwise.mxfp8 metadata, InvalidArgument for out == in or a bad dtype.
ConvertSummary convert_safetensors_from_mxfp8(const std::filesystem::path& in,
                                              const std::filesystem::path& out,
                                              const Mxfp8RestoreOptions& options = {});

std::string_view mxfp8_scale_rule_name(Mxfp8ScaleRule rule);        // "ceil" | "floor"
std::string_view mxfp8_scale_layout_name(Mxfp8ScaleLayout layout);  // "2d" | "swizzled"
Mxfp8ScaleRule parse_mxfp8_scale_rule(std::string_view name);       // throws InvalidArgument
Mxfp8ScaleLayout parse_mxfp8_scale_layout(std::string_view name);   // throws InvalidArgument

}  // namespace shardwise
