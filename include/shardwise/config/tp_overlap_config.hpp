// Tensor-parallel communication-overlap settings per GEMM of a transformer layer, mirroring
// Megatron-Bridge's TPOverlapCfg dataclasses (module comm_overlap). The backend (Transformer
// Engine's userbuffers) receives them as a flat map, see to_backend_map().
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace shardwise {

// Split the GEMM into num_splits chunks and overlap each chunk's communication with the next.
// num_sm, cga_size, num_splits and set_sm_margin have no default upstream: 0 marks them unset
// and validate() rejects them.
struct PipelineOverlapCfg {
  int num_sm = 0;
  int cga_size = 0;
  int num_splits = 0;
  bool set_sm_margin = false;
  bool fp8_buf = false;  // upstream's default is the tuple (False,); the intent is false
  bool atomic_gemm = false;
  std::string method = "pipeline";

  bool operator==(const PipelineOverlapCfg&) const = default;
};

// Point-to-point ring exchange of the GEMM's chunks between TP ranks.
struct RingExchangeOverlapCfg {
  bool aggregate = false;
  int num_sm = 1;
  int cga_size = 1;
  bool set_sm_margin = false;
  bool fp8_buf = false;
  bool atomic_gemm = false;
  std::string method = "ring_exchange";

  bool operator==(const RingExchangeOverlapCfg&) const = default;
};

// One bulk collective overlapped with an independent GEMM.
struct BulkOverlapCfg {
  int num_sm = 0;
  int cga_size = 0;
  bool set_sm_margin = false;
  std::string method = "bulk";

  bool operator==(const BulkOverlapCfg&) const = default;
};

using TPOverlapCfg = std::variant<PipelineOverlapCfg, RingExchangeOverlapCfg, BulkOverlapCfg>;

// The method string of the alternative held: "pipeline", "ring_exchange" or "bulk".
std::string_view expected_method(const TPOverlapCfg& cfg);

// The ten overlappable GEMMs of a transformer layer; an unset slot is not overlapped.
struct TransformerLayerTPOverlapCfg {
  std::optional<TPOverlapCfg> qkv_dgrad;
  std::optional<TPOverlapCfg> qkv_wgrad;
  std::optional<TPOverlapCfg> fc1_dgrad;
  std::optional<TPOverlapCfg> fc1_wgrad;
  std::optional<TPOverlapCfg> qkv_fprop;
  std::optional<TPOverlapCfg> proj_dgrad;
  std::optional<TPOverlapCfg> fc1_fprop;
  std::optional<TPOverlapCfg> fc2_dgrad;
  std::optional<TPOverlapCfg> proj_fprop;
  std::optional<TPOverlapCfg> fc2_fprop;

  using Slot = std::optional<TPOverlapCfg> TransformerLayerTPOverlapCfg::*;
  // Slot names in declaration order, with the member each one names.
  static const std::array<std::pair<std::string_view, Slot>, 10>& slots();

  bool operator==(const TransformerLayerTPOverlapCfg&) const = default;
};

// Throws ConfigError naming `where`.slot.field: method not matching the alternative (an unknown
// method), num_sm / cga_size / num_splits < 1.
void validate(const TransformerLayerTPOverlapCfg& cfg, std::string_view where);

// What the TP-overlap backend is handed: "slot.field" -> scalar (e.g. "proj_fprop.num_splits"
// -> 4). Unset slots are left out, as Megatron-Bridge drops None entries.
using TpOverlapScalar = std::variant<bool, std::int64_t, double, std::string>;
using TpOverlapBackendMap = std::map<std::string, TpOverlapScalar>;
TpOverlapBackendMap to_backend_map(const TransformerLayerTPOverlapCfg& cfg);

// Field name -> scalar of one GEMM's config (the keys the upstream dataclass has).
std::map<std::string, TpOverlapScalar> overlap_fields(const TPOverlapCfg& cfg);

}  // namespace shardwise
