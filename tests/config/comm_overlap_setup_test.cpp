// CommOverlapConfig::setup(): every resolution rule, user precedence, warnings and errors.
#include <gtest/gtest.h>

#include <functional>

#include "shardwise/config/comm_overlap_config.hpp"
#include "shardwise/config/comm_overlap_presets.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

constexpr std::int64_t k128Mi = 128LL * 1024 * 1024;
const char* const kHopperPreset = "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192";

ModelParallelConfig layout(int tp, int pp, int vp, int dp) {
  ModelParallelConfig mp;
  mp.tp = tp;
  mp.pp = pp;
  mp.vp = vp;
  mp.data_parallel_size = dp;
  return mp;
}

OptimizerConfig optimizer(OptimizerKind kind) {
  OptimizerConfig opt;
  opt.kind = kind;
  return opt;
}

bool contains(const std::vector<std::string>& warnings, std::string_view needle) {
  for (const auto& w : warnings) {
    if (w.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(CommOverlapSetup, PipelineAndDataParallelDefaults) {
  struct Case {
    int pp, vp, dp;
    OptimizerKind kind;
    bool overlap_p2p, batch_p2p;
    std::optional<std::int64_t> bucket;
    bool grad_reduce, param_gather, align;
  };
  using K = OptimizerKind;
  const Case cases[] = {
      {1, 1, 1, K::kLayerWise, false, false, std::nullopt, false, false, false},
      {1, 1, 4, K::kLayerWise, false, false, k128Mi, true, true, false},
      {2, 1, 2, K::kDistributed, false, true, k128Mi, true, true, false},
      {2, 2, 2, K::kDistributed, true, false, k128Mi, true, true, true},
      {4, 2, 8, K::kLayerWise, true, false, k128Mi, true, true, true},
      {4, 2, 1, K::kLayerWise, true, false, std::nullopt, false, false, false},
      {4, 1, 1, K::kDistributed, false, true, std::nullopt, false, false, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << "pp=" << c.pp << " vp=" << c.vp << " dp=" << c.dp << " " << to_string(c.kind));
    CommOverlapConfig overlap;
    auto opt = optimizer(c.kind);
    DistributedDataParallelConfig ddp;
    ddp.bucket_size = 7;  // overwritten: the derived value wins over the DDP section
    const auto r = overlap.setup(layout(1, c.pp, c.vp, c.dp), opt, ddp);
    EXPECT_TRUE(r.warnings.empty());
    EXPECT_EQ(r.data_parallel_size, c.dp);
    EXPECT_FALSE(r.tp_comm_overlap);
    EXPECT_FALSE(r.tp_comm_bootstrap_backend.has_value());
    EXPECT_EQ(r.overlap_p2p_comm, c.overlap_p2p);
    EXPECT_EQ(r.batch_p2p_comm, c.batch_p2p);
    EXPECT_TRUE(r.data_parallel_overlap_applied);
    EXPECT_EQ(r.bucket_size, c.bucket);
    EXPECT_EQ(r.overlap_grad_reduce, c.grad_reduce);
    EXPECT_EQ(r.overlap_param_gather, c.param_gather);
    EXPECT_EQ(r.align_param_gather, c.align);
    EXPECT_FALSE(r.overlap_param_gather_with_optimizer_step);
    EXPECT_FALSE(r.defer_embedding_wgrad_compute);
    EXPECT_EQ(r.wgrad_deferral_limit, -1);
    // Written into the DDP and optimizer configs...
    EXPECT_EQ(ddp.bucket_size, c.bucket);
    EXPECT_EQ(ddp.overlap_grad_reduce, c.grad_reduce);
    EXPECT_EQ(ddp.overlap_param_gather, c.param_gather);
    EXPECT_EQ(ddp.align_param_gather, c.align);
    EXPECT_TRUE(ddp.use_distributed_optimizer);
    EXPECT_FALSE(opt.overlap_param_gather_with_optimizer_step);
    // ...and back into the overlap config.
    EXPECT_EQ(overlap.overlap_p2p_comm, c.overlap_p2p);
    EXPECT_EQ(overlap.batch_p2p_comm, c.batch_p2p);
    EXPECT_EQ(overlap.bucket_size, c.bucket);
    EXPECT_EQ(overlap.data_parallel_size, c.dp);
  }
}

TEST(CommOverlapSetup, WithoutDistributedOptimizerTheConfigsAreUntouched) {
  for (auto kind : {OptimizerKind::kDdp, OptimizerKind::kLegacyLayerWise}) {
    SCOPED_TRACE(std::string(to_string(kind)));
    CommOverlapConfig overlap;
    auto opt = optimizer(kind);
    opt.lr = 0.5;
    DistributedDataParallelConfig ddp;
    ddp.overlap_grad_reduce = true;
    ddp.bucket_size = 12345;
    ddp.use_legacy_param_sync = kind == OptimizerKind::kLegacyLayerWise;
    const auto opt_before = opt;
    const auto ddp_before = ddp;
    const auto r = overlap.setup(layout(1, 2, 2, 8), opt, ddp);
    EXPECT_EQ(opt, opt_before);
    EXPECT_TRUE(same_ddp_settings(ddp, ddp_before));
    EXPECT_FALSE(r.data_parallel_overlap_applied);
    // The resolution reports what the untouched configs say.
    EXPECT_EQ(r.bucket_size, 12345);
    EXPECT_TRUE(r.overlap_grad_reduce);
    EXPECT_FALSE(r.overlap_param_gather);
    EXPECT_FALSE(r.align_param_gather);
    // The pipeline rules still apply.
    EXPECT_TRUE(r.overlap_p2p_comm);
    EXPECT_FALSE(r.batch_p2p_comm);
    EXPECT_TRUE(r.warnings.empty());
  }
}

TEST(CommOverlapSetup, DataParallelFieldsWithoutDistributedOptimizerWarn) {
  CommOverlapConfig overlap;
  overlap.overlap_grad_reduce = true;
  auto opt = optimizer(OptimizerKind::kDdp);
  DistributedDataParallelConfig ddp;
  const auto ddp_before = ddp;
  testing::internal::CaptureStderr();
  const auto r = overlap.setup(layout(1, 1, 1, 4), opt, ddp);
  const std::string logged = testing::internal::GetCapturedStderr();
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("are ignored: optimizer kind 'ddp' is not a distributed optimizer"),
            std::string::npos);
  EXPECT_NE(logged.find(r.warnings[0]), std::string::npos) << "warnings are logged too";
  EXPECT_TRUE(same_ddp_settings(ddp, ddp_before));
  EXPECT_EQ(overlap.overlap_grad_reduce, true) << "the user's unused value stays as written";
}

TEST(CommOverlapSetup, UserValuesWinWithInterleavedPipeline) {
  // pp > 1 and vp > 1 derive overlap_p2p on, batch off, align on; the user says otherwise.
  CommOverlapConfig overlap;
  overlap.overlap_p2p_comm = false;
  overlap.batch_p2p_comm = true;
  overlap.align_param_gather = false;
  overlap.bucket_size = 1000;
  overlap.overlap_param_gather_with_optimizer_step = true;
  overlap.defer_embedding_wgrad_compute = true;
  overlap.wgrad_deferral_limit = 3;
  auto opt = optimizer(OptimizerKind::kLayerWise);
  DistributedDataParallelConfig ddp;
  const auto r = overlap.setup(layout(1, 4, 2, 2), opt, ddp);
  EXPECT_FALSE(r.overlap_p2p_comm);
  EXPECT_TRUE(r.batch_p2p_comm);
  EXPECT_FALSE(r.align_param_gather);
  EXPECT_EQ(r.bucket_size, 1000);
  EXPECT_TRUE(r.overlap_grad_reduce) << "not set by the user: derived";
  EXPECT_TRUE(r.overlap_param_gather) << "not set by the user: derived";
  EXPECT_TRUE(r.overlap_param_gather_with_optimizer_step);
  EXPECT_TRUE(r.defer_embedding_wgrad_compute);
  EXPECT_EQ(r.wgrad_deferral_limit, 3);
  EXPECT_TRUE(opt.overlap_param_gather_with_optimizer_step);
  EXPECT_EQ(ddp.bucket_size, 1000);
  EXPECT_FALSE(ddp.align_param_gather);
  EXPECT_TRUE(ddp.overlap_grad_reduce);

  // And the user can turn derived DP overlap off.
  CommOverlapConfig off;
  off.overlap_grad_reduce = false;
  off.overlap_param_gather = false;
  auto opt2 = optimizer(OptimizerKind::kDistributed);
  DistributedDataParallelConfig ddp2;
  const auto r2 = off.setup(layout(1, 2, 2, 4), opt2, ddp2);
  EXPECT_FALSE(r2.overlap_grad_reduce);
  EXPECT_FALSE(r2.overlap_param_gather);
  EXPECT_FALSE(r2.align_param_gather) << "nothing to align without overlapped gathers";
  EXPECT_EQ(r2.bucket_size, k128Mi);
  EXPECT_FALSE(ddp2.overlap_grad_reduce);
}

TEST(CommOverlapSetup, FinalizeSnapshotsTheUserChoicesAndSetupIsRepeatable) {
  CommOverlapConfig overlap;
  overlap.batch_p2p_comm = true;
  overlap.overlap_p2p_comm = false;
  overlap.finalize();
  overlap.batch_p2p_comm = false;  // after finalize(): not a user choice any more
  overlap.finalize();              // idempotent: keeps the first snapshot
  EXPECT_EQ(overlap.user_choices().batch_p2p_comm, true);
  auto opt = optimizer(OptimizerKind::kLayerWise);
  DistributedDataParallelConfig ddp;
  const auto first = overlap.setup(layout(1, 2, 2, 2), opt, ddp);
  EXPECT_TRUE(first.batch_p2p_comm);
  EXPECT_FALSE(first.overlap_p2p_comm);
  // Fields now hold resolved values; a second setup from the same snapshot agrees.
  EXPECT_EQ(overlap.overlap_grad_reduce, true);
  EXPECT_FALSE(overlap.user_choices().overlap_grad_reduce.has_value());
  const auto second = overlap.setup(layout(1, 2, 2, 1), opt, ddp);
  EXPECT_FALSE(second.overlap_grad_reduce) << "dp = 1: derived again, not taken from the fields";
  EXPECT_TRUE(second.batch_p2p_comm);
}

TEST(CommOverlapSetup, TensorParallelOverlapIsTurnedOffWithAReason) {
  EXPECT_TRUE(tp_comm_overlap_backend_available());  // the MPI backend (src/tp)
  struct Case {
    int tp;
    bool sequence_parallel;
    bool backend;
    std::string warning;
  };
  const Case cases[] = {
      {1, true, true, "disabling tp_comm_overlap: tensor parallel size is 1 (needs tp >= 2)"},
      {2, false, true, "disabling tp_comm_overlap: sequence parallelism is off"},
      {4, true, false, "disabling tp_comm_overlap: no TP-overlap backend is available"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.warning);
    CommOverlapConfig overlap;
    overlap.tp_comm_overlap = true;
    auto mp = layout(c.tp, 1, 1, 1);
    mp.sequence_parallel = c.sequence_parallel;
    mp.tp_overlap_backend_available = c.backend;
    auto opt = optimizer(OptimizerKind::kLayerWise);
    DistributedDataParallelConfig ddp;
    const auto r = overlap.setup(mp, opt, ddp);
    EXPECT_FALSE(r.tp_comm_overlap);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find(c.warning), std::string::npos) << r.warnings[0];
    EXPECT_TRUE(r.tp_comm_overlap_backend_cfg.empty());
    EXPECT_FALSE(r.tp_comm_bootstrap_backend.has_value());
    EXPECT_EQ(r.tp_comm_overlap_cfg_source, "off");
    EXPECT_EQ(overlap.tp_comm_overlap, false);
  }
  // Every build has the MPI backend, so asking on a valid layout turns TP overlap on, with the
  // MPI bootstrap.
  CommOverlapConfig overlap;
  overlap.tp_comm_overlap = true;
  auto mp = layout(2, 1, 1, 1);
  mp.sequence_parallel = true;
  auto opt = optimizer(OptimizerKind::kLayerWise);
  DistributedDataParallelConfig ddp;
  const auto r = overlap.setup(mp, opt, ddp);
  EXPECT_TRUE(r.tp_comm_overlap);
  EXPECT_FALSE(contains(r.warnings, "no TP-overlap backend"));
  EXPECT_EQ(r.tp_comm_bootstrap_backend, "mpi");
}

ModelParallelConfig hopper_run() {
  auto mp = layout(4, 1, 1, 2);
  mp.sequence_parallel = true;
  mp.tp_overlap_backend_available = true;
  mp.gpu_arch = GpuArch::kHopper;
  mp.hidden_size = 8192;
  mp.micro_batch_size = 1;
  mp.seq_length = 8192;
  mp.precision = "bf16";
  return mp;
}

TEST(CommOverlapSetup, TensorParallelOverlapPicksTheMatchingPreset) {
  CommOverlapConfig overlap;
  overlap.tp_comm_overlap = true;
  auto opt = optimizer(OptimizerKind::kLayerWise);
  DistributedDataParallelConfig ddp;
  const auto r = overlap.setup(hopper_run(), opt, ddp);
  EXPECT_TRUE(r.tp_comm_overlap);
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(r.tp_comm_overlap_cfg_source, std::string("preset:") + kHopperPreset);
  EXPECT_EQ(r.tp_comm_overlap_cfg, comm_overlap_preset(kHopperPreset));
  EXPECT_EQ(r.tp_comm_overlap_backend_cfg, to_backend_map(comm_overlap_preset(kHopperPreset)));
  EXPECT_EQ(r.tp_comm_bootstrap_backend, "mpi");
  EXPECT_EQ(r.cuda_device_max_connections, 1);
  EXPECT_EQ(overlap.tp_comm_overlap_cfg, comm_overlap_preset(kHopperPreset));
}

TEST(CommOverlapSetup, TensorParallelOverlapWithoutPresetUsesTheBackendDefault) {
  CommOverlapConfig overlap;
  overlap.tp_comm_overlap = true;
  auto mp = hopper_run();
  mp.seq_length = 1024;  // no preset for this
  auto opt = optimizer(OptimizerKind::kLayerWise);
  DistributedDataParallelConfig ddp;
  const auto r = overlap.setup(mp, opt, ddp);
  EXPECT_TRUE(r.tp_comm_overlap);
  EXPECT_EQ(r.tp_comm_overlap_cfg_source, "backend-default");
  EXPECT_FALSE(r.tp_comm_overlap_cfg.has_value());
  EXPECT_TRUE(r.tp_comm_overlap_backend_cfg.empty());
  EXPECT_EQ(r.tp_comm_bootstrap_backend, "mpi");
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("no tp_comm_overlap_cfg given and no preset matches"),
            std::string::npos);
}

TEST(CommOverlapSetup, UserTensorParallelConfigAndBootstrapWin) {
  CommOverlapConfig overlap;
  overlap.tp_comm_overlap = true;
  auto cfg = comm_overlap_preset("userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192");
  std::get<PipelineOverlapCfg>(*cfg.proj_fprop).num_sm = 7;
  overlap.tp_comm_overlap_cfg = cfg;
  overlap.tp_comm_bootstrap_backend = "mpi";
  auto opt = optimizer(OptimizerKind::kLayerWise);
  DistributedDataParallelConfig ddp;
  const auto r = overlap.setup(hopper_run(), opt, ddp);
  EXPECT_EQ(r.tp_comm_overlap_cfg_source, "user");
  EXPECT_EQ(r.tp_comm_overlap_cfg, cfg);
  EXPECT_EQ(std::get<std::int64_t>(r.tp_comm_overlap_backend_cfg.at("proj_fprop.num_sm")), 7);
  EXPECT_EQ(r.tp_comm_bootstrap_backend, "mpi");
}

TEST(CommOverlapSetup, TensorParallelConfigWithoutOverlapWarns) {
  CommOverlapConfig overlap;
  overlap.tp_comm_overlap_cfg = comm_overlap_preset(kHopperPreset);
  auto opt = optimizer(OptimizerKind::kLayerWise);
  DistributedDataParallelConfig ddp;
  const auto r = overlap.setup(hopper_run(), opt, ddp);
  EXPECT_FALSE(r.tp_comm_overlap);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("tp_comm_overlap_cfg is ignored because tp_comm_overlap is off"),
            std::string::npos);
}

TEST(CommOverlapSetup, CudaDeviceMaxConnections) {
  struct Case {
    GpuArch arch;
    int tp, cp, pp, dp;
    bool moe;
    std::optional<int> expected;
  };
  using G = GpuArch;
  const Case cases[] = {
      {G::kNone, 4, 1, 1, 2, false, std::nullopt}, {G::kHopper, 2, 1, 1, 1, false, 1},
      {G::kHopper, 1, 2, 1, 1, false, 1},          {G::kHopper, 2, 1, 1, 1, true, 8},
      {G::kHopper, 1, 1, 4, 8, false, 8},          {G::kAmpere, 2, 1, 1, 1, false, 1},
      {G::kVolta, 1, 1, 1, 1, false, 8},           {G::kBlackwell, 2, 1, 1, 2, false, 32},
      {G::kBlackwell, 1, 2, 2, 1, false, 32},      {G::kBlackwell, 2, 1, 1, 1, false, 8},
      {G::kBlackwell, 1, 1, 2, 8, false, 8},       {G::kBlackwell, 2, 1, 1, 2, true, 32},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message() << to_string(c.arch) << " tp=" << c.tp << " cp=" << c.cp
                                    << " pp=" << c.pp << " dp=" << c.dp << " moe=" << c.moe);
    auto mp = layout(c.tp, c.pp, 1, c.dp);
    mp.cp = c.cp;
    mp.gpu_arch = c.arch;
    mp.moe_a2a_overlap = c.moe;
    EXPECT_EQ(recommended_cuda_device_max_connections(mp, c.dp), c.expected);
    CommOverlapConfig overlap;
    auto opt = optimizer(OptimizerKind::kDdp);
    DistributedDataParallelConfig ddp;
    EXPECT_EQ(overlap.setup(mp, opt, ddp).cuda_device_max_connections, c.expected);
  }
}

TEST(CommOverlapSetup, DataParallelSizeComesFromTheWorld) {
  auto mp = layout(2, 2, 1, 1);
  mp.data_parallel_size.reset();
  mp.world_size = 16;
  CommOverlapConfig overlap;
  auto opt = optimizer(OptimizerKind::kLayerWise);
  DistributedDataParallelConfig ddp;
  EXPECT_EQ(overlap.setup(mp, opt, ddp).data_parallel_size, 4);
  mp.world_size.reset();
  CommOverlapConfig alone;
  EXPECT_EQ(alone.setup(mp, opt, ddp).data_parallel_size, 1);
}

TEST(CommOverlapSetup, InvalidCombinationsNameTheField) {
  struct Case {
    std::function<void(CommOverlapConfig&, ModelParallelConfig&, OptimizerConfig&)> mutate;
    std::string expected;
  };
  auto pipeline_cfg = [](int splits) {
    auto cfg = comm_overlap_preset(kHopperPreset);
    std::get<PipelineOverlapCfg>(*cfg.proj_fprop).num_splits = splits;
    return cfg;
  };
  const Case cases[] = {
      {[&](auto& c, auto&, auto&) { c.tp_comm_overlap_cfg = pipeline_cfg(0); },
       "comm_overlap.tp_comm_overlap_cfg.proj_fprop.num_splits must be >= 1"},
      {[](auto& c, auto&, auto&) {
         auto cfg = comm_overlap_preset(kHopperPreset);
         std::get<BulkOverlapCfg>(*cfg.qkv_dgrad).method = "pipeline";
         c.tp_comm_overlap_cfg = cfg;
       },
       "comm_overlap.tp_comm_overlap_cfg.qkv_dgrad.method: unknown or mismatched method"},
      {[](auto& c, auto&, auto&) { c.tp_comm_bootstrap_backend = "ucx"; },
       "comm_overlap.tp_comm_bootstrap_backend: unknown backend 'ucx'"},
      {[](auto& c, auto&, auto&) { c.bucket_size = 0; }, "comm_overlap.bucket_size must be >= 1"},
      {[](auto& c, auto&, auto&) { c.wgrad_deferral_limit = -2; },
       "comm_overlap.wgrad_deferral_limit must be >= -1"},
      {[](auto&, auto& mp, auto&) {
         mp.data_parallel_size.reset();
         mp.world_size = 6;
         mp.tp = 4;
       },
       "world_size 6 is not divisible by tp * pp * cp = 4"},
      {[](auto& c, auto& mp, auto&) {
         mp.data_parallel_size.reset();
         mp.world_size = 8;
         c.data_parallel_size = 3;
       },
       "comm_overlap.data_parallel_size 3 does not divide world_size 8"},
      {[](auto& c, auto& mp, auto&) {
         mp.data_parallel_size.reset();
         mp.world_size = 8;
         mp.tp = 2;
         c.data_parallel_size = 8;
       },
       "comm_overlap.data_parallel_size 8 != world_size / (tp * pp * cp) = 4"},
      {[](auto& c, auto& mp, auto&) {
         mp.data_parallel_size = 4;
         c.data_parallel_size = 2;
       },
       "comm_overlap.data_parallel_size (2) disagrees"},
      {[](auto&, auto& mp, auto&) { mp.tp = 0; }, "parallel.tp must be >= 1"},
      {[](auto&, auto& mp, auto&) {
         mp.pp = 1;
         mp.vp = 2;
       },
       "parallel.vp = 2 needs pipeline parallelism"},
      {[](auto&, auto& mp, auto&) { mp.ep = 3; }, "parallel.ep = 3 must divide dp * cp = 2"},
      {[](auto& c, auto& mp, auto&) {
         mp.pp = 2;
         mp.vp = 2;
         c.overlap_p2p_comm = true;
         c.batch_p2p_comm = true;
       },
       "overlap_p2p_comm and comm_overlap.batch_p2p_comm cannot both be on"},
      {[](auto& c, auto& mp, auto&) {
         mp.pp = 2;
         c.overlap_p2p_comm = true;
         c.batch_p2p_comm = false;
       },
       "comm_overlap.overlap_p2p_comm needs the interleaved pipeline schedule"},
      {[](auto& c, auto& mp, auto&) {
         mp.pp = 2;
         mp.vp = 2;
         c.overlap_param_gather = false;
         c.overlap_param_gather_with_optimizer_step = true;
       },
       "overlap_param_gather_with_optimizer_step needs overlap_param_gather"},
      {[](auto& c, auto& mp, auto&) {
         mp.pp = 2;
         mp.vp = 2;
         c.overlap_param_gather = false;
         c.align_param_gather = true;
       },
       "comm_overlap.align_param_gather needs overlap_param_gather"},
      {[](auto& c, auto&, auto&) { c.overlap_param_gather_with_optimizer_step = true; },
       "overlap_param_gather_with_optimizer_step needs the interleaved pipeline schedule"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.expected);
    CommOverlapConfig overlap;
    auto mp = layout(1, 1, 1, 2);
    auto opt = optimizer(OptimizerKind::kLayerWise);
    c.mutate(overlap, mp, opt);
    DistributedDataParallelConfig ddp;
    try {
      overlap.setup(mp, opt, ddp);
      ADD_FAILURE() << "expected ConfigError";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << e.what();
    }
  }
}

TEST(DdpSection, SameSettingsComparesEveryKey) {
  DistributedDataParallelConfig a, b;
  EXPECT_TRUE(same_ddp_settings(a, b));
  b.num_buckets_per_group = 2;
  EXPECT_FALSE(same_ddp_settings(a, b));
  b = a;
  b.use_legacy_param_sync = true;
  EXPECT_FALSE(same_ddp_settings(a, b));
  b = a;
  b.bucket_size = 5;
  EXPECT_FALSE(same_ddp_settings(a, b));
}

TEST(OptimizerConfig, DistributedKindsAndValidation) {
  EXPECT_TRUE(optimizer(OptimizerKind::kLayerWise).use_distributed_optimizer());
  EXPECT_TRUE(optimizer(OptimizerKind::kDistributed).use_distributed_optimizer());
  EXPECT_FALSE(optimizer(OptimizerKind::kDdp).use_distributed_optimizer());
  EXPECT_FALSE(optimizer(OptimizerKind::kLegacyLayerWise).use_distributed_optimizer());
  EXPECT_NO_THROW(validate(OptimizerConfig{}));
  struct Case {
    std::function<void(OptimizerConfig&)> mutate;
    std::string expected;
  };
  const Case cases[] = {
      {[](auto& o) { o.lr = -1; }, "optimizer.lr must be >= 0"},
      {[](auto& o) { o.muon_lr = -1; }, "optimizer.muon_lr must be >= 0"},
      {[](auto& o) { o.min_lr = 1; }, "optimizer.min_lr (1) must be <= optimizer.lr"},
      {[](auto& o) { o.adam_beta1 = 1.0; }, "optimizer.adam_beta1 must be in [0, 1)"},
      {[](auto& o) { o.adam_eps = 0; }, "optimizer.adam_eps must be > 0"},
      {[](auto& o) { o.muon_ns_steps = 0; }, "optimizer.muon_ns_steps must be in [1, 100]"},
      {[](auto& o) { o.muon_extra_scale_factor = 0; }, "optimizer.muon_extra_scale_factor"},
      {[](auto& o) { o.clip_grad = -0.5; }, "optimizer.clip_grad must be >= 0"},
      {[](auto& o) { o.weight_decay = 1e10; },
       "optimizer.lr (0.001) x optimizer.weight_decay (1e+10) must be < 1"},
      {[](auto& o) {
         o.muon_lr = 0.5;
         o.weight_decay = 2;
       },
       "optimizer.muon_lr (0.5) x optimizer.weight_decay (2) must be < 1"},
      {[](auto& o) {
         o.kind = OptimizerKind::kDdp;
         o.overlap_param_gather_with_optimizer_step = true;
       },
       "needs a distributed optimizer"},
  };
  for (const auto& c : cases) {
    OptimizerConfig o;
    c.mutate(o);
    try {
      validate(o);
      ADD_FAILURE() << "expected ConfigError: " << c.expected;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace shardwise
