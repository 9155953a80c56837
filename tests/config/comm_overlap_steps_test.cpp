// Each step of CommOverlapConfig::setup() on its own (comm_overlap_steps.hpp); the end-to-end
// resolution is covered by comm_overlap_setup_test.cpp.
#include "shardwise/config/comm_overlap_steps.hpp"

#include <gtest/gtest.h>

#include "shardwise/config/comm_overlap_presets.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

constexpr std::int64_t k128MiB = 128LL * 1024 * 1024;

ModelParallelConfig layout(int tp, int pp, int vp) {
  ModelParallelConfig mp;
  mp.tp = tp;
  mp.pp = pp;
  mp.vp = vp;
  return mp;
}

// Runs f, expects a ConfigError whose message contains needle.
template <class F>
void expect_config_error(F&& f, std::string_view needle) {
  try {
    f();
    ADD_FAILURE() << "no ConfigError (expected one mentioning '" << needle << "')";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string_view(e.what()).find(needle), std::string_view::npos) << e.what();
  }
}

TEST(CommOverlapSteps, DataParallelSizeFromUserRunOrWorld) {
  auto mp = layout(2, 2, 1);
  EXPECT_EQ(resolve_data_parallel_size(mp, std::nullopt), 1);  // nothing known: 1
  EXPECT_EQ(resolve_data_parallel_size(mp, 3), 3);
  mp.world_size = 16;
  EXPECT_EQ(resolve_data_parallel_size(mp, std::nullopt), 4);  // 16 / (2 * 2 * 1)
  EXPECT_EQ(resolve_data_parallel_size(mp, 4), 4);
  expect_config_error([&] { resolve_data_parallel_size(mp, 2); }, "!= world_size");
  mp.world_size = 6;
  expect_config_error([&] { resolve_data_parallel_size(mp, std::nullopt); }, "tp * pp * cp = 4");
  mp.world_size.reset();
  mp.data_parallel_size = 2;
  expect_config_error([&] { resolve_data_parallel_size(mp, 4); }, "disagrees");
  mp.ep = 4;  // dp * cp = 2
  expect_config_error([&] { resolve_data_parallel_size(mp, std::nullopt); }, "parallel.ep");
  expect_config_error([] { resolve_data_parallel_size(layout(1, 1, 2), std::nullopt); },
                      "parallel.vp");
}

TEST(CommOverlapSteps, TensorParallelRulesNameTheBlocker) {
  auto mp = layout(1, 1, 1);
  mp.sequence_parallel = true;
  mp.tp_overlap_backend_available = true;
  ASSERT_TRUE(tp_overlap_blocker(mp).has_value());
  EXPECT_NE(tp_overlap_blocker(mp)->find("tp >= 2"), std::string::npos);
  mp.tp = 2;
  EXPECT_EQ(tp_overlap_blocker(mp), std::nullopt);
  mp.sequence_parallel = false;
  EXPECT_NE(tp_overlap_blocker(mp).value_or("").find("sequence parallelism"), std::string::npos);
  mp.sequence_parallel = true;
  mp.tp_overlap_backend_available = false;
  EXPECT_NE(tp_overlap_blocker(mp).value_or("").find("no TP-overlap backend"), std::string::npos);
}

TEST(CommOverlapSteps, PresetResolutionPrefersUserThenPresetThenBackend) {
  auto mp = layout(4, 1, 1);
  mp.gpu_arch = GpuArch::kHopper;
  mp.hidden_size = 8192;
  mp.micro_batch_size = 1;
  mp.seq_length = 8192;
  mp.precision = "bf16";
  const char* preset = "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192";
  const auto picked = choose_tp_overlap_cfg(mp, std::nullopt);
  EXPECT_EQ(picked.source, std::string("preset:") + preset);
  EXPECT_EQ(picked.cfg, comm_overlap_preset(preset));

  const auto user_cfg = comm_overlap_preset("userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192");
  const auto mine = choose_tp_overlap_cfg(mp, user_cfg);
  EXPECT_EQ(mine.source, "user");
  EXPECT_EQ(mine.cfg, user_cfg);

  mp.seq_length = 1024;  // no preset for this run
  const auto none = choose_tp_overlap_cfg(mp, std::nullopt);
  EXPECT_EQ(none.source, "backend-default");
  EXPECT_FALSE(none.cfg.has_value());
}

TEST(CommOverlapSteps, PipelineRules) {
  using P = PipelineOverlap;
  EXPECT_EQ(pipeline_overlap_defaults(layout(1, 1, 1)), (P{false, false}));
  EXPECT_EQ(pipeline_overlap_defaults(layout(1, 4, 1)), (P{false, true}));
  EXPECT_EQ(pipeline_overlap_defaults(layout(1, 4, 2)), (P{true, false}));

  check_pipeline_overlap(layout(1, 1, 1), P{true, true});  // no pipeline: nothing to check
  check_pipeline_overlap(layout(1, 2, 2), P{true, false});
  expect_config_error(
      [] {
        check_pipeline_overlap(layout(1, 2, 2), P{true, true});
      },
      "cannot both be on");
  expect_config_error(
      [] {
        check_pipeline_overlap(layout(1, 2, 1), P{true, false});
      },
      "interleaved pipeline schedule");
}

TEST(CommOverlapSteps, DataParallelRules) {
  const auto one = data_parallel_overlap_defaults(1, false);
  EXPECT_EQ(one.bucket_size, std::nullopt);
  EXPECT_FALSE(one.overlap_grad_reduce || one.overlap_param_gather || one.align_param_gather);
  const auto many = data_parallel_overlap_defaults(8, true);
  EXPECT_EQ(many.bucket_size, k128MiB);
  EXPECT_TRUE(many.overlap_grad_reduce && many.overlap_param_gather && many.align_param_gather);
  EXPECT_FALSE(many.overlap_param_gather_with_optimizer_step);

  DataParallelOverlap bad;
  bad.align_param_gather = true;
  expect_config_error([&] { check_data_parallel_overlap(true, bad); },
                      "align_param_gather needs overlap_param_gather");
  DataParallelOverlap step;
  step.overlap_param_gather_with_optimizer_step = true;
  expect_config_error([&] { check_data_parallel_overlap(true, step); }, "needs overlap_param");
  step.overlap_param_gather = true;
  check_data_parallel_overlap(true, step);
  expect_config_error([&] { check_data_parallel_overlap(false, step); }, "interleaved");
}

TEST(CommOverlapSteps, UserValuesWinOverRuleDefaults) {
  CommOverlapSettings user;
  EXPECT_EQ(prefer_user_values(PipelineOverlap{true, false}, user), (PipelineOverlap{true, false}));
  user.overlap_p2p_comm = false;
  user.batch_p2p_comm = true;
  EXPECT_EQ(prefer_user_values(PipelineOverlap{true, false}, user), (PipelineOverlap{false, true}));

  const auto defaults = data_parallel_overlap_defaults(4, true);
  EXPECT_EQ(prefer_user_values(defaults, CommOverlapSettings{}), defaults);
  CommOverlapSettings dp_user;
  dp_user.bucket_size = 1000;
  dp_user.overlap_grad_reduce = false;
  dp_user.overlap_param_gather = false;  // alignment follows the gathers off
  auto resolved = prefer_user_values(defaults, dp_user);
  EXPECT_EQ(resolved.bucket_size, 1000);
  EXPECT_FALSE(resolved.overlap_grad_reduce);
  EXPECT_FALSE(resolved.overlap_param_gather);
  EXPECT_FALSE(resolved.align_param_gather);
  // dp = 1 turns the gathers off by default; a user who turns them on gets them aligned on the
  // interleaved schedule.
  CommOverlapSettings gather;
  gather.overlap_param_gather = true;
  resolved = prefer_user_values(data_parallel_overlap_defaults(1, true), gather);
  EXPECT_TRUE(resolved.overlap_param_gather);
  EXPECT_TRUE(resolved.align_param_gather);
  gather.align_param_gather = false;
  EXPECT_FALSE(
      prefer_user_values(data_parallel_overlap_defaults(1, true), gather).align_param_gather);
}

TEST(CommOverlapSteps, RecordedSettingsKeepUserDataParallelValuesWhenNotApplied) {
  CommOverlapSettings user;
  user.overlap_grad_reduce = true;
  user.tp_comm_bootstrap_backend = "mpi";
  CommOverlapResolution out;
  out.data_parallel_size = 4;
  out.batch_p2p_comm = true;
  out.overlap_grad_reduce = false;
  out.bucket_size = 77;

  auto shown = record_resolution(out, user);
  EXPECT_EQ(shown.overlap_grad_reduce, true);  // not applied: the user's value stays
  EXPECT_EQ(shown.bucket_size, std::nullopt);
  EXPECT_EQ(shown.batch_p2p_comm, true);
  EXPECT_EQ(shown.data_parallel_size, 4);
  EXPECT_EQ(shown.tp_comm_overlap, false);
  EXPECT_EQ(shown.tp_comm_bootstrap_backend, std::nullopt);  // TP overlap off: none used

  out.data_parallel_overlap_applied = true;
  shown = record_resolution(out, user);
  EXPECT_EQ(shown.overlap_grad_reduce, false);  // applied: what setup() decided
  EXPECT_EQ(shown.bucket_size, 77);
}

}  // namespace
}  // namespace shardwise
