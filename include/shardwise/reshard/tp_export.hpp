// Offline tensor-parallel export: cuts whole tensors (e.g. a checkpoint's model.safetensors) into
// each TP rank's slice by the Megatron rules of tp_rules.hpp, optionally converting the 2-D weights
// to MXFP8. Pure functions over memory; `shardwise reshard` does the file I/O.
//
// The slicing here is plain index arithmetic (no boxes, no planner), so it doubles as the
// independent reference a refit is verified against.
//
// MXFP8 tensors are stored as two tensors: NAME (E4M3, the local shape [rows, cols]) and
// NAME + "_scale" (E8M0, row-major [rows, ceil(cols / 32)]); the metadata says which.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/core/dtype.hpp"
#include "shardwise/core/mxfp8.hpp"
#include "shardwise/reshard/tp_rules.hpp"

namespace shardwise {

inline constexpr const char* kMxfp8ScaleSuffix = "_scale";
inline constexpr const char* kTpExportFormat = "shardwise.tp_export.v1";
// Metadata key naming the file (next to the rank's, in the same directory) that holds the
// per-tensor table instead of "tensors", when the table would push the header past the format's
// 100 MB limit (a million tensors need ~150 MB).
inline constexpr const char* kTpExportTensorsFileKey = "tensors_file";

// TP rank `tp_rank`'s slice of the row-major tensor `full` (shape, element_size bytes per
// element) under `rule`, as a new row-major array of tp_local_shape(shape, rule, tp). With a
// stride s the split dimension is s blocks; the rank's part of each block follows the previous
// one. Throws InvalidArgument naming `name` when tp x stride does not divide the split dimension
// or tp_rank is outside [0, tp).
std::vector<std::uint8_t> extract_tp_slice(const std::string& name, const void* full,
                                           const std::vector<std::int64_t>& shape,
                                           std::size_t element_size, const TpRule& rule, int tp,
                                           int tp_rank);

// A whole input tensor (memory owned by the caller; need not be aligned).
struct SourceTensor {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
};

struct ExportedTensor {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};

struct TpExportOptions {
  int tp = 1;
  bool mxfp8 = false;          // MXFP8 for is_mxfp8_refit_candidate tensors of a float dtype
  std::optional<DType> dtype;  // convert the other float tensors to this (is_export_dtype)
  Mxfp8Options mxfp8_options;  // the scale rule; the layout is always row-major
};

// The float dtypes an export converts between: fp32, bf16 and fp16. Tensors of other dtypes
// (integers, fp8, scales) are copied as they are.
bool is_export_dtype(DType d);

// Checks the whole export up front (tp >= 1, rules and divisibility, dtypes, no NAME_scale clash)
// and throws InvalidArgument naming the first offending param.
void check_tp_export(const std::vector<SourceTensor>& tensors, const TpExportOptions& options);

// TP rank `tp_rank`'s tensors, in input order (an MXFP8 tensor is followed by its scale). The
// MXFP8 data / scale are quantize_mxfp8 of the slice in the (converted) dtype.
std::vector<ExportedTensor> export_tp_rank(const std::vector<SourceTensor>& tensors,
                                           const TpExportOptions& options, int tp_rank);

// The `__metadata__` of a rank's file: format, tp_size, tp_rank, MXFP8 settings and, under
// "tensors", a JSON object name -> {rule, partition_dim, stride, global_shape, local_shape,
// format ("plain" | "mxfp8"), source_dtype}.
std::map<std::string, std::string> tp_export_metadata(const std::vector<SourceTensor>& tensors,
                                                      const TpExportOptions& options, int tp_rank);

// The whole-model weights file of a checkpoint: DIR/model.safetensors, or `path` itself when it is
// a .safetensors file. Throws IoError naming the path when neither exists.
std::filesystem::path resolve_model_weights_file(const std::filesystem::path& path);

// "tp-rank-01-of-04.safetensors"
std::string tp_export_file_name(int tp_rank, int tp);

}  // namespace shardwise
