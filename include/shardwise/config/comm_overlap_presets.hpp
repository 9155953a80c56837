// The userbuffers_* TP-overlap presets Megatron-Bridge ships (module comm_overlap), encoded as C++
// data, and the rule that picks one automatically.
//
// A preset name spells the setup it was tuned for:
//   userbuffers_<precision>_<gpu>_h<hidden>_tp<tp>[_cp<cp>]_mbs<mbs>_seqlen<seqlen>[_lora]
// A preset matches a run when every part is equal: precision (bf16 / fp8), GPU family (h100 =
// Hopper, b200 = Blackwell), hidden size, TP size, CP size (1 when the name has no _cp),
// micro-batch size, sequence length, and whether the run is LoRA fine-tuning. Names are unique,
// so at most one preset matches.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "shardwise/config/gpu_arch.hpp"
#include "shardwise/config/tp_overlap_config.hpp"

namespace shardwise {

struct CommOverlapPreset {
  std::string_view name;
  TransformerLayerTPOverlapCfg cfg;
};

// All presets, in the order Megatron-Bridge's comm_overlap module lists them.
std::span<const CommOverlapPreset> comm_overlap_presets();

// The preset called `name`; throws ConfigError listing the known names otherwise.
const TransformerLayerTPOverlapCfg& comm_overlap_preset(std::string_view name);

// What a preset name encodes.
struct CommOverlapPresetKey {
  std::string precision;  // "bf16" or "fp8"
  GpuArch gpu = GpuArch::kNone;
  int hidden = 0;
  int tp = 1;
  int cp = 1;
  int micro_batch_size = 1;
  int seq_length = 0;
  bool lora = false;

  bool operator==(const CommOverlapPresetKey&) const = default;
};

// Parses a name of the form above; nullopt when it does not follow the pattern.
std::optional<CommOverlapPresetKey> parse_preset_name(std::string_view name);

// The name of the preset whose key equals `run`, if any.
std::optional<std::string_view> find_matching_preset(const CommOverlapPresetKey& run);

}  // namespace shardwise
