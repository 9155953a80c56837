// The TP-overlap plan: what the resolved comm_overlap settings ask of each GEMM slot of a
// transformer layer, turned into an algorithm this MPI backend runs (overlapped_gemm.hpp).
//   slot                           operation                       algorithms that apply
//   qkv_fprop fc1_fprop            all_gather_gemm (column fwd)    ring_exchange, pipeline
//   proj_dgrad fc2_dgrad           all_gather_gemm (row dgrad)     ring_exchange, pipeline
//   proj_fprop fc2_fprop           gemm_reduce_scatter (row fwd)   ring_exchange, pipeline
//   qkv_dgrad fc1_dgrad            column dgrad                    bulk, ring_exchange, pipeline
//   qkv_wgrad fc1_wgrad            column wgrad                    bulk
// A method that does not apply to its slot, and an unset slot, run as none (with a note). The
// GPU-only fields (num_sm, cga_size, set_sm_margin, atomic_gemm, fp8_buf, aggregate) are
// reported as not applicable on the MPI backend and change nothing.
#pragma once

#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/config/comm_overlap_config.hpp"
#include "shardwise/tp/overlap_algorithm.hpp"

namespace shardwise::tp {

// In TransformerLayerTPOverlapCfg::slots() order.
enum class GemmSlot {
  kQkvDgrad,
  kQkvWgrad,
  kFc1Dgrad,
  kFc1Wgrad,
  kQkvFprop,
  kProjDgrad,
  kFc1Fprop,
  kFc2Dgrad,
  kProjFprop,
  kFc2Fprop,
};
inline constexpr std::size_t kNumGemmSlots = 10;
std::string_view gemm_slot_name(GemmSlot slot);

struct SlotPlan {
  OverlapChoice choice;
  std::string configured_method = "unset";  // the config's method for this slot, or "unset"
  std::map<std::string, TpOverlapScalar> not_applicable;  // GPU-only fields and their values
  std::string note;  // why the algorithm differs from the configured method, if it does

  bool operator==(const SlotPlan&) const = default;
};

struct TpOverlapPlan {
  bool enabled = false;  // comm_overlap.tp_comm_overlap as resolved
  std::string backend = "mpi";
  std::string cfg_source = "off";  // the resolution's tp_comm_overlap_cfg_source
  std::string bootstrap_backend;   // as resolved ("" when off)
  std::vector<std::string> notes;
  std::array<SlotPlan, kNumGemmSlots> slots{};

  const SlotPlan& slot(GemmSlot s) const { return slots[static_cast<std::size_t>(s)]; }
  OverlapChoice choice(GemmSlot s) const { return slot(s).choice; }

  bool operator==(const TpOverlapPlan&) const = default;
};

// The per-slot config this backend uses when TP overlap is on and no config was given or
// matched (Transformer Engine's own default: ring_exchange for the all-gather GEMMs, pipeline
// with 4 splits for the reduce-scatter GEMMs, bulk for the column-parallel backward).
TransformerLayerTPOverlapCfg default_tp_overlap_cfg();

// Every slot `none` when TP overlap is off.
TpOverlapPlan tp_overlap_plan(const CommOverlapResolution& resolution);
// The plan of one per-slot config (TP overlap on).
TpOverlapPlan tp_overlap_plan(const TransformerLayerTPOverlapCfg& cfg);

// {"enabled", "backend", "cfg_source", "bootstrap_backend", "notes", "slots": {slot: {
//   "algorithm", "num_splits", "configured_method", "not_applicable_on_mpi_backend", "note"}}}
nlohmann::ordered_json to_json(const TpOverlapPlan& plan);

}  // namespace shardwise::tp
