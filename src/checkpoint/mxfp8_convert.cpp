// safetensors <-> MXFP8 conversion: tensor selection, streamed quantize / dequantize producers
// for SafetensorsWriter, and the shardwise.mxfp8 metadata that makes the conversion reversible.
#include "shardwise/checkpoint/mxfp8_convert.hpp"

#include <re2/re2.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <system_error>
#include <utility>

#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/json_text.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {
namespace {

namespace fs = std::filesystem;

// Rows are processed in chunks of about this many elements: large enough for the codec's threads,
// small enough that a chunk's buffers stay a few tens of MB.
constexpr std::int64_t kChunkElements = std::int64_t{1} << 23;
constexpr std::size_t kCopyChunkBytes = std::size_t{64} << 20;
constexpr std::string_view kMxfp8MetaPrefix = "shardwise.mxfp8.";

// MXFP8 geometry rounds dimensions up to multiples of 128; keeping each at most 2^62 keeps that
// inside int64. Only an empty tensor can come near (a non-empty one is bounded by its file).
constexpr std::int64_t kMaxMxfp8Dim = std::int64_t{1} << 62;

void require_mxfp8_dims(std::string_view where, std::int64_t rows, std::int64_t cols) {
  SW_REQUIRE(rows <= kMaxMxfp8Dim && cols <= kMaxMxfp8Dim, InvalidArgument, where, ": shape [",
             rows, ", ", cols, "] has a dimension over 2^62, too large for MXFP8 scales");
}

std::int64_t rows_per_chunk(std::int64_t cols) {
  return std::max<std::int64_t>(1, kChunkElements / std::max<std::int64_t>(cols, 1));
}

bool is_codec_dtype(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

void require_distinct_paths(const fs::path& in, const fs::path& out) {
  std::error_code ec;
  const bool same = (fs::exists(out, ec) && fs::equivalent(in, out, ec)) ||
                    fs::weakly_canonical(in, ec) == fs::weakly_canonical(out, ec);
  SW_REQUIRE(!same, InvalidArgument, "convert: output ", out, " is the input file ", in,
             " (write to a different path)");
}

// Shared progress counter of one conversion.
class ProgressCounter {
 public:
  ProgressCounter(ConvertProgress callback, std::uint64_t total)
      : callback_(std::move(callback)), total_(total) {}
  void advance(std::uint64_t bytes) {
    done_ += bytes;
    if (callback_) callback_(done_, total_);
  }

 private:
  ConvertProgress callback_;
  std::uint64_t total_;
  std::uint64_t done_ = 0;
};

// One counter over every tensor byte of `file` (each is read once, converted or copied).
std::shared_ptr<ProgressCounter> progress_over(const SafetensorsFile& file,
                                               ConvertProgress callback) {
  std::uint64_t total = 0;
  for (const SafetensorsTensorInfo& info : file.tensors()) total += info.nbytes();
  return std::make_shared<ProgressCounter>(std::move(callback), total);
}

// Elements [offset, offset + count) of a tensor as a view: straight from the mapping when the
// bytes are aligned for the dtype (always, for files shardwise writes), else copied to scratch.
TensorView input_chunk(const SafetensorsFile& file, const SafetensorsTensorInfo& info,
                       std::int64_t offset, std::int64_t count, std::vector<std::byte>& scratch) {
  const std::size_t size = dtype_size(info.dtype);
  const std::byte* first = file.tensor(info.name).data + static_cast<std::size_t>(offset) * size;
  if (reinterpret_cast<std::uintptr_t>(first) % size == 0) {
    // The codec only reads the input; TensorView has no const flavour.
    return {const_cast<std::byte*>(first), count, info.dtype};
  }
  scratch.resize(static_cast<std::size_t>(count) * size);
  file.read_range(info.name, offset, count, scratch.data());
  return {scratch.data(), count, info.dtype};
}

// Adds `info` to the writer unchanged, streamed from the mapping so progress can be reported.
void add_copied(SafetensorsWriter& writer, const SafetensorsFile& file,
                const SafetensorsTensorInfo& info, std::shared_ptr<ProgressCounter> progress) {
  writer.add_streamed(info.name, info.dtype, info.shape,
                      [&file, &info, progress](SafetensorsChunkSink& sink) {
                        const SafetensorsTensorView view = file.tensor(info.name);
                        for (std::size_t at = 0; at < view.nbytes(); at += kCopyChunkBytes) {
                          const std::size_t n = std::min(kCopyChunkBytes, view.nbytes() - at);
                          sink.write(view.data + at, n);
                          progress->advance(n);
                        }
                      });
}

// Quantizes one 2-D tensor in row chunks. Data bytes go to `data_sink` when given; the scales of
// the whole tensor, in `options.layout`, are returned (they are 1/32 of the data).
std::vector<std::uint8_t> quantize_streamed(const SafetensorsFile& file,
                                            const SafetensorsTensorInfo& info,
                                            const Mxfp8ConvertOptions& options,
                                            SafetensorsChunkSink* data_sink,
                                            ProgressCounter* progress) {
  const std::int64_t rows = info.shape[0], cols = info.shape[1];
  const Mxfp8Geometry g = mxfp8_geometry(rows, cols, options.layout);
  std::vector<std::uint8_t> scales(static_cast<std::size_t>(g.scale_bytes), 0);
  // An empty tensor has nothing to quantize; its other dimension may be huge ([2^62, 0]), so the
  // row loop below must not run.
  if (rows == 0 || cols == 0) return scales;
  const std::int64_t step = rows_per_chunk(cols);
  const std::int64_t chunk_rows = std::min(step, rows);
  std::vector<std::uint8_t> data(static_cast<std::size_t>(chunk_rows * cols));
  std::vector<std::uint8_t> chunk_scales(static_cast<std::size_t>(chunk_rows * g.blocks_per_row));
  std::vector<std::byte> scratch;
  const Mxfp8Options codec{options.rule, Mxfp8ScaleLayout::kRowMajor, options.num_threads};
  for (std::int64_t r0 = 0; r0 < rows; r0 += step) {
    const std::int64_t n = std::min(step, rows - r0);
    const TensorView input = input_chunk(file, info, r0 * cols, n * cols, scratch);
    const Mxfp8View dst{
        std::span(data).first(static_cast<std::size_t>(n * cols)),
        std::span(chunk_scales).first(static_cast<std::size_t>(n * g.blocks_per_row)), n, cols,
        Mxfp8ScaleLayout::kRowMajor};
    quantize_mxfp8_into(input, n, cols, dst, 0, 0, codec);
    if (data_sink != nullptr) data_sink->write(dst.data.data(), dst.data.size());
    for (std::int64_t r = 0; r < n; ++r) {
      for (std::int64_t b = 0; b < g.blocks_per_row; ++b) {
        scales[static_cast<std::size_t>(
            mxfp8_scale_offset(options.layout, r0 + r, b, g.blocks_per_row))] =
            chunk_scales[static_cast<std::size_t>(r * g.blocks_per_row + b)];
      }
    }
    if (progress != nullptr) progress->advance(input.nbytes());
  }
  return scales;
}

std::vector<std::int64_t> scale_shape(const Mxfp8Geometry& g, Mxfp8ScaleLayout layout) {
  if (layout == Mxfp8ScaleLayout::kRowMajor) return {g.rows, g.blocks_per_row};
  return {(g.rows + 127) / 128 * 128, (g.blocks_per_row + 3) / 4 * 4};
}

std::string tensor_metadata_json(const SafetensorsTensorInfo& info, const Mxfp8Geometry& g) {
  const nlohmann::json doc = {{"dtype", std::string(dtype_safetensors_name(info.dtype))},
                              {"shape", info.shape},
                              {"blocks_per_row", g.blocks_per_row},
                              {"last_block_size", g.last_block_size}};
  return doc.dump();
}

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> names;
  if (list.empty()) return names;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = list.find(',', start);
    names.push_back(list.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return names;
}

// RE2 matches in time linear in the name with bounded stack (std::regex recursed per character
// and overflowed the stack on long names). Its syntax is the common ECMAScript subset without
// backreferences and lookaround.
using CompiledPatterns = std::vector<std::unique_ptr<RE2>>;

CompiledPatterns compile_patterns(const std::vector<std::string>& patterns, const char* what) {
  RE2::Options options;
  options.set_log_errors(false);  // the error goes into the exception, not to stderr
  CompiledPatterns compiled;
  for (const std::string& p : patterns) {
    auto re = std::make_unique<RE2>(p, options);
    SW_REQUIRE(re->ok(), InvalidArgument, "convert: invalid ", what, " regular expression '",
               printable(p, 200), "': ", printable(re->error(), 200));
    compiled.push_back(std::move(re));
  }
  return compiled;
}

bool any_match(const CompiledPatterns& patterns, std::string_view name) {
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::unique_ptr<RE2>& re) {
    return RE2::PartialMatch(re2::StringPiece(name.data(), name.size()), *re);
  });
}

// One restored pair, checked against its metadata.
struct Mxfp8Pair {
  const SafetensorsTensorInfo* data = nullptr;
  const SafetensorsTensorInfo* scale = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// The rest of a tensor's metadata (tensor_metadata_json) must agree with its shape: a file whose
// fields were edited or damaged is refused rather than decoded on the shape alone.
void check_block_fields(const nlohmann::json& doc, const Mxfp8Geometry& g,
                        const std::string& where) {
  const auto integer_field = [&](const char* field, std::int64_t expected) {
    SW_REQUIRE(doc.contains(field) && doc[field].is_number_integer() &&
                   doc[field].get<std::int64_t>() == expected,
               FormatError, where, ": metadata \"", field, "\" must be ", expected, " for shape [",
               g.rows, ", ", g.cols, "], found ",
               doc.contains(field) ? printable(doc[field].dump()) : std::string("nothing"));
  };
  integer_field("blocks_per_row", g.blocks_per_row);
  integer_field("last_block_size", g.last_block_size);
  std::optional<DType> original;
  if (doc.contains("dtype") && doc["dtype"].is_string()) {
    original = parse_safetensors_dtype(doc["dtype"].get<std::string>());
  }
  const bool known = original.has_value() && is_codec_dtype(*original);
  SW_REQUIRE(known, FormatError, where,
             ": metadata \"dtype\" must name the original dtype (F32, BF16, F16), found ",
             doc.contains("dtype") ? printable(doc["dtype"].dump()) : std::string("nothing"));
}

Mxfp8Pair checked_pair(const SafetensorsFile& file, const std::string& name,
                       Mxfp8ScaleLayout layout) {
  const std::string where = str_cat(file.path().string(), ": MXFP8 tensor '", printable(name), "'");
  const auto meta = file.metadata().find(str_cat(kMxfp8MetaTensorPrefix, name));
  SW_REQUIRE(meta != file.metadata().end(), FormatError, where, ": no metadata entry ",
             kMxfp8MetaTensorPrefix, printable(name));
  const nlohmann::json doc = parse_json_text(meta->second, str_cat(where, ": metadata"));
  SW_REQUIRE(doc.is_object() && doc.contains("shape") && doc["shape"].is_array() &&
                 doc["shape"].size() == 2 && doc["shape"][0].is_number_integer() &&
                 doc["shape"][1].is_number_integer(),
             FormatError, where, ": metadata '", printable(meta->second),
             "' is not a JSON object with a 2-D \"shape\"");
  Mxfp8Pair pair;
  pair.rows = doc["shape"][0].get<std::int64_t>();
  pair.cols = doc["shape"][1].get<std::int64_t>();
  SW_REQUIRE(pair.rows >= 0 && pair.cols >= 0, FormatError, where, ": negative shape in metadata");
  SW_REQUIRE(file.contains(name), FormatError, where, " is listed in ", kMxfp8MetaTensors,
             " but not in the file");
  const std::string scale_name = str_cat(name, kMxfp8ScaleSuffix);
  SW_REQUIRE(file.contains(scale_name), FormatError, where, ": scale tensor '",
             printable(scale_name), "' is missing");
  require_mxfp8_dims(where, pair.rows, pair.cols);
  pair.data = &file.info(name);
  pair.scale = &file.info(scale_name);
  const std::vector<std::int64_t> data_shape = {pair.rows, pair.cols};
  SW_REQUIRE(pair.data->dtype == DType::kFloat8E4M3 && pair.data->shape == data_shape, FormatError,
             where, " must be F8_E4M3 of shape ", shape_text(data_shape), ", found ",
             dtype_safetensors_name(pair.data->dtype), " of shape ", shape_text(pair.data->shape));
  const Mxfp8Geometry g = mxfp8_geometry(pair.rows, pair.cols, layout);
  check_block_fields(doc, g, where);
  SW_REQUIRE(pair.scale->dtype == DType::kFloat8E8M0 && pair.scale->numel() == g.scale_bytes,
             FormatError, where, ": scale tensor '", printable(scale_name),
             "' must be F8_E8M0 with ", g.scale_bytes, " elements, found ",
             dtype_safetensors_name(pair.scale->dtype), " with ", pair.scale->numel());
  return pair;
}

// Dequantizes one pair into `sink` in row chunks of the output dtype.
void dequantize_streamed(const SafetensorsFile& file, const Mxfp8Pair& pair,
                         Mxfp8ScaleLayout layout, DType dtype, int num_threads,
                         SafetensorsChunkSink& sink, ProgressCounter& progress) {
  const std::int64_t rows = pair.rows, cols = pair.cols;
  if (rows == 0 || cols == 0) return;  // nothing to write, however large the other dimension
  const std::int64_t blocks = mxfp8_geometry(rows, cols, layout).blocks_per_row;
  const auto* data = reinterpret_cast<const std::uint8_t*>(file.tensor(pair.data->name).data);
  const auto* scale = reinterpret_cast<const std::uint8_t*>(file.tensor(pair.scale->name).data);
  const std::int64_t step = rows_per_chunk(cols);
  const std::int64_t chunk_rows = std::min(step, rows);
  std::vector<std::uint8_t> chunk_scales(static_cast<std::size_t>(chunk_rows * blocks));
  std::vector<std::byte> out(static_cast<std::size_t>(chunk_rows * cols) * dtype_size(dtype));
  for (std::int64_t r0 = 0; r0 < rows; r0 += step) {
    const std::int64_t n = std::min(step, rows - r0);
    for (std::int64_t r = 0; r < n; ++r) {
      for (std::int64_t b = 0; b < blocks; ++b) {
        chunk_scales[static_cast<std::size_t>(r * blocks + b)] =
            scale[mxfp8_scale_offset(layout, r0 + r, b, blocks)];
      }
    }
    const Mxfp8ConstView src{
        std::span(data + r0 * cols, static_cast<std::size_t>(n * cols)),
        std::span<const std::uint8_t>(chunk_scales).first(static_cast<std::size_t>(n * blocks)), n,
        cols, Mxfp8ScaleLayout::kRowMajor};
    const TensorView dst{out.data(), n * cols, dtype};
    dequantize_mxfp8_into(src, dst, num_threads);
    sink.write(out.data(), dst.nbytes());
    progress.advance(static_cast<std::uint64_t>(n * cols));
  }
}

}  // namespace

struct Mxfp8TensorFilter::Patterns {
  CompiledPatterns include;
  CompiledPatterns exclude;
};

Mxfp8TensorFilter::Mxfp8TensorFilter(const std::vector<std::string>& include,
                                     const std::vector<std::string>& exclude)
    : patterns_(std::make_unique<Patterns>()) {
  patterns_->include = compile_patterns(include, "--include");
  std::vector<std::string> all_exclude = exclude;
  if (include.empty()) all_exclude.emplace_back(kMxfp8DefaultExcludePattern);
  patterns_->exclude = compile_patterns(all_exclude, "--exclude");
}

Mxfp8TensorFilter::~Mxfp8TensorFilter() = default;
Mxfp8TensorFilter::Mxfp8TensorFilter(Mxfp8TensorFilter&&) noexcept = default;
Mxfp8TensorFilter& Mxfp8TensorFilter::operator=(Mxfp8TensorFilter&&) noexcept = default;

bool Mxfp8TensorFilter::selects_name(std::string_view name) const {
  const bool included = patterns_->include.empty() || any_match(patterns_->include, name);
  return included && !any_match(patterns_->exclude, name);
}

Mxfp8Selection Mxfp8TensorFilter::classify(std::string_view name, DType dtype,
                                           const std::vector<std::int64_t>& shape) const {
  if (!selects_name(name)) return Mxfp8Selection::kNotSelected;
  if (!is_codec_dtype(dtype)) return Mxfp8Selection::kNotFloat;
  if (shape.size() != 2) return Mxfp8Selection::kNotTwoD;
  return Mxfp8Selection::kConvert;
}

std::string_view mxfp8_scale_rule_name(Mxfp8ScaleRule rule) {
  return rule == Mxfp8ScaleRule::kCeil ? "ceil" : "floor";
}

std::string_view mxfp8_scale_layout_name(Mxfp8ScaleLayout layout) {
  return layout == Mxfp8ScaleLayout::kRowMajor ? "2d" : "swizzled";
}

Mxfp8ScaleRule parse_mxfp8_scale_rule(std::string_view name) {
  if (name == "ceil") return Mxfp8ScaleRule::kCeil;
  if (name == "floor") return Mxfp8ScaleRule::kFloor;
  throw InvalidArgument(
      str_cat("unknown MXFP8 scale rule '", printable(name), "' (valid: ceil, floor)"));
}

Mxfp8ScaleLayout parse_mxfp8_scale_layout(std::string_view name) {
  if (name == "2d" || name == "row-major") return Mxfp8ScaleLayout::kRowMajor;
  if (name == "swizzled" || name == "swizzled128x4") return Mxfp8ScaleLayout::kSwizzled128x4;
  throw InvalidArgument(
      str_cat("unknown MXFP8 scale layout '", printable(name), "' (valid: 2d, swizzled)"));
}

namespace {

// Adds `info` as MXFP8: its E4M3 data, its E8M0 scale tensor and its per-tensor metadata.
void add_quantized(SafetensorsWriter& writer, const SafetensorsFile& file,
                   const SafetensorsTensorInfo& info, const Mxfp8ConvertOptions& options,
                   const std::shared_ptr<ProgressCounter>& progress, const fs::path& in) {
  const std::string scale_name = str_cat(info.name, kMxfp8ScaleSuffix);
  SW_REQUIRE(info.name.find(',') == std::string::npos, InvalidArgument, in.string(), ": tensor '",
             printable(info.name), "' has a comma in its name, which the ", kMxfp8MetaTensors,
             " list cannot hold; --exclude it");
  SW_REQUIRE(!file.contains(scale_name), InvalidArgument, in.string(), ": tensor '",
             printable(info.name), "' would get the scale tensor '", printable(scale_name),
             "', but the file already has a tensor of that name");
  require_mxfp8_dims(str_cat(in.string(), ": tensor '", printable(info.name), "'"), info.shape[0],
                     info.shape[1]);
  const Mxfp8Geometry g = mxfp8_geometry(info.shape[0], info.shape[1], options.layout);
  // The data producer runs first (equal element sizes keep insertion order) and leaves
  // the scales here for the scale producer; should the order ever differ, the scale
  // producer quantizes again on its own.
  auto scales = std::make_shared<std::optional<std::vector<std::uint8_t>>>();
  writer.add_streamed(info.name, DType::kFloat8E4M3, info.shape,
                      [&file, &info, &options, progress, scales](SafetensorsChunkSink& s) {
                        *scales = quantize_streamed(file, info, options, &s, progress.get());
                      });
  writer.add_streamed(scale_name, DType::kFloat8E8M0, scale_shape(g, options.layout),
                      [&file, &info, &options, scales](SafetensorsChunkSink& s) {
                        if (!scales->has_value()) {
                          *scales = quantize_streamed(file, info, options, nullptr, nullptr);
                        }
                        s.write((*scales)->data(), (*scales)->size());
                        scales->reset();
                      });
  writer.set_metadata(str_cat(kMxfp8MetaTensorPrefix, info.name), tensor_metadata_json(info, g));
}

// The file-level MXFP8 metadata: block size, scale rule and layout, and the converted tensors.
void set_mxfp8_file_metadata(SafetensorsWriter& writer, const Mxfp8ConvertOptions& options,
                             const std::vector<std::string>& converted) {
  std::string list;
  for (const std::string& name : converted) list += (list.empty() ? "" : ",") + name;
  writer.set_metadata(std::string(kMxfp8MetaBlockSize), std::to_string(kMxfp8BlockSize));
  writer.set_metadata(std::string(kMxfp8MetaScaleRule),
                      std::string(mxfp8_scale_rule_name(options.rule)));
  writer.set_metadata(std::string(kMxfp8MetaScaleLayout),
                      std::string(mxfp8_scale_layout_name(options.layout)));
  writer.set_metadata(std::string(kMxfp8MetaTensors), list);
}

// The file-level MXFP8 metadata a restore needs: the tensor list must be there, the block size
// must be ours; returns the scale layout.
Mxfp8ScaleLayout mxfp8_file_layout(const SafetensorsFile& file, const fs::path& in) {
  const auto& meta = file.metadata();
  SW_REQUIRE(meta.contains(std::string(kMxfp8MetaTensors)), FormatError, in.string(),
             ": not an MXFP8 checkpoint (no ", kMxfp8MetaTensors, " in __metadata__)");
  const auto block = meta.find(std::string(kMxfp8MetaBlockSize));
  SW_REQUIRE(block != meta.end() && block->second == std::to_string(kMxfp8BlockSize), FormatError,
             in.string(), ": ", kMxfp8MetaBlockSize, " must be \"", kMxfp8BlockSize, "\"");
  const auto layout_entry = meta.find(std::string(kMxfp8MetaScaleLayout));
  SW_REQUIRE(layout_entry != meta.end(), FormatError, in.string(), ": no ", kMxfp8MetaScaleLayout,
             " in __metadata__");
  try {
    return parse_mxfp8_scale_layout(layout_entry->second);
  } catch (const InvalidArgument& e) {
    throw FormatError(str_cat(in.string(), ": ", kMxfp8MetaScaleLayout, ": ", e.what()));
  }
}

// The listed data tensors with their checked scale tensors, and each scale's owner.
struct Mxfp8Pairs {
  std::map<std::string, Mxfp8Pair, std::less<>> pairs;
  std::map<std::string, std::string, std::less<>> scale_owner;
};

Mxfp8Pairs mxfp8_pairs(const SafetensorsFile& file, const fs::path& in, Mxfp8ScaleLayout layout) {
  Mxfp8Pairs out;
  const std::string& list = file.metadata().find(std::string(kMxfp8MetaTensors))->second;
  for (const std::string& name : split_names(list)) {
    SW_REQUIRE(!out.pairs.contains(name), FormatError, in.string(), ": tensor '", printable(name),
               "' is listed twice in ", kMxfp8MetaTensors);
    const Mxfp8Pair pair = checked_pair(file, name, layout);
    out.pairs.emplace(name, pair);
    out.scale_owner.emplace(pair.scale->name, name);
  }
  for (const auto& [scale, owner] : out.scale_owner) {
    SW_REQUIRE(!out.pairs.contains(scale), FormatError, in.string(), ": '", printable(scale),
               "' is listed in ", kMxfp8MetaTensors, " and is also the scale of '",
               printable(owner), "'");
  }
  // A tensor described but not listed would be copied as raw E4M3 bytes with its description
  // dropped: nothing could decode it afterwards.
  for (const auto& [key, value] : file.metadata()) {
    if (!key.starts_with(kMxfp8MetaTensorPrefix)) continue;
    const std::string name = key.substr(kMxfp8MetaTensorPrefix.size());
    SW_REQUIRE(out.pairs.contains(name), FormatError, in.string(), ": metadata entry '",
               printable(key), "' describes tensor '", printable(name), "', which ",
               kMxfp8MetaTensors, " does not list (a damaged MXFP8 file)");
  }
  return out;
}

}  // namespace

ConvertSummary convert_safetensors_to_mxfp8(const fs::path& in, const fs::path& out,
                                            const Mxfp8ConvertOptions& options) {
  const Mxfp8TensorFilter filter(options.include, options.exclude);
  require_distinct_paths(in, out);
  const SafetensorsFile file = SafetensorsFile::open(in);
  SW_REQUIRE(!file.metadata().contains(std::string(kMxfp8MetaTensors)), InvalidArgument,
             in.string(), " is already MXFP8 (its metadata has ", kMxfp8MetaTensors,
             "); convert it --to bf16 first");
  // The conversion writes this namespace; a key of it copied through made an output that its own
  // --to bf16 called damaged.
  for (const auto& [key, value] : file.metadata()) {
    SW_REQUIRE(!key.starts_with(kMxfp8MetaPrefix), FormatError, in.string(), ": its metadata has '",
               printable(key, 64), "', a key of the MXFP8 conversion's own (", kMxfp8MetaPrefix,
               "*), but no ", kMxfp8MetaTensors,
               ": a damaged MXFP8 file? remove the key or restore the file first");
  }

  ConvertSummary summary;
  summary.bytes_in = file.file_bytes();
  const auto progress = progress_over(file, options.progress);

  SafetensorsWriter writer;
  for (const auto& [key, value] : file.metadata()) writer.set_metadata(key, value);
  for (const SafetensorsTensorInfo& info : file.tensors()) {
    switch (filter.classify(info.name, info.dtype, info.shape)) {
      case Mxfp8Selection::kNotTwoD:
        ++summary.skipped_not_2d;
        break;
      case Mxfp8Selection::kNotFloat:
        ++summary.skipped_not_float;
        break;
      case Mxfp8Selection::kNotSelected:
        break;
      case Mxfp8Selection::kConvert:
        add_quantized(writer, file, info, options, progress, in);
        summary.converted_names.push_back(info.name);
        ++summary.converted;
        continue;
    }
    add_copied(writer, file, info, progress);
    ++summary.copied;
  }
  set_mxfp8_file_metadata(writer, options, summary.converted_names);
  summary.bytes_out = writer.file_bytes();
  writer.write_atomic(out);
  return summary;
}

ConvertSummary convert_safetensors_from_mxfp8(const fs::path& in, const fs::path& out,
                                              const Mxfp8RestoreOptions& options) {
  SW_REQUIRE(is_codec_dtype(options.dtype), InvalidArgument, "convert: cannot restore MXFP8 to ",
             dtype_name(options.dtype), " (expected fp32, bf16 or fp16)");
  require_distinct_paths(in, out);
  const SafetensorsFile file = SafetensorsFile::open(in);
  const auto& meta = file.metadata();
  const Mxfp8ScaleLayout layout = mxfp8_file_layout(file, in);
  const Mxfp8Pairs mx = mxfp8_pairs(file, in, layout);
  const auto& [pairs, scale_owner] = mx;

  ConvertSummary summary;
  summary.bytes_in = file.file_bytes();
  const auto progress = progress_over(file, options.progress);

  SafetensorsWriter writer;
  for (const auto& [key, value] : meta) {
    if (!key.starts_with(kMxfp8MetaPrefix)) writer.set_metadata(key, value);
  }
  for (const SafetensorsTensorInfo& info : file.tensors()) {
    if (scale_owner.contains(info.name) && !pairs.contains(info.name)) {
      // Consumed with its data tensor; count its bytes as done when the pair is restored.
      continue;
    }
    const auto pair = pairs.find(info.name);
    if (pair == pairs.end()) {
      add_copied(writer, file, info, progress);
      ++summary.copied;
      continue;
    }
    const Mxfp8Pair p = pair->second;
    writer.add_streamed(info.name, options.dtype, {p.rows, p.cols},
                        [&file, p, layout, &options, progress](SafetensorsChunkSink& sink) {
                          dequantize_streamed(file, p, layout, options.dtype, options.num_threads,
                                              sink, *progress);
                          progress->advance(p.scale->nbytes());
                        });
    summary.converted_names.push_back(info.name);
    ++summary.converted;
  }
  summary.bytes_out = writer.file_bytes();
  writer.write_atomic(out);
  return summary;
}

}  // namespace shardwise
