// The userbuffers_* presets of Megatron-Bridge's training/comm_overlap.py, as data. Slot order in
// layer(): qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad, qkv_fprop, proj_dgrad, fc1_fprop,
// fc2_dgrad, proj_fprop, fc2_fprop.
#include "shardwise/config/comm_overlap_presets.hpp"

#include <charconv>
#include <vector>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

using Slot = std::optional<TPOverlapCfg>;
const Slot kNotOverlapped = std::nullopt;

Slot bulk(int num_sm, int cga_size, bool set_sm_margin) {
  BulkOverlapCfg cfg;
  cfg.num_sm = num_sm;
  cfg.cga_size = cga_size;
  cfg.set_sm_margin = set_sm_margin;
  return cfg;
}

Slot pipeline(int num_sm, int cga_size, int num_splits, bool set_sm_margin, bool fp8_buf,
              bool atomic_gemm) {
  PipelineOverlapCfg cfg;
  cfg.num_sm = num_sm;
  cfg.cga_size = cga_size;
  cfg.num_splits = num_splits;
  cfg.set_sm_margin = set_sm_margin;
  cfg.fp8_buf = fp8_buf;
  cfg.atomic_gemm = atomic_gemm;
  return cfg;
}

Slot ring(bool aggregate, int num_sm, int cga_size, bool set_sm_margin, bool fp8_buf,
          bool atomic_gemm) {
  RingExchangeOverlapCfg cfg;
  cfg.aggregate = aggregate;
  cfg.num_sm = num_sm;
  cfg.cga_size = cga_size;
  cfg.set_sm_margin = set_sm_margin;
  cfg.fp8_buf = fp8_buf;
  cfg.atomic_gemm = atomic_gemm;
  return cfg;
}

TransformerLayerTPOverlapCfg layer(Slot qkv_dgrad, Slot qkv_wgrad, Slot fc1_dgrad,
                                   Slot fc1_wgrad, Slot qkv_fprop, Slot proj_dgrad,
                                   Slot fc1_fprop, Slot fc2_dgrad, Slot proj_fprop,
                                   Slot fc2_fprop) {
  TransformerLayerTPOverlapCfg cfg;
  cfg.qkv_dgrad = std::move(qkv_dgrad);
  cfg.qkv_wgrad = std::move(qkv_wgrad);
  cfg.fc1_dgrad = std::move(fc1_dgrad);
  cfg.fc1_wgrad = std::move(fc1_wgrad);
  cfg.qkv_fprop = std::move(qkv_fprop);
  cfg.proj_dgrad = std::move(proj_dgrad);
  cfg.fc1_fprop = std::move(fc1_fprop);
  cfg.fc2_dgrad = std::move(fc2_dgrad);
  cfg.proj_fprop = std::move(proj_fprop);
  cfg.fc2_fprop = std::move(fc2_fprop);
  return cfg;
}

const std::vector<CommOverlapPreset>& preset_table() {
  static const std::vector<CommOverlapPreset> kPresets = {
      {"userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192",
       layer(bulk(4, 2, false),
             bulk(24, 2, false),
             bulk(2, 2, false),
             bulk(4, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             pipeline(24, 2, 4, true, false, false),
             pipeline(16, 2, 4, true, false, false))},
      {"userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192",
       layer(bulk(4, 2, false),
             bulk(24, 2, false),
             bulk(2, 2, false),
             bulk(4, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, true, false, false),
             ring(false, 1, 1, true, false, false))},
      {"userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192",
       layer(bulk(16, 2, false),
             bulk(24, 2, false),
             bulk(2, 2, false),
             bulk(4, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             pipeline(32, 2, 4, true, false, false),
             pipeline(16, 2, 4, true, false, false))},
      {"userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192",
       layer(bulk(4, 2, false),
             bulk(24, 2, false),
             bulk(2, 2, false),
             bulk(4, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, true, false, false),
             ring(false, 1, 1, true, false, false))},
      {"userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192",
       layer(bulk(2, 2, false),
             bulk(24, 2, false),
             bulk(2, 2, false),
             bulk(2, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             pipeline(24, 2, 4, true, false, false),
             pipeline(8, 2, 4, true, false, false))},
      {"userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192",
       layer(bulk(2, 2, false),
             bulk(24, 2, false),
             bulk(2, 2, false),
             bulk(2, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, true, false, false),
             ring(false, 1, 1, true, false, false))},
      {"userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192",
       layer(bulk(8, 2, false),
             bulk(24, 2, false),
             bulk(2, 2, false),
             bulk(2, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             pipeline(32, 2, 4, true, false, false),
             pipeline(8, 2, 4, true, false, false))},
      {"userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192",
       layer(bulk(8, 2, false),
             bulk(32, 2, false),
             bulk(2, 2, false),
             bulk(8, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, true, false, false),
             ring(false, 1, 1, true, false, false))},
      {"userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora",
       layer(bulk(2, 2, false),
             kNotOverlapped,
             pipeline(16, 2, 4, true, true, false),
             kNotOverlapped,
             ring(false, 1, 1, true, false, false),
             ring(false, 1, 1, true, false, false),
             ring(false, 1, 1, true, false, false),
             ring(false, 1, 1, true, false, false),
             ring(false, 1, 2, true, true, false),
             ring(false, 1, 2, true, true, false))},
      {"userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora",
       layer(bulk(2, 2, false),
             kNotOverlapped,
             pipeline(16, 2, 4, true, true, false),
             kNotOverlapped,
             ring(true, 1, 1, false, false, false),
             ring(true, 1, 1, false, false, false),
             ring(true, 1, 1, false, false, false),
             ring(true, 1, 1, false, false, false),
             pipeline(32, 2, 4, true, true, false),
             pipeline(16, 2, 4, true, true, false))},
      {"userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048",
       layer(bulk(8, 2, false),
             bulk(16, 2, false),
             bulk(4, 2, false),
             bulk(16, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             pipeline(16, 2, 4, true, false, false),
             pipeline(24, 2, 4, true, false, false))},
      {"userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048",
       layer(bulk(8, 2, false),
             bulk(16, 2, false),
             bulk(4, 2, false),
             bulk(16, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             pipeline(16, 2, 4, true, true, false),
             pipeline(24, 2, 4, true, true, false))},
      {"userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048",
       layer(bulk(4, 2, false),
             bulk(4, 2, false),
             bulk(2, 2, false),
             bulk(4, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             pipeline(24, 2, 4, true, false, false),
             ring(false, 1, 1, true, false, false))},
      {"userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048",
       layer(bulk(4, 2, false),
             bulk(4, 2, false),
             bulk(2, 2, false),
             bulk(4, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, true, false, false),
             ring(false, 1, 1, true, false, false))},
      {"userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048",
       layer(bulk(4, 2, false),
             bulk(16, 2, false),
             bulk(2, 2, false),
             bulk(8, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, true, false, false),
             ring(false, 1, 1, true, false, false))},
      {"userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048",
       layer(bulk(4, 2, false),
             bulk(16, 2, false),
             bulk(2, 2, false),
             bulk(8, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, true, false, false),
             ring(false, 1, 1, true, false, false))},
      {"userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096",
       layer(bulk(8, 2, false),
             bulk(32, 2, false),
             bulk(2, 2, false),
             bulk(8, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, true, false, false),
             ring(false, 1, 1, true, false, false))},
      {"userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096",
       layer(bulk(8, 2, false),
             bulk(32, 2, false),
             bulk(2, 2, false),
             bulk(8, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, true, false, false),
             pipeline(24, 2, 4, true, false, false))},
      {"userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096",
       layer(bulk(8, 2, false),
             bulk(32, 2, false),
             bulk(2, 2, false),
             bulk(8, 2, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, false, false, false),
             ring(false, 1, 1, true, false, false),
             ring(false, 1, 1, true, false, false))},
  };
  return kPresets;
}

// Reads the decimal number that follows `prefix` at the front of `part`.
std::optional<int> number_after(std::string_view part, std::string_view prefix) {
  if (part.substr(0, prefix.size()) != prefix || part.size() == prefix.size()) return std::nullopt;
  const std::string_view digits = part.substr(prefix.size());
  int value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size() || value < 1) return std::nullopt;
  return value;
}

}  // namespace

std::span<const CommOverlapPreset> comm_overlap_presets() { return preset_table(); }

const TransformerLayerTPOverlapCfg& comm_overlap_preset(std::string_view name) {
  for (const auto& preset : preset_table()) {
    if (preset.name == name) return preset.cfg;
  }
  std::string names;
  for (const auto& preset : preset_table()) {
    names += str_cat(names.empty() ? "" : ", ", preset.name);
  }
  throw ConfigError(
      str_cat("unknown TP-overlap preset '", printable(name), "' (valid presets: ", names, ")"));
}

std::optional<CommOverlapPresetKey> parse_preset_name(std::string_view name) {
  std::vector<std::string_view> parts;
  while (!name.empty()) {
    const auto cut = name.find('_');
    parts.push_back(name.substr(0, cut));
    name = cut == std::string_view::npos ? std::string_view() : name.substr(cut + 1);
  }
  CommOverlapPresetKey key;
  std::size_t i = 0;
  auto next = [&]() { return i < parts.size() ? parts[i++] : std::string_view(); };
  if (next() != "userbuffers") return std::nullopt;
  key.precision = std::string(next());
  if (key.precision != "bf16" && key.precision != "fp8") return std::nullopt;
  const std::string_view gpu = next();
  if (gpu == "h100") {
    key.gpu = GpuArch::kHopper;
  } else if (gpu == "b200") {
    key.gpu = GpuArch::kBlackwell;
  } else {
    return std::nullopt;
  }
  const auto hidden = number_after(next(), "h");
  const auto tp = number_after(next(), "tp");
  if (!hidden || !tp) return std::nullopt;
  key.hidden = *hidden;
  key.tp = *tp;
  std::string_view part = next();
  if (const auto cp = number_after(part, "cp")) {
    key.cp = *cp;
    part = next();
  }
  const auto mbs = number_after(part, "mbs");
  const auto seqlen = number_after(next(), "seqlen");
  if (!mbs || !seqlen) return std::nullopt;
  key.micro_batch_size = *mbs;
  key.seq_length = *seqlen;
  part = next();
  if (part == "lora") {
    key.lora = true;
  } else if (!part.empty()) {
    return std::nullopt;
  }
  if (i != parts.size()) return std::nullopt;
  return key;
}

std::optional<std::string_view> find_matching_preset(const CommOverlapPresetKey& run) {
  for (const auto& preset : preset_table()) {
    const auto key = parse_preset_name(preset.name);
    SW_CHECK(key.has_value(), "preset name ", preset.name, " does not follow the naming pattern");
    if (*key == run) return preset.name;
  }
  return std::nullopt;
}

}  // namespace shardwise
