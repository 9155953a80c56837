// The userbuffers_* presets of Megatron-Bridge's training/comm_overlap.py, as data, written as
// upstream writes them: each slot and each field by name (a field left out keeps its struct's
// default, which is upstream's).
#include "shardwise/config/comm_overlap_presets.hpp"

#include <charconv>
#include <vector>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

constexpr std::nullopt_t kNotOverlapped = std::nullopt;

const std::vector<CommOverlapPreset>& preset_table() {
  static const std::vector<CommOverlapPreset> kPresets = {
      {"userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 24, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop =
               PipelineOverlapCfg{
                   .num_sm = 24, .cga_size = 2, .num_splits = 4, .set_sm_margin = true},
           .fc2_fprop =
               PipelineOverlapCfg{
                   .num_sm = 16, .cga_size = 2, .num_splits = 4, .set_sm_margin = true},
       }},
      {"userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 24, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
           .fc2_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
       }},
      {"userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 16, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 24, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop =
               PipelineOverlapCfg{
                   .num_sm = 32, .cga_size = 2, .num_splits = 4, .set_sm_margin = true},
           .fc2_fprop =
               PipelineOverlapCfg{
                   .num_sm = 16, .cga_size = 2, .num_splits = 4, .set_sm_margin = true},
       }},
      {"userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 24, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
           .fc2_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
       }},
      {"userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 24, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop =
               PipelineOverlapCfg{
                   .num_sm = 24, .cga_size = 2, .num_splits = 4, .set_sm_margin = true},
           .fc2_fprop =
               PipelineOverlapCfg{
                   .num_sm = 8, .cga_size = 2, .num_splits = 4, .set_sm_margin = true},
       }},
      {"userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 24, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
           .fc2_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
       }},
      {"userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 8, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 24, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop =
               PipelineOverlapCfg{
                   .num_sm = 32, .cga_size = 2, .num_splits = 4, .set_sm_margin = true},
           .fc2_fprop =
               PipelineOverlapCfg{
                   .num_sm = 8, .cga_size = 2, .num_splits = 4, .set_sm_margin = true},
       }},
      {"userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 8, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 32, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 8, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
           .fc2_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
       }},
      {"userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .qkv_wgrad = kNotOverlapped,
           .fc1_dgrad = PipelineOverlapCfg{.num_sm = 16,
                                           .cga_size = 2,
                                           .num_splits = 4,
                                           .set_sm_margin = true,
                                           .fp8_buf = true},
           .fc1_wgrad = kNotOverlapped,
           .qkv_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
           .proj_dgrad = RingExchangeOverlapCfg{.set_sm_margin = true},
           .fc1_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
           .fc2_dgrad = RingExchangeOverlapCfg{.set_sm_margin = true},
           .proj_fprop =
               RingExchangeOverlapCfg{.cga_size = 2, .set_sm_margin = true, .fp8_buf = true},
           .fc2_fprop =
               RingExchangeOverlapCfg{.cga_size = 2, .set_sm_margin = true, .fp8_buf = true},
       }},
      {"userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .qkv_wgrad = kNotOverlapped,
           .fc1_dgrad = PipelineOverlapCfg{.num_sm = 16,
                                           .cga_size = 2,
                                           .num_splits = 4,
                                           .set_sm_margin = true,
                                           .fp8_buf = true},
           .fc1_wgrad = kNotOverlapped,
           .qkv_fprop = RingExchangeOverlapCfg{.aggregate = true},
           .proj_dgrad = RingExchangeOverlapCfg{.aggregate = true},
           .fc1_fprop = RingExchangeOverlapCfg{.aggregate = true},
           .fc2_dgrad = RingExchangeOverlapCfg{.aggregate = true},
           .proj_fprop = PipelineOverlapCfg{.num_sm = 32,
                                            .cga_size = 2,
                                            .num_splits = 4,
                                            .set_sm_margin = true,
                                            .fp8_buf = true},
           .fc2_fprop = PipelineOverlapCfg{.num_sm = 16,
                                           .cga_size = 2,
                                           .num_splits = 4,
                                           .set_sm_margin = true,
                                           .fp8_buf = true},
       }},
      {"userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 8, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 16, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 16, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop =
               PipelineOverlapCfg{
                   .num_sm = 16, .cga_size = 2, .num_splits = 4, .set_sm_margin = true},
           .fc2_fprop =
               PipelineOverlapCfg{
                   .num_sm = 24, .cga_size = 2, .num_splits = 4, .set_sm_margin = true},
       }},
      {"userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 8, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 16, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 16, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop =
               PipelineOverlapCfg{.num_sm = 16,
                                  .cga_size = 2,
                                  .num_splits = 4,
                                  .set_sm_margin = true,
                                  .fp8_buf = true},
           .fc2_fprop = PipelineOverlapCfg{.num_sm = 24,
                                           .cga_size = 2,
                                           .num_splits = 4,
                                           .set_sm_margin = true,
                                           .fp8_buf = true},
       }},
      {"userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop =
               PipelineOverlapCfg{
                   .num_sm = 24, .cga_size = 2, .num_splits = 4, .set_sm_margin = true},
           .fc2_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
       }},
      {"userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
           .fc2_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
       }},
      {"userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 16, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 8, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
           .fc2_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
       }},
      {"userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 4, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 16, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 8, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
           .fc2_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
       }},
      {"userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 8, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 32, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 8, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
           .fc2_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
       }},
      {"userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 8, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 32, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 8, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
           .fc2_fprop =
               PipelineOverlapCfg{
                   .num_sm = 24, .cga_size = 2, .num_splits = 4, .set_sm_margin = true},
       }},
      {"userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096",
       {
           .qkv_dgrad = BulkOverlapCfg{.num_sm = 8, .cga_size = 2},
           .qkv_wgrad = BulkOverlapCfg{.num_sm = 32, .cga_size = 2},
           .fc1_dgrad = BulkOverlapCfg{.num_sm = 2, .cga_size = 2},
           .fc1_wgrad = BulkOverlapCfg{.num_sm = 8, .cga_size = 2},
           .qkv_fprop = RingExchangeOverlapCfg{},
           .proj_dgrad = RingExchangeOverlapCfg{},
           .fc1_fprop = RingExchangeOverlapCfg{},
           .fc2_dgrad = RingExchangeOverlapCfg{},
           .proj_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
           .fc2_fprop = RingExchangeOverlapCfg{.set_sm_margin = true},
       }},
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
