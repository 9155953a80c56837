#include "shardwise/tp/overlap_plan.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise::tp {
namespace {

enum class SlotKind { kGatherGemm, kGemmScatter, kColumnDgrad, kColumnWgrad };

SlotKind slot_kind(GemmSlot slot) {
  switch (slot) {
    case GemmSlot::kQkvFprop:
    case GemmSlot::kFc1Fprop:
    case GemmSlot::kProjDgrad:
    case GemmSlot::kFc2Dgrad:
      return SlotKind::kGatherGemm;
    case GemmSlot::kProjFprop:
    case GemmSlot::kFc2Fprop:
      return SlotKind::kGemmScatter;
    case GemmSlot::kQkvDgrad:
    case GemmSlot::kFc1Dgrad:
      return SlotKind::kColumnDgrad;
    case GemmSlot::kQkvWgrad:
    case GemmSlot::kFc1Wgrad:
      return SlotKind::kColumnWgrad;
  }
  return SlotKind::kGatherGemm;
}

bool applies(SlotKind kind, OverlapAlgorithm algorithm) {
  switch (kind) {
    case SlotKind::kGatherGemm:
    case SlotKind::kGemmScatter:
      return algorithm != OverlapAlgorithm::kBulk;
    case SlotKind::kColumnDgrad:
      return true;
    case SlotKind::kColumnWgrad:
      return algorithm == OverlapAlgorithm::kBulk || algorithm == OverlapAlgorithm::kNone;
  }
  return false;
}

const char* applicable_methods(SlotKind kind) {
  switch (kind) {
    case SlotKind::kGatherGemm:
    case SlotKind::kGemmScatter:
      return "ring_exchange or pipeline";
    case SlotKind::kColumnDgrad:
      return "bulk, ring_exchange or pipeline";
    case SlotKind::kColumnWgrad:
      return "bulk";
  }
  return "";
}

SlotPlan plan_slot(GemmSlot slot, const std::optional<TPOverlapCfg>& cfg) {
  SlotPlan out;
  if (!cfg) {
    out.note = "not overlapped: the slot is unset";
    return out;
  }
  out.configured_method = std::string(expected_method(*cfg));
  const OverlapAlgorithm wanted = overlap_algorithm_from_name(out.configured_method, "method");
  for (auto& [field, value] : overlap_fields(*cfg)) {
    if (field == "method" || field == "num_splits") continue;  // the fields this backend uses
    out.not_applicable.emplace(field, value);
  }
  const SlotKind kind = slot_kind(slot);
  if (!applies(kind, wanted)) {
    out.note = str_cat("runs as none: ", out.configured_method, " does not apply to ",
                       gemm_slot_name(slot), " (", applicable_methods(kind), ")");
    return out;
  }
  out.choice.algorithm = wanted;
  if (const auto* pipeline = std::get_if<PipelineOverlapCfg>(&*cfg)) {
    out.choice.num_splits = pipeline->num_splits;
  }
  return out;
}

}  // namespace

std::string_view gemm_slot_name(GemmSlot slot) {
  return TransformerLayerTPOverlapCfg::slots()[static_cast<std::size_t>(slot)].first;
}

TransformerLayerTPOverlapCfg default_tp_overlap_cfg() {
  BulkOverlapCfg bulk;
  bulk.num_sm = 4;
  bulk.cga_size = 2;
  PipelineOverlapCfg pipeline;
  pipeline.num_sm = 16;
  pipeline.cga_size = 2;
  pipeline.num_splits = 4;
  pipeline.set_sm_margin = true;
  TransformerLayerTPOverlapCfg cfg;
  cfg.qkv_dgrad = cfg.qkv_wgrad = cfg.fc1_dgrad = cfg.fc1_wgrad = bulk;
  cfg.qkv_fprop = cfg.fc1_fprop = cfg.proj_dgrad = cfg.fc2_dgrad = RingExchangeOverlapCfg{};
  cfg.proj_fprop = cfg.fc2_fprop = pipeline;
  return cfg;
}

TpOverlapPlan tp_overlap_plan(const TransformerLayerTPOverlapCfg& cfg) {
  TpOverlapPlan plan;
  plan.enabled = true;
  plan.cfg_source = "user";
  plan.bootstrap_backend = "mpi";
  for (std::size_t i = 0; i < kNumGemmSlots; ++i) {
    const auto member = TransformerLayerTPOverlapCfg::slots()[i].second;
    plan.slots[i] = plan_slot(static_cast<GemmSlot>(i), cfg.*member);
  }
  return plan;
}

TpOverlapPlan tp_overlap_plan(const CommOverlapResolution& resolution) {
  if (!resolution.tp_comm_overlap) {
    TpOverlapPlan off;
    for (auto& slot : off.slots) slot.note = "not overlapped: tp_comm_overlap is off";
    return off;
  }
  const bool defaulted = !resolution.tp_comm_overlap_cfg;
  TpOverlapPlan plan =
      tp_overlap_plan(defaulted ? default_tp_overlap_cfg() : *resolution.tp_comm_overlap_cfg);
  plan.cfg_source = resolution.tp_comm_overlap_cfg_source;
  if (defaulted) {
    plan.notes.push_back(
        "no tp_comm_overlap_cfg: the MPI backend's default (Transformer "
        "Engine's: ring_exchange / pipeline x4 / bulk)");
  }
  const std::string bootstrap = resolution.tp_comm_bootstrap_backend.value_or("mpi");
  plan.bootstrap_backend = bootstrap;
  if (bootstrap != "mpi") {
    plan.notes.push_back(str_cat("tp_comm_bootstrap_backend '", bootstrap,
                                 "' is not applicable on the MPI backend: the TP group's MPI "
                                 "communicator is used"));
  }
  plan.notes.push_back(
      "GPU-only fields (num_sm, cga_size, set_sm_margin, atomic_gemm, fp8_buf, "
      "aggregate) are not applicable on the MPI backend and change nothing");
  return plan;
}

nlohmann::ordered_json to_json(const TpOverlapPlan& plan) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["enabled"] = plan.enabled;
  out["backend"] = plan.backend;
  out["cfg_source"] = plan.cfg_source;
  out["bootstrap_backend"] = plan.bootstrap_backend.empty()
                                 ? nlohmann::ordered_json(nullptr)
                                 : nlohmann::ordered_json(plan.bootstrap_backend);
  out["notes"] = plan.notes;
  nlohmann::ordered_json slots = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < kNumGemmSlots; ++i) {
    const SlotPlan& s = plan.slots[i];
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["algorithm"] = std::string(overlap_algorithm_name(s.choice.algorithm));
    entry["num_splits"] = s.choice.num_splits;
    entry["configured_method"] = s.configured_method;
    nlohmann::ordered_json fields = nlohmann::ordered_json::object();
    for (const auto& field : s.not_applicable) {
      std::visit([&](const auto& v) { fields[field.first] = v; }, field.second);
    }
    entry["not_applicable_on_mpi_backend"] = fields;
    entry["note"] = s.note;
    slots[std::string(gemm_slot_name(static_cast<GemmSlot>(i)))] = entry;
  }
  out["slots"] = slots;
  return out;
}

}  // namespace shardwise::tp
