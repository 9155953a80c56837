// TrainingConfig YAML loading: defaults, key validation, type errors, ranges, overrides, printing.
#include "shardwise/config/training_config.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "shardwise/config/comm_overlap_presets.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

const std::filesystem::path kExamples =
    std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "examples";

// The ConfigError message of parsing `yaml` with `overrides` ("" when it parses).
std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_training_config(yaml, overrides, "test.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_CONTAINS(message, needle)                                      \
  do {                                                                              \
    const std::string message_ = (message);                                         \
    EXPECT_NE(message_.find(needle), std::string::npos) << "message: " << message_; \
  } while (0)

TEST(TrainingConfig, EmptyFileGivesTheDefaults) {
  const auto cfg = parse_training_config("");
  EXPECT_EQ(cfg.model.arch, ModelArch::kGpt);
  EXPECT_EQ(cfg.model.layers, 2);
  EXPECT_EQ(cfg.model.hidden, 64);
  EXPECT_EQ(cfg.model.vocab, 0);
  EXPECT_EQ(cfg.model.position, PositionEmbedding::kLearned);
  EXPECT_EQ(cfg.model.dtype, DType::kFloat32);
  EXPECT_DOUBLE_EQ(cfg.model.init_std, 0.02);
  EXPECT_EQ(cfg.data.source, DataSource::kSynthetic);
  EXPECT_EQ(cfg.data.task, SyntheticTask::kAddition);
  EXPECT_EQ(cfg.optimizer.kind, OptimizerKind::kLayerWise);
  EXPECT_DOUBLE_EQ(cfg.optimizer.muon_momentum, 0.95);
  EXPECT_TRUE(cfg.optimizer.muon_nesterov);
  EXPECT_EQ(cfg.optimizer.muon_ns_steps, 5);
  EXPECT_EQ(cfg.optimizer.muon_coefficient_set, MuonCoefficientSet::kQuintic);
  EXPECT_EQ(cfg.optimizer.muon_scale_mode, MuonScaleMode::kSpectral);
  EXPECT_DOUBLE_EQ(cfg.optimizer.muon_extra_scale_factor, 1.0);
  EXPECT_TRUE(cfg.optimizer.muon_split_qkv);
  EXPECT_EQ(cfg.optimizer.muon_matmul_precision, MatmulPrecision::kFp32);
  EXPECT_DOUBLE_EQ(cfg.optimizer.clip_grad, 1.0);
  EXPECT_FALSE(cfg.optimizer.overlap_param_gather_with_optimizer_step);
  EXPECT_TRUE(cfg.ddp.grad_reduce_in_fp32);
  EXPECT_FALSE(cfg.ddp.overlap_grad_reduce);
  EXPECT_FALSE(cfg.ddp.bucket_size.has_value());
  EXPECT_TRUE(cfg.ddp.use_distributed_optimizer) << "follows optimizer.kind layer-wise";
  EXPECT_FALSE(cfg.ddp.use_legacy_param_sync);
  EXPECT_EQ(cfg.ddp.num_buckets_per_group, 1);
  EXPECT_DOUBLE_EQ(cfg.optimizer.muon_lr, 0.002);
  EXPECT_EQ(cfg.training.lr_schedule, LrSchedule::kCosine);
  EXPECT_TRUE(cfg.logging.progress);
  EXPECT_EQ(cfg.comm_overlap, CommOverlapConfig{}) << "every comm_overlap field unset";
  EXPECT_EQ(cfg.parallel, ParallelConfig{});
  TrainingConfig expected;
  expected.ddp.use_distributed_optimizer = true;
  EXPECT_EQ(cfg, expected);
}

TEST(TrainingConfig, ExampleFilesLoad) {
  // default.yaml spells out every key: the built-in defaults except the values tuned for the
  // addition task.
  const auto example = load_training_config(kExamples / "default.yaml");
  TrainingConfig expected = parse_training_config("");
  expected.optimizer.lr = 0.003;
  expected.training.steps = 600;
  expected.training.micro_batch_size = 16;
  expected.training.warmup_steps = 50;
  expected.training.eval_interval = 200;
  expected.logging.log_interval = 50;
  expected.comm_overlap.bucket_size = 16384;
  EXPECT_EQ(to_yaml(example), to_yaml(expected));  // every key, readable on failure
  const auto text = load_training_config(kExamples / "text.yaml");
  EXPECT_EQ(text.data.source, DataSource::kBin);
  EXPECT_EQ(text.data.path, "data/fortunes/train.bin");
  EXPECT_EQ(text.data.val_path, "data/fortunes/val.bin");
  EXPECT_EQ(text.model.vocab, 256);
  EXPECT_EQ(text.model.position, PositionEmbedding::kRope);
  EXPECT_EQ(text.training.steps, 500);
}

TEST(TrainingConfig, UnknownKeysListTheValidKeysOfTheirSection) {
  for (std::string_view section : training_config_sections()) {
    SCOPED_TRACE(std::string(section));
    std::string valid;
    for (auto key : training_config_keys(section)) valid += str_cat(valid.empty() ? "" : ", ", key);
    const auto message = error_of(str_cat(section, ":\n  no_such_key: 1\n"));
    EXPECT_ERROR_CONTAINS(message, str_cat("test.yaml: ", section, ": unknown key 'no_such_key'"));
    EXPECT_ERROR_CONTAINS(message, str_cat("(valid keys: ", valid, ")"));
  }
  EXPECT_ERROR_CONTAINS(error_of("model:\n  hiden: 3\n"),
                        "model: unknown key 'hiden' (did you mean hidden?) (valid keys: arch, "
                        "layers, hidden, heads, ffn, "
                        "vocab, seq_len, position, tied_embeddings, dtype, init_std, seed)");
  EXPECT_THROW(training_config_keys("modle"), ConfigError);
}

TEST(TrainingConfig, UnknownSectionListsTheSections) {
  EXPECT_ERROR_CONTAINS(error_of("modle:\n  hidden: 3\n"),
                        "test.yaml: config: unknown section 'modle' (did you mean model?) (valid "
                        "sections: model, data, optimizer, ddp, training, logging, comm_overlap, "
                        "parallel)");
  EXPECT_ERROR_CONTAINS(error_of("- 1\n- 2\n"),
                        "config: expected a mapping of sections, got a list");
}

TEST(TrainingConfig, TypeErrorsNameTheKeyAndTheType) {
  struct Case {
    std::string yaml;
    std::string expected;
  };
  const Case cases[] = {
      {"model: {hidden: abc}", "model.hidden: expected an integer, got 'abc'"},
      {"model: {hidden: 1.5}", "model.hidden: expected an integer, got '1.5'"},
      {"model: {hidden: 99999999999}", "model.hidden: integer 99999999999 is out of range"},
      {"model: {hidden: }", "model.hidden: expected an integer, got null"},
      {"model: {tied_embeddings: 3}", "model.tied_embeddings: expected a boolean"},
      {"model: {dtype: fp16}", "model.dtype must be fp32 or bf16 (got fp16)"},
      {"model: {dtype: f32x}", "model.dtype: unknown dtype 'f32x'"},
      {"model: {position: alibi}", "model.position: unknown value 'alibi' (valid: learned, rope)"},
      {"model: [1, 2]", "model: expected a mapping, got a list"},
      {"optimizer: {lr: fast}", "optimizer.lr: expected a finite number, got 'fast'"},
      {"optimizer: {lr: .inf}", "optimizer.lr: expected a finite number"},
      {"optimizer: {lr: 1e-400}", "optimizer.lr: 1e-400 is beyond what a double holds"},
      {"optimizer: {lr: 1e999}", "optimizer.lr: 1e999 is beyond what a double holds"},
      {"optimizer: {kind: adam}",
       "optimizer.kind: unknown value 'adam' (valid: layer-wise, distributed, ddp, "
       "legacy-layer-wise)"},
      {"optimizer: {muon_coefficient_set: cubic}", "valid: quintic, simple, polar_express"},
      {"optimizer: {muon_scale_mode: x}", "valid: spectral, unit_rms_norm, shape_scaling"},
      {"optimizer: {muon_matmul_precision: tf32}", "valid: fp32, bf16"},
      {"data: {path: [a, b]}", "data.path: expected a string, got a list"},
      {"data: {source: csv}", "data.source: unknown value 'csv' (valid: synthetic, text, bin)"},
      {"data: {task: multiply}", "data.task: unknown value 'multiply' (valid: addition, sort)"},
      {"ddp: {bucket_size: lots}", "ddp.bucket_size: expected an integer, got 'lots'"},
      {"training: {lr_schedule: step}", "valid: cosine, constant"},
      {"comm_overlap: {tp_comm_overlap: maybe}",
       "comm_overlap.tp_comm_overlap: expected a boolean"},
      {"comm_overlap: {tp_comm_overlap_cfg: 3}",
       "comm_overlap.tp_comm_overlap_cfg: unknown TP-overlap preset '3'"},
      {"parallel: {sequence_parallel: {a: 1}}",
       "parallel.sequence_parallel: expected a boolean (true or false), got a mapping"},
  };
  for (const auto& c : cases) {
    EXPECT_ERROR_CONTAINS(error_of(c.yaml), c.expected);
  }
}

TEST(TrainingConfig, RangesAndCrossChecks) {
  struct Case {
    std::string yaml;
    std::string expected;
  };
  const Case cases[] = {
      {"training: {steps: 0}", "training.steps must be >= 1 (got 0)"},
      {"training: {micro_batch_size: 0}", "training.micro_batch_size must be >= 1"},
      {"training: {eval_interval: -1}", "training.eval_interval must be >= 0"},
      {"optimizer: {lr: -0.1}", "optimizer.lr must be >= 0 (got -0.1)"},
      {"optimizer: {weight_decay: -1}", "optimizer.weight_decay must be >= 0"},
      {"model: {hidden: 65}", "model.hidden (65) must be divisible by model.heads (4)"},
      {"model: {layers: 0}", "model.layers must be >= 1"},
      {"model: {init_std: 0}", "model.init_std must be > 0"},
      {"data: {source: text}", "data.path is required for data.source 'text'"},
      {"data: {digits: 0}", "data.digits must be"},
      {"data: {digits: 10}", "data.digits must be"},
      {"data: {eval_samples: 0}", "data.eval_samples must be >= 1"},
      {"model: {position: rope, hidden: 24, heads: 8}",
       "model.position: rope needs an even head dimension (model.hidden / model.heads), got 3"},
      {"logging: {log_interval: 0}", "logging.log_interval must be >= 1"},
      {"parallel: {vp: 2}", "parallel.vp = 2 needs pipeline parallelism"},
      {"parallel: {tp: 3}", "model.heads (4) must be divisible by parallel.tp (3)"},
      {"parallel: {pp: 4}", "model.layers (2) must be divisible by parallel.pp * parallel.vp (4)"},
      {"parallel: {cp: 0}", "parallel.cp must be >= 1"},
      {"ddp: {bucket_size: 0}", "ddp.bucket_size must be >= 1"},
      {"ddp: {num_buckets_per_group: 0}", "ddp.num_buckets_per_group must be >= 1"},
      {"optimizer: {kind: distributed}\nddp: {align_param_gather: true}",
       "ddp.align_param_gather needs ddp.overlap_param_gather"},
      {"ddp: {per_token_loss: true, average_in_collective: true}",
       "ddp.per_token_loss and ddp.average_in_collective cannot both be set"},
      {"optimizer: {muon_lr: -1}", "optimizer.muon_lr must be >= 0"},
      {"ddp: {use_distributed_optimizer: false}",
       "ddp.use_distributed_optimizer = false contradicts optimizer.kind 'layer-wise'"},
      {"optimizer: {kind: ddp}\nddp: {use_distributed_optimizer: true}",
       "ddp.use_distributed_optimizer = true contradicts optimizer.kind 'ddp'"},
      {"ddp: {use_legacy_layer_wise_sync: true}",
       "ddp.use_legacy_layer_wise_sync = true contradicts optimizer.kind 'layer-wise'"},
      {"optimizer: {kind: ddp}\nddp: {overlap_param_gather: true}",
       "ddp.overlap_param_gather needs a distributed optimizer"},
      {"comm_overlap: {tp_comm_bootstrap_backend: ucx}", "unknown backend 'ucx'"},
      {"comm_overlap: {wgrad_deferral_limit: -5}",
       "comm_overlap.wgrad_deferral_limit must be >= -1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.yaml);
    EXPECT_ERROR_CONTAINS(error_of(c.yaml), c.expected);
  }
  EXPECT_EQ(error_of("optimizer: {kind: ddp}\nddp: {use_distributed_optimizer: false}"), "");
}

TEST(TrainingConfig, OptimizerKindDecidesTheDdpFlags) {
  const auto ddp = parse_training_config("optimizer: {kind: ddp}");
  EXPECT_FALSE(ddp.ddp.use_distributed_optimizer);
  const auto distributed = parse_training_config("optimizer: {kind: distributed}");
  EXPECT_TRUE(distributed.ddp.use_distributed_optimizer);
  const auto legacy = parse_training_config("optimizer: {kind: legacy-layer-wise}");
  EXPECT_FALSE(legacy.ddp.use_distributed_optimizer);
  EXPECT_TRUE(legacy.ddp.use_legacy_param_sync);
}

TEST(TrainingConfig, OverridesApplyWithTypeChecking) {
  const std::string file = "model:\n  hidden: 32\nddp:\n  bucket_size: 500\n";
  const auto cfg = parse_training_config(
      file, {"model.hidden=128", "optimizer.lr=3e-4", "optimizer.kind=ddp", "data.source=text",
             "data.path=a b.txt", "ddp.bucket_size=", "comm_overlap.tp_comm_overlap=true",
             "comm_overlap.tp_comm_overlap_cfg=userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096",
             "parallel.sequence_parallel=true", "training.steps=70", "model.dtype=bf16"});
  EXPECT_EQ(cfg.model.hidden, 128) << "overrides win over the file";
  EXPECT_DOUBLE_EQ(cfg.optimizer.lr, 3e-4);
  EXPECT_EQ(cfg.optimizer.kind, OptimizerKind::kDdp);
  EXPECT_FALSE(cfg.ddp.use_distributed_optimizer);
  EXPECT_EQ(cfg.data.path, "a b.txt");
  EXPECT_FALSE(cfg.ddp.bucket_size.has_value()) << "an empty value unsets";
  EXPECT_EQ(cfg.comm_overlap.tp_comm_overlap, true);
  EXPECT_EQ(cfg.comm_overlap.tp_comm_overlap_cfg,
            comm_overlap_preset("userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096"));
  EXPECT_TRUE(cfg.parallel.sequence_parallel);
  EXPECT_EQ(cfg.training.steps, 70);
  EXPECT_EQ(cfg.model.dtype, DType::kBFloat16);

  EXPECT_ERROR_CONTAINS(
      error_of("", {"model.hidden=big"}),
      "test.yaml with its overrides: model.hidden: expected an integer, got 'big'");
  // A typo in an override is blamed on the override (not the file), with the closest key.
  EXPECT_ERROR_CONTAINS(
      error_of("", {"model.hiden=3"}),
      "override 'model.hiden=3': model has no key 'hiden' (did you mean hidden?)");
  EXPECT_ERROR_CONTAINS(error_of("", {"optimizer.lrr=0.1"}),
                        "override 'optimizer.lrr=0.1': optimizer has no key 'lrr' (did you mean "
                        "lr?) (valid keys:");
  EXPECT_EQ(std::string(error_of("", {"optimizer.lrr=0.1"})).find("test.yaml"), std::string::npos);
  EXPECT_ERROR_CONTAINS(error_of("", {"modle.hidden=3"}),
                        "override 'modle.hidden=3': unknown section 'modle' (did you mean model?)");
  EXPECT_ERROR_CONTAINS(error_of("", {"optimizer.zzzzzz=1"}), "no key 'zzzzzz' (valid keys:");
  EXPECT_ERROR_CONTAINS(error_of("", {"model.hidden"}),
                        "override 'model.hidden': expected "
                        "section.key=value");
  EXPECT_ERROR_CONTAINS(error_of("", {"hidden=3"}), "override 'hidden=3': expected section.key");
  EXPECT_ERROR_CONTAINS(error_of("", {"model..hidden=3"}), "empty key");
  EXPECT_ERROR_CONTAINS(error_of("", {"training.steps=0"}), "training.steps must be >= 1");
  EXPECT_ERROR_CONTAINS(error_of("model: 3", {"model.hidden=3"}), "model is not a mapping");
  EXPECT_ERROR_CONTAINS(error_of("", {"model.hidden=[1"}), "value is not valid YAML");
}

// yaml-cpp keeps both entries of a repeated key and answers lookups with the first; a config
// that says lr twice must not silently train with one of them.
TEST(TrainingConfig, DuplicateKeysAreErrorsWhereverTheyAre) {
  EXPECT_ERROR_CONTAINS(error_of("optimizer:\n  lr: 0.1\n  kind: ddp\n  lr: 0.01\n"),
                        "test.yaml: key 'optimizer.lr' is given twice (lines 2 and 4)");
  EXPECT_ERROR_CONTAINS(error_of("model: {layers: 2}\ndata: {}\nmodel: {layers: 4}\n"),
                        "key 'model' is given twice (lines 1 and 3)");
  EXPECT_ERROR_CONTAINS(
      error_of("comm_overlap:\n  tp_comm_overlap_cfg:\n    proj_fprop: {method: bulk, "
               "num_sm: 2, num_sm: 4}\n"),
      "key 'comm_overlap.tp_comm_overlap_cfg.proj_fprop.num_sm' is given twice");
  // Quoted and plain spellings are the same key.
  EXPECT_ERROR_CONTAINS(error_of("training: {steps: 5, \"steps\": 6}"),
                        "key 'training.steps' is given twice");
  EXPECT_ERROR_CONTAINS(
      error_of("", {"comm_overlap.tp_comm_overlap_cfg={proj_fprop: {method: bulk}, "
                    "proj_fprop: null}"}),
      "override 'comm_overlap.tp_comm_overlap_cfg={proj_fprop");
  // An override replacing a key of the file is not a duplicate.
  EXPECT_EQ(parse_training_config("training: {steps: 50}", {"training.steps=70"}).training.steps,
            70);
}

TEST(TrainingConfig, ConfigPathThatIsADirectoryOrDeviceIsRefused) {
  const auto dir = std::filesystem::temp_directory_path();
  try {
    load_training_config(dir);
    ADD_FAILURE() << "a directory was loaded as a config";
  } catch (const IoError& e) {
    EXPECT_ERROR_CONTAINS(std::string(e.what()),
                          str_cat("config file '", dir.string(), "' is a directory"));
  }
  try {
    load_training_config("/dev/zero");
    ADD_FAILURE() << "/dev/zero was loaded as a config";
  } catch (const IoError& e) {
    EXPECT_ERROR_CONTAINS(std::string(e.what()),
                          "config file '/dev/zero' is a character device, not a regular file");
  }
  try {
    load_training_config(dir / "no-such-config.yaml");
    ADD_FAILURE() << "a missing file was loaded as a config";
  } catch (const IoError& e) {
    EXPECT_ERROR_CONTAINS(std::string(e.what()), "does not exist");
  }
}

TEST(TrainingConfig, SkipNonFiniteStepsDefaultsToZeroAndIsValidated) {
  EXPECT_EQ(parse_training_config("").training.skip_nonfinite_steps, 0);
  EXPECT_EQ(
      parse_training_config("training: {skip_nonfinite_steps: 3}").training.skip_nonfinite_steps,
      3);
  EXPECT_ERROR_CONTAINS(error_of("training: {skip_nonfinite_steps: -1}"),
                        "training.skip_nonfinite_steps must be >= 0 (got -1)");
}

TEST(TrainingConfig, DeviceAndPrecisionParseWithCpuFp32Defaults) {
  const TrainingConfig defaults = parse_training_config("");
  EXPECT_EQ(defaults.training.device, TrainingDevice::kCpu);
  EXPECT_EQ(defaults.training.precision, TrainingPrecision::kFp32);
  const TrainingConfig gpu = parse_training_config("training: {device: cuda, precision: bf16}");
  EXPECT_EQ(gpu.training.device, TrainingDevice::kCuda);
  EXPECT_EQ(gpu.training.precision, TrainingPrecision::kBf16);
  EXPECT_EQ(parse_training_config("training: {device: cuda, precision: tf32}").training.precision,
            TrainingPrecision::kTf32);
  // The resolved form (what `shardwise config resolve` prints and checkpoints store) keeps them.
  const nlohmann::ordered_json json = to_json(gpu);
  EXPECT_EQ(json["training"]["device"], "cuda");
  EXPECT_EQ(json["training"]["precision"], "bf16");
}

TEST(TrainingConfig, DeviceAndPrecisionErrorsNameTheKey) {
  EXPECT_ERROR_CONTAINS(error_of("training: {device: gpu}"),
                        "training.device: unknown value 'gpu' (valid: cpu, cuda)");
  EXPECT_ERROR_CONTAINS(error_of("training: {precision: fp16}"),
                        "training.precision: unknown value 'fp16' (valid: fp32, tf32, bf16)");
  EXPECT_ERROR_CONTAINS(error_of("training: {precision: bf16}"),
                        "training.precision: bf16 needs training.device: cuda");
  EXPECT_ERROR_CONTAINS(error_of("training: {precision: tf32}"),
                        "training.precision: tf32 needs training.device: cuda");
  // What the device path can train (optimizer kind, tp) is the trainer's check, not the config's:
  // `shardwise config` accepts such a config on any build.
  EXPECT_NO_THROW(parse_training_config("training: {device: cuda}\noptimizer: {kind: ddp}"));
}

TEST(TrainingConfig, TensorParallelOverlapConfigAsMapping) {
  const std::string yaml = R"(
comm_overlap:
  tp_comm_overlap: true
  tp_comm_overlap_cfg:
    proj_fprop: {method: pipeline, num_sm: 24, cga_size: 2, num_splits: 4, set_sm_margin: true}
    qkv_dgrad: {method: bulk, num_sm: 4, cga_size: 2, set_sm_margin: false}
    fc1_fprop: {method: ring_exchange, aggregate: true}
    fc2_fprop: null
)";
  const auto cfg = parse_training_config(yaml);
  const auto& tp = *cfg.comm_overlap.tp_comm_overlap_cfg;
  PipelineOverlapCfg pipeline;
  pipeline.num_sm = 24;
  pipeline.cga_size = 2;
  pipeline.num_splits = 4;
  pipeline.set_sm_margin = true;
  EXPECT_EQ(tp.proj_fprop, TPOverlapCfg(pipeline));
  BulkOverlapCfg bulk;
  bulk.num_sm = 4;
  bulk.cga_size = 2;
  EXPECT_EQ(tp.qkv_dgrad, TPOverlapCfg(bulk));
  RingExchangeOverlapCfg ring;
  ring.aggregate = true;
  EXPECT_EQ(tp.fc1_fprop, TPOverlapCfg(ring));
  EXPECT_FALSE(tp.fc2_fprop.has_value());
  EXPECT_FALSE(tp.qkv_wgrad.has_value());

  // Deep overrides reach into the mapping.
  const auto tuned =
      parse_training_config(yaml, {"comm_overlap.tp_comm_overlap_cfg.proj_fprop.num_sm=8"});
  const auto& tuned_slot = *tuned.comm_overlap.tp_comm_overlap_cfg->proj_fprop;
  EXPECT_EQ(std::get<PipelineOverlapCfg>(tuned_slot).num_sm, 8);

  struct Case {
    std::string slot;
    std::string expected;
  };
  const Case cases[] = {
      {"proj_fprops: {method: bulk, num_sm: 1, cga_size: 1, set_sm_margin: false}",
       "comm_overlap.tp_comm_overlap_cfg: unknown GEMM slot 'proj_fprops' (did you mean "
       "proj_fprop?) "
       "(valid GEMM slots: "
       "qkv_dgrad, qkv_wgrad, fc1_dgrad, fc1_wgrad, qkv_fprop, proj_dgrad, fc1_fprop, fc2_dgrad, "
       "proj_fprop, fc2_fprop)"},
      {"proj_fprop: {num_sm: 4}", "proj_fprop: missing required key 'method'"},
      {"proj_fprop: {method: zigzag}",
       "proj_fprop.method: unknown method 'zigzag' (valid methods: pipeline, ring_exchange, bulk)"},
      {"proj_fprop: {method: pipeline, num_sm: 4, cga_size: 2, set_sm_margin: true}",
       "proj_fprop: missing required key 'num_splits' for method 'pipeline'"},
      {"proj_fprop: {method: pipeline, num_sm: 4, cga_size: 2, num_splits: 0, set_sm_margin: true}",
       "comm_overlap.tp_comm_overlap_cfg.proj_fprop.num_splits must be >= 1 (got 0)"},
      {"proj_fprop: {method: bulk, num_sm: 4, cga_size: 2, set_sm_margin: false, num_splits: 2}",
       "proj_fprop: unknown key 'num_splits' (valid keys: method, num_sm, cga_size, "
       "set_sm_margin)"},
      {"proj_fprop: {method: ring_exchange, aggregate: 2}",
       "comm_overlap.tp_comm_overlap_cfg.proj_fprop.aggregate: expected a boolean"},
      {"proj_fprop: 5", "proj_fprop: expected a mapping with a 'method' key, or null, got '5'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.slot);
    EXPECT_ERROR_CONTAINS(error_of("comm_overlap:\n  tp_comm_overlap_cfg:\n    " + c.slot + "\n"),
                          c.expected);
  }
}

TEST(TrainingConfig, YamlAndJsonRoundTrip) {
  TrainingConfig custom = parse_training_config("");
  custom.model.hidden = 96;
  custom.model.heads = 6;
  custom.model.ffn = 300;
  custom.model.init_std = 0.0173;
  custom.model.dtype = DType::kBFloat16;
  custom.optimizer.lr = 3e-4;
  custom.optimizer.min_lr = 1.5e-5;
  custom.optimizer.adam_eps = 1e-12;
  custom.optimizer.muon_scale_mode = MuonScaleMode::kShapeScaling;
  custom.ddp.bucket_size = 123456789012LL;
  custom.ddp.num_buckets_per_group = 3;
  custom.optimizer.muon_lr = 0.05;
  custom.data.source = DataSource::kBin;
  custom.data.path = "true";
  custom.data.val_path = "123";
  custom.logging.plot_path = "null";
  custom.training.steps = 10'000'000'000LL;
  custom.comm_overlap.tp_comm_overlap = true;
  custom.comm_overlap.tp_comm_overlap_cfg =
      comm_overlap_preset("userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora");
  custom.comm_overlap.tp_comm_bootstrap_backend = "gloo";
  custom.comm_overlap.wgrad_deferral_limit = -1;
  custom.comm_overlap.bucket_size = 42;
  custom.parallel.tp = 2;
  for (const TrainingConfig& cfg : {parse_training_config(""), custom}) {
    const std::string yaml = to_yaml(cfg);
    EXPECT_EQ(parse_training_config(yaml, {}, "roundtrip"), cfg) << yaml;
    EXPECT_EQ(parse_training_config(to_json(cfg).dump(2), {}, "json"), cfg) << "JSON is YAML too";
  }
  const auto json = to_json(custom);
  std::vector<std::string> keys;
  for (const auto& [key, value] : json.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"model", "data", "optimizer", "ddp", "training",
                                            "logging", "comm_overlap", "parallel"}));
  EXPECT_EQ(json["optimizer"]["kind"], "layer-wise");
  EXPECT_EQ(json["model"]["dtype"], "bf16");
  EXPECT_EQ(json["ddp"]["bucket_size"], 123456789012LL);
  EXPECT_TRUE(json["comm_overlap"]["overlap_p2p_comm"].is_null());
  EXPECT_TRUE(json["comm_overlap"]["tp_comm_overlap_cfg"]["qkv_wgrad"].is_null());
  EXPECT_EQ(json["comm_overlap"]["tp_comm_overlap_cfg"]["proj_fprop"]["method"], "pipeline");
  const std::string yaml = to_yaml(custom);
  EXPECT_NE(yaml.find("lr: 0.0003\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("clip_grad: 1.0\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("path: \"true\"\n"), std::string::npos) << yaml;
}

TEST(TrainingConfig, WarmupLongerThanTrainingIsAcceptedWithAWarning) {
  const auto cfg = parse_training_config("training: {steps: 10, warmup_steps: 50}");
  EXPECT_EQ(cfg.training.steps, 10);
  const auto warnings = config_warnings(cfg);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_ERROR_CONTAINS(warnings[0], "training.warmup_steps (50) > training.steps (10)");
  EXPECT_TRUE(
      config_warnings(parse_training_config("training: {steps: 50, warmup_steps: 50}")).empty());
}

TEST(TrainingConfig, TypoInTheFileSuggestsTheClosestKey) {
  EXPECT_ERROR_CONTAINS(error_of("optimizer: {weight_decy: 0.1}", {}),
                        "optimizer: unknown key 'weight_decy' (did you mean weight_decay?)");
}

TEST(TrainingConfig, FileErrorsNameTheFile) {
  EXPECT_THROW(load_training_config("/nonexistent/shardwise.yaml"), IoError);
  const auto dir = std::filesystem::temp_directory_path() / "shardwise_config_test";
  std::filesystem::create_directories(dir);
  const auto bad = dir / "bad.yaml";
  std::ofstream(bad) << "model:\n  hidden: [1,\n";
  try {
    load_training_config(bad);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_ERROR_CONTAINS(e.what(), bad.string() + ": invalid YAML");
  }
  std::filesystem::remove_all(dir);
}

TEST(TrainingConfig, GatherDuringStepFromTheOptimizerSectionAtAnyPipelineSize) {
  // The optimizer section's key works at pp = 1; comm_overlap's keeps Megatron's rule and wins.
  for (const char* kind : {"layer-wise", "distributed"}) {
    SCOPED_TRACE(kind);
    auto cfg = parse_training_config(
        str_cat("optimizer: {kind: ", kind, ", overlap_param_gather_with_optimizer_step: true}"));
    resolve_comm_overlap(cfg, 2);
    EXPECT_TRUE(cfg.optimizer.overlap_param_gather_with_optimizer_step);
    EXPECT_TRUE(cfg.ddp.overlap_param_gather);
    EXPECT_TRUE(
        parse_training_config(to_yaml(cfg)).optimizer.overlap_param_gather_with_optimizer_step)
        << "the resolved config prints and loads back";

    auto off = parse_training_config(
        str_cat("optimizer: {kind: ", kind, ", overlap_param_gather_with_optimizer_step: true}\n",
                "comm_overlap: {overlap_param_gather_with_optimizer_step: false}"));
    resolve_comm_overlap(off, 2);
    EXPECT_FALSE(off.optimizer.overlap_param_gather_with_optimizer_step)
        << "comm_overlap's value wins when given";

    auto megatron = parse_training_config(
        str_cat("optimizer: {kind: ", kind, "}\n",
                "comm_overlap: {overlap_param_gather_with_optimizer_step: true}"));
    EXPECT_THROW(resolve_comm_overlap(megatron, 2), ConfigError)
        << "comm_overlap's key still needs the interleaved pipeline";
  }
  EXPECT_THROW(parse_training_config(
                   "optimizer: {kind: ddp, overlap_param_gather_with_optimizer_step: true}"),
               ConfigError)
      << "only the distributed optimizers gather during their step";
}

TEST(TrainingConfig, ResolveCommOverlapForAWorld) {
  auto cfg = parse_training_config(
      "model: {layers: 4}\nparallel: {pp: 2, vp: 2}\noptimizer: {kind: distributed}");
  const auto r = resolve_comm_overlap(cfg, 8);
  EXPECT_EQ(r.data_parallel_size, 4);
  EXPECT_TRUE(r.overlap_p2p_comm);
  EXPECT_FALSE(r.batch_p2p_comm);
  EXPECT_TRUE(cfg.ddp.overlap_grad_reduce);
  EXPECT_TRUE(cfg.ddp.overlap_param_gather);
  EXPECT_TRUE(cfg.ddp.align_param_gather);
  EXPECT_EQ(cfg.ddp.bucket_size, 128LL * 1024 * 1024);
  const auto json = to_json(r);
  EXPECT_EQ(json["data_parallel_size"], 4);
  EXPECT_EQ(json["bucket_size"], 128LL * 1024 * 1024);
  EXPECT_TRUE(json["cuda_device_max_connections"].is_null());
  // The resolved config prints and loads back to the same values.
  EXPECT_TRUE(same_ddp_settings(parse_training_config(to_yaml(cfg)).ddp, cfg.ddp));
  EXPECT_THROW(resolve_comm_overlap(cfg, 7), ConfigError) << "7 ranks cannot hold pp = 2";
  EXPECT_EQ(resolve_comm_overlap(cfg, 6).data_parallel_size, 3) << "re-resolved from the snapshot";

  const auto mp = model_parallel_config(cfg, 8, GpuArch::kHopper);
  EXPECT_EQ(mp.pp, 2);
  EXPECT_EQ(mp.vp, 2);
  EXPECT_EQ(mp.world_size, 8);
  EXPECT_EQ(mp.hidden_size, 64);
  EXPECT_EQ(mp.seq_length, 32);
  EXPECT_EQ(mp.micro_batch_size, 8);
  EXPECT_EQ(mp.precision, "fp32");
}

TEST(GpuArch, Names) {
  EXPECT_EQ(gpu_arch_from_name("H100", "--gpu"), GpuArch::kHopper);
  EXPECT_EQ(gpu_arch_from_name("gb200", "--gpu"), GpuArch::kBlackwell);
  EXPECT_EQ(gpu_arch_from_name("ampere", "--gpu"), GpuArch::kAmpere);
  EXPECT_EQ(gpu_arch_from_name("cpu", "--gpu"), GpuArch::kNone);
  EXPECT_EQ(compute_capability_major(GpuArch::kBlackwell), 10);
  try {
    gpu_arch_from_name("tpu", "--gpu");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_ERROR_CONTAINS(e.what(), "--gpu: unknown GPU 'tpu' (valid: none, volta");
  }
}

}  // namespace
}  // namespace shardwise
