#include "shardwise/reshard/tp_export.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_set>

#include "shardwise/core/error.hpp"
#include "shardwise/core/float_convert.hpp"

namespace shardwise {
namespace {

// Product of shape[begin, end), refusing overflow (an empty tensor from a file may carry huge
// dimensions next to its zero, e.g. [2^62, 2^62, 0]).
std::int64_t product(const std::vector<std::int64_t>& shape, std::size_t begin, std::size_t end) {
  std::int64_t n = 1;
  for (std::size_t i = begin; i < end; ++i) {
    if (shape[i] == 0) return 0;
  }
  for (std::size_t i = begin; i < end; ++i) {
    SW_REQUIRE(shape[i] >= 0 && !__builtin_mul_overflow(n, shape[i], &n), ShapeError, "shape ",
               to_string(shape), " has too many elements");
  }
  return n;
}

// A finite value the narrower dtype cannot hold (fp16 above 65504) became inf in the conversion:
// refused, naming the first, rather than exported as inf.
void require_no_overflow(const std::vector<std::uint8_t>& in, DType from,
                         const std::vector<std::uint8_t>& out, DType to, const std::string& name) {
  if (dtype_size(to) != 2) return;  // to fp32: every fp16 / bf16 value fits
  const std::uint16_t exponent = to == DType::kFloat16 ? 0x7c00 : 0x7f80;
  const std::size_t from_size = dtype_size(from);
  for (std::size_t i = 0; i * 2 < out.size(); ++i) {
    std::uint16_t bits = 0;
    std::memcpy(&bits, out.data() + i * 2, 2);
    if ((bits & exponent) != exponent) continue;
    float value = 0;  // the source element, as fp32
    convert_floats(TensorView{const_cast<std::uint8_t*>(in.data()) + i * from_size, 1, from},
                   TensorView{&value, 1, DType::kFloat32}, name);
    SW_REQUIRE(!std::isfinite(value), InvalidArgument, "param ", name, ": element ", i, " (", value,
               ") does not fit ", dtype_name(to), "; export it as ",
               to == DType::kFloat16 ? "bf16 or fp32" : "fp32");
  }
}

// A row-major float array converted between fp32 / bf16 / fp16 by core's bulk conversion (RNE
// through fp32, which holds every bf16 and fp16 value exactly).
std::vector<std::uint8_t> converted_floats(std::vector<std::uint8_t>& in, DType from, DType to,
                                           const std::string& name) {
  if (from == to) return in;
  const auto n = static_cast<std::int64_t>(in.size() / dtype_size(from));
  std::vector<std::uint8_t> out(static_cast<std::size_t>(n) * dtype_size(to));
  convert_floats(TensorView{in.data(), n, from}, TensorView{out.data(), n, to}, name);
  require_no_overflow(in, from, out, to, name);
  return out;
}

// Bytes of a whole tensor: counted in bits, as sub-byte dtypes (F4, F6_*) pack elements.
std::size_t tensor_bytes(const SourceTensor& t) {
  const std::int64_t n = product(t.shape, 0, t.shape.size());
  std::uint64_t bits = 0;
  SW_REQUIRE(!__builtin_mul_overflow(static_cast<std::uint64_t>(n), dtype_bits(t.dtype), &bits),
             ShapeError, "param ", t.name, ": shape ", to_string(t.shape),
             " is too large in bytes");
  return static_cast<std::size_t>(bits / 8);
}

bool exports_as_mxfp8(const SourceTensor& t, const TpExportOptions& options) {
  return options.mxfp8 && is_export_dtype(t.dtype) && is_mxfp8_refit_candidate(t.name, t.shape);
}

DType plain_dtype(const SourceTensor& t, const TpExportOptions& options) {
  return options.dtype && is_export_dtype(t.dtype) ? *options.dtype : t.dtype;
}

void check_split(const std::string& name, const std::vector<std::int64_t>& shape,
                 const TpRule& rule, int tp) {
  SW_REQUIRE(tp >= 1, InvalidArgument, "tensor-parallel size ", tp, " must be >= 1");
  if (rule.kind == TpKind::kReplicated) return;
  const std::int64_t d = shape[static_cast<std::size_t>(rule.partition_dim)];
  const std::int64_t parts = static_cast<std::int64_t>(tp) * rule.stride;
  SW_REQUIRE(d % parts == 0, InvalidArgument, "param ", name, " (", to_string(rule), "): dim ",
             rule.partition_dim, " of shape ", to_string(shape), " is not divisible by tp ", tp,
             rule.stride != 1 ? str_cat(" x stride ", rule.stride) : "");
}

// `text` as a JSON string literal, as nlohmann's dump() writes it (plain ASCII names skip it).
std::string json_text(const std::string& text) {
  const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
    return c >= 0x20 && c < 0x7F && c != '"' && c != '\\';
  });
  return plain ? str_cat("\"", text, "\"") : nlohmann::json(text).dump();
}

void append_json_ints(std::string& out, const std::vector<std::int64_t>& values) {
  out += '[';
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  out += ']';
}

// What the export does with the tensor's dtype must be possible: a split needs whole-byte
// elements, and a conversion asked for (--dtype, --mxfp8) a dtype the codecs read. Integer, bool
// and shardwise's own FP8 tensors are copied unchanged.
void check_dtype_handling(const SourceTensor& t, const TpRule& rule,
                          const TpExportOptions& options) {
  const std::string dtype(dtype_safetensors_name(t.dtype));
  SW_REQUIRE(rule.kind == TpKind::kReplicated || options.tp == 1 || dtype_bits(t.dtype) % 8 == 0,
             InvalidArgument, "param ", t.name, " (", to_string(rule), "): ", dtype, " packs ",
             dtype_bits(t.dtype), "-bit elements into shared bytes and cannot be split for tp ",
             options.tp);
  if (!is_storage_only(t.dtype) || !is_floating(t.dtype)) return;
  SW_REQUIRE(!options.dtype, InvalidArgument, "param ", t.name, " is ", dtype,
             ", which the export dtype (", dtype_name(*options.dtype),
             ") cannot be converted from: only F32, BF16 and F16 tensors convert (without a "
             "dtype the tensor is copied unchanged)");
  SW_REQUIRE(!(options.mxfp8 && is_mxfp8_refit_candidate(t.name, t.shape)), InvalidArgument,
             "param ", t.name, " is ", dtype,
             ", which MXFP8 export cannot quantize: only F32, BF16 and F16 weights convert");
}

}  // namespace

std::vector<std::uint8_t> extract_tp_slice(const std::string& name, const void* full,
                                           const std::vector<std::int64_t>& shape,
                                           std::size_t element_size, const TpRule& rule, int tp,
                                           int tp_rank) {
  check_split(name, shape, rule, tp);
  SW_REQUIRE(tp_rank >= 0 && tp_rank < tp, InvalidArgument, "param ", name, ": tp rank ", tp_rank,
             " outside [0, ", tp, ")");
  const auto* src = static_cast<const std::uint8_t*>(full);
  const std::int64_t total = product(shape, 0, shape.size());
  // Loops below run over rows that hold elements: an empty tensor has none, however large its
  // other dimensions ([2^62, 0] split by rows spun through 2^62 empty copies).
  if (total == 0) return {};
  if (rule.kind == TpKind::kReplicated || tp == 1) {
    return std::vector<std::uint8_t>(src, src + static_cast<std::size_t>(total) * element_size);
  }
  // View the tensor as [outer, D, inner] around the split dim: each (outer index, stride block)
  // contributes one contiguous run of part * inner elements.
  const auto dim = static_cast<std::size_t>(rule.partition_dim);
  const std::int64_t outer = product(shape, 0, dim);
  const std::int64_t split = shape[dim];
  const std::int64_t inner = product(shape, dim + 1, shape.size());
  const std::int64_t block = split / rule.stride;
  const std::int64_t part = block / tp;
  const std::size_t run = static_cast<std::size_t>(part * inner) * element_size;
  std::vector<std::uint8_t> out(static_cast<std::size_t>(total / tp) * element_size);
  std::uint8_t* dst = out.data();
  for (std::int64_t o = 0; o < outer; ++o) {
    for (int s = 0; s < rule.stride; ++s) {
      const std::int64_t row = o * split + s * block + tp_rank * part;
      std::memcpy(dst, src + static_cast<std::size_t>(row * inner) * element_size, run);
      dst += run;
    }
  }
  return out;
}

bool is_export_dtype(DType d) {
  return d == DType::kFloat32 || d == DType::kBFloat16 || d == DType::kFloat16;
}

void check_tp_export(const std::vector<SourceTensor>& tensors, const TpExportOptions& options) {
  SW_REQUIRE(options.tp >= 1, InvalidArgument, "tensor-parallel size ", options.tp,
             " must be >= 1");
  SW_REQUIRE(!options.dtype || is_export_dtype(*options.dtype), InvalidArgument, "export dtype ",
             options.dtype ? dtype_name(*options.dtype) : "", " is not one of fp32, bf16, fp16");
  // Hashed views of the names: the export runs this check once per rank over every tensor.
  std::unordered_set<std::string_view> names;
  names.reserve(tensors.size());
  for (const SourceTensor& t : tensors) {
    SW_REQUIRE(names.insert(t.name).second, InvalidArgument, "param ", t.name, " appears twice");
  }
  for (const SourceTensor& t : tensors) {
    SW_REQUIRE(t.data != nullptr || product(t.shape, 0, t.shape.size()) == 0, InvalidArgument,
               "param ", t.name, " has no data");
    const TpRule rule = megatron_tp_rule(t.name, t.shape);
    check_split(t.name, t.shape, rule, options.tp);
    check_dtype_handling(t, rule, options);
    if (exports_as_mxfp8(t, options)) {
      const std::string scale = t.name + kMxfp8ScaleSuffix;
      SW_REQUIRE(names.count(scale) == 0, InvalidArgument, "param ", t.name,
                 " would be written as MXFP8 with its scales under ", scale,
                 ", a name the input already uses");
    }
  }
}

std::vector<ExportedTensor> export_tp_rank(const std::vector<SourceTensor>& tensors,
                                           const TpExportOptions& options, int tp_rank) {
  check_tp_export(tensors, options);
  std::vector<ExportedTensor> out;
  for (const SourceTensor& t : tensors) {
    const TpRule rule = megatron_tp_rule(t.name, t.shape);
    const std::vector<std::int64_t> local = tp_local_shape(t.shape, rule, options.tp);
    std::vector<std::uint8_t> slice;
    if (rule.kind == TpKind::kReplicated || options.tp == 1) {
      // Copied whole, in bytes (sub-byte dtypes included).
      const auto* bytes = static_cast<const std::uint8_t*>(t.data);
      slice.assign(bytes, bytes + tensor_bytes(t));
    } else {
      slice =
          extract_tp_slice(t.name, t.data, t.shape, dtype_size(t.dtype), rule, options.tp, tp_rank);
    }
    const DType dtype = plain_dtype(t, options);
    if (dtype != t.dtype) slice = converted_floats(slice, t.dtype, dtype, t.name);
    if (!exports_as_mxfp8(t, options)) {
      out.push_back({t.name, dtype, local, std::move(slice)});
      continue;
    }
    Mxfp8Options mx = options.mxfp8_options;
    mx.layout = Mxfp8ScaleLayout::kRowMajor;
    const std::int64_t n = static_cast<std::int64_t>(slice.size() / dtype_size(dtype));
    Mxfp8Tensor q = quantize_mxfp8({slice.data(), n, dtype}, local[0], local[1], mx);
    const std::int64_t blocks = q.geometry().blocks_per_row;
    out.push_back({t.name, DType::kFloat8E4M3, local, std::move(q.data)});
    out.push_back(
        {t.name + kMxfp8ScaleSuffix, DType::kFloat8E8M0, {local[0], blocks}, std::move(q.scale)});
  }
  return out;
}

std::map<std::string, std::string> tp_export_metadata(const std::vector<SourceTensor>& tensors,
                                                      const TpExportOptions& options, int tp_rank) {
  // The object is written entry by entry: an ordered_json object looks every key up linearly,
  // which made a 200k-tensor export take a minute per rank. Names are unique (check_tp_export).
  std::string per_tensor = "{";
  for (const SourceTensor& t : tensors) {
    const TpRule rule = megatron_tp_rule(t.name, t.shape);
    const bool mxfp8 = exports_as_mxfp8(t, options);
    // Written as text (what ordered_json's dump() gave, without its allocations per field).
    const std::vector<std::int64_t> local = tp_local_shape(t.shape, rule, options.tp);
    std::string entry =
        str_cat("{\"rule\":\"", tp_kind_name(rule.kind),
                "\",\"partition_dim\":", rule.kind == TpKind::kReplicated ? -1 : rule.partition_dim,
                ",\"stride\":", rule.stride, ",\"global_shape\":");
    append_json_ints(entry, t.shape);
    entry += ",\"local_shape\":";
    append_json_ints(entry, local);
    entry += str_cat(",\"format\":\"", mxfp8 ? "mxfp8" : "plain", "\",\"source_dtype\":\"",
                     dtype_safetensors_name(t.dtype), "\"");
    if (mxfp8) entry += str_cat(",\"scale_tensor\":", json_text(t.name + kMxfp8ScaleSuffix));
    entry += '}';
    if (per_tensor.size() > 1) per_tensor += ',';
    per_tensor += json_text(t.name);
    per_tensor += ':';
    per_tensor += entry;
  }
  per_tensor += '}';
  std::map<std::string, std::string> meta;
  meta["format"] = kTpExportFormat;
  meta["tp_size"] = std::to_string(options.tp);
  meta["tp_rank"] = std::to_string(tp_rank);
  meta["mxfp8"] = options.mxfp8 ? "true" : "false";
  if (options.mxfp8) {
    meta["mxfp8_block_size"] = std::to_string(kMxfp8BlockSize);
    meta["mxfp8_scale_rule"] =
        options.mxfp8_options.rule == Mxfp8ScaleRule::kCeil ? "ceil" : "floor";
    meta["mxfp8_scale_layout"] = "row_major";
  }
  meta["tensors"] = std::move(per_tensor);
  return meta;
}

std::filesystem::path resolve_model_weights_file(const std::filesystem::path& path) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  SW_REQUIRE(!ec, IoError, "cannot access checkpoint ", path.string(), ": ", ec.message());
  SW_REQUIRE(exists, IoError, "checkpoint ", path.string(),
             " does not exist (expected a checkpoint directory or a .safetensors file)");
  // Not a directory: the file itself (its reader refuses a FIFO or device, naming what it is).
  if (!std::filesystem::is_directory(path, ec)) {
    SW_REQUIRE(path.extension() == ".safetensors", IoError, "checkpoint ", path.string(),
               " is a file but not a .safetensors file");
    return path;
  }
  const std::filesystem::path weights = path / "model.safetensors";
  const bool has_weights = std::filesystem::exists(weights, ec);
  SW_REQUIRE(!ec, IoError, "cannot access ", weights.string(), ": ", ec.message());
  SW_REQUIRE(has_weights, IoError, "checkpoint directory ", path.string(),
             " has no model.safetensors");
  return weights;
}

std::string tp_export_file_name(int tp_rank, int tp) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "tp-rank-%02d-of-%02d.safetensors", tp_rank, tp);
  return buffer;
}

}  // namespace shardwise
