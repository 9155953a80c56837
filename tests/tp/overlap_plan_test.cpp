// tp_overlap_plan: resolved comm_overlap settings -> algorithm and num_splits per GEMM slot.
#include <gtest/gtest.h>

#include "shardwise/config/comm_overlap_presets.hpp"
#include "shardwise/config/training_config.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/tp/overlap_plan.hpp"

namespace shardwise::tp {
namespace {

CommOverlapResolution resolve(const std::string& yaml, int world_size) {
  TrainingConfig config = parse_training_config(yaml, {}, "<test>");
  return resolve_comm_overlap(config, world_size);
}

TEST(TpOverlapPlan, OffWhenTensorParallelOverlapIsOff) {
  const TpOverlapPlan plan = tp_overlap_plan(CommOverlapResolution{});
  EXPECT_FALSE(plan.enabled);
  for (std::size_t i = 0; i < kNumGemmSlots; ++i) {
    EXPECT_EQ(plan.slots[i].choice, OverlapChoice{});
    EXPECT_EQ(plan.slots[i].configured_method, "unset");
  }
  EXPECT_EQ(to_json(plan)["slots"]["fc2_fprop"]["algorithm"], "none");
}

TEST(TpOverlapPlan, PresetSlotsMapToAlgorithms) {
  // A preset's slots: bulk for the column-parallel backward, ring_exchange for the all-gather
  // GEMMs, pipeline x4 for proj/fc2 fprop.
  const auto& preset = comm_overlap_preset("userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192");
  const TpOverlapPlan plan = tp_overlap_plan(preset);
  using A = OverlapAlgorithm;
  const std::pair<GemmSlot, OverlapChoice> expected[] = {
      {GemmSlot::kQkvDgrad, {A::kBulk, 1}},        {GemmSlot::kQkvWgrad, {A::kBulk, 1}},
      {GemmSlot::kFc1Dgrad, {A::kBulk, 1}},        {GemmSlot::kFc1Wgrad, {A::kBulk, 1}},
      {GemmSlot::kQkvFprop, {A::kRingExchange, 1}}, {GemmSlot::kProjDgrad, {A::kRingExchange, 1}},
      {GemmSlot::kFc1Fprop, {A::kRingExchange, 1}}, {GemmSlot::kFc2Dgrad, {A::kRingExchange, 1}},
      {GemmSlot::kProjFprop, {A::kPipeline, 4}},   {GemmSlot::kFc2Fprop, {A::kPipeline, 4}},
  };
  for (const auto& [slot, choice] : expected) {
    EXPECT_EQ(plan.choice(slot), choice) << gemm_slot_name(slot);
    EXPECT_TRUE(plan.slot(slot).note.empty()) << plan.slot(slot).note;
  }
  // GPU-only fields are carried as not applicable, with their values.
  const SlotPlan& proj = plan.slot(GemmSlot::kProjFprop);
  EXPECT_EQ(std::get<std::int64_t>(proj.not_applicable.at("num_sm")), 32);
  EXPECT_EQ(std::get<bool>(proj.not_applicable.at("set_sm_margin")), true);
  EXPECT_EQ(proj.not_applicable.count("num_splits"), 0u);
  EXPECT_EQ(plan.slot(GemmSlot::kQkvFprop).not_applicable.count("aggregate"), 1u);
}

TEST(TpOverlapPlan, MethodsThatDoNotApplyRunAsNoneWithANote) {
  TransformerLayerTPOverlapCfg cfg;
  cfg.qkv_fprop = BulkOverlapCfg{1, 1, false, "bulk"};
  PipelineOverlapCfg pipeline;
  pipeline.num_sm = pipeline.cga_size = 1;
  pipeline.num_splits = 3;
  cfg.qkv_wgrad = pipeline;
  cfg.qkv_dgrad = pipeline;
  const TpOverlapPlan plan = tp_overlap_plan(cfg);
  EXPECT_EQ(plan.choice(GemmSlot::kQkvFprop).algorithm, OverlapAlgorithm::kNone);
  EXPECT_NE(plan.slot(GemmSlot::kQkvFprop).note.find("bulk does not apply to qkv_fprop"),
            std::string::npos);
  EXPECT_EQ(plan.choice(GemmSlot::kQkvWgrad).algorithm, OverlapAlgorithm::kNone);
  EXPECT_EQ(plan.choice(GemmSlot::kQkvDgrad), (OverlapChoice{OverlapAlgorithm::kPipeline, 3}));
  EXPECT_EQ(plan.choice(GemmSlot::kFc2Fprop).algorithm, OverlapAlgorithm::kNone);
  EXPECT_EQ(plan.slot(GemmSlot::kFc2Fprop).note, "not overlapped: the slot is unset");
}

TEST(TpOverlapPlan, FromTheResolvedTrainingConfig) {
  const std::string yaml =
      "model: {hidden: 64, heads: 4}\n"
      "parallel: {tp: 2, sequence_parallel: true}\n"
      "comm_overlap: {tp_comm_overlap: true}\n";
  const CommOverlapResolution r = resolve(yaml, 4);
  ASSERT_TRUE(r.tp_comm_overlap);
  EXPECT_EQ(r.tp_comm_bootstrap_backend, "mpi");
  const TpOverlapPlan plan = tp_overlap_plan(r);
  EXPECT_TRUE(plan.enabled);
  EXPECT_EQ(plan.cfg_source, "backend-default");
  EXPECT_EQ(plan, [&] {
    TpOverlapPlan expected = tp_overlap_plan(default_tp_overlap_cfg());
    expected.cfg_source = plan.cfg_source;
    expected.notes = plan.notes;
    return expected;
  }());
  EXPECT_EQ(plan.choice(GemmSlot::kFc2Fprop), (OverlapChoice{OverlapAlgorithm::kPipeline, 4}));
  const auto json = to_json(plan);
  EXPECT_EQ(json["backend"], "mpi");
  EXPECT_EQ(json["slots"]["qkv_fprop"]["algorithm"], "ring_exchange");
  EXPECT_EQ(json["slots"]["proj_fprop"]["not_applicable_on_mpi_backend"]["num_sm"], 16);

  // tp = 1 leaves TP overlap off (with a warning), so every slot runs as none.
  EXPECT_FALSE(tp_overlap_plan(resolve("parallel: {tp: 1}\ncomm_overlap: {tp_comm_overlap: true}\n", 2))
                   .enabled);
}

TEST(TpOverlapPlan, BootstrapOtherThanMpiIsReportedNotApplicable) {
  CommOverlapResolution r;
  r.tp_comm_overlap = true;
  r.tp_comm_bootstrap_backend = "nccl";
  r.tp_comm_overlap_cfg = default_tp_overlap_cfg();
  r.tp_comm_overlap_cfg_source = "user";
  const TpOverlapPlan plan = tp_overlap_plan(r);
  EXPECT_EQ(plan.bootstrap_backend, "nccl");
  bool reported = false;
  for (const auto& note : plan.notes) reported |= note.find("'nccl' is not applicable") != std::string::npos;
  EXPECT_TRUE(reported);
}

TEST(OverlapAlgorithm, NamesRoundTripAndUnknownNamesAreRejected) {
  for (auto a : {OverlapAlgorithm::kNone, OverlapAlgorithm::kRingExchange,
                 OverlapAlgorithm::kPipeline, OverlapAlgorithm::kBulk}) {
    EXPECT_EQ(overlap_algorithm_from_name(overlap_algorithm_name(a), "x"), a);
  }
  try {
    overlap_algorithm_from_name("ring", "--algorithm");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--algorithm: unknown TP overlap algorithm 'ring'"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace shardwise::tp
