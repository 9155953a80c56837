#include "shardwise/train/trainer.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/model/gpt_model.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"
#include "shardwise/train/eval_report.hpp"
#include "shardwise/train/log_format.hpp"
#include "shardwise/train/loss_plot.hpp"
#include "shardwise/train/lr_schedule.hpp"
#include "shardwise/train/metrics_log.hpp"
#include "shardwise/train/nonfinite_steps.hpp"
#include "shardwise/train/synthetic_task.hpp"
#include "shardwise/train/token_file_dataset.hpp"
#include "trainer_guards.hpp"

namespace shardwise {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::unique_ptr<TokenDataset> make_dataset(const TrainingConfig& c) {
  const auto seed = static_cast<std::uint64_t>(c.training.seed);
  switch (c.data.source) {
    case DataSource::kSynthetic:
      return std::make_unique<SyntheticTaskDataset>(
          c.data.task == SyntheticTask::kAddition ? SyntheticTaskKind::kAddition
                                                  : SyntheticTaskKind::kSort,
          c.data.digits, seed, c.data.eval_samples);
    case DataSource::kText:
    case DataSource::kBin: {
      const bool text = c.data.source == DataSource::kText;
      auto read = [&](const std::string& path) {
        return text ? read_text_tokens(path) : read_bin_tokens(path);
      };
      std::vector<std::int32_t> val;
      if (!c.data.val_path.empty()) val = read(c.data.val_path);
      return std::make_unique<TokenFileDataset>(
          read(c.data.path), std::move(val), c.model.seq_len, text ? 256 : c.model.vocab, seed,
          c.data.eval_samples,
          str_cat(text ? "text file '" : "token file '", c.data.path, "'"));
    }
  }
  throw InvalidArgument("unknown data.source");
}

GptConfig gpt_config(const TrainingConfig& c, const TokenDataset& data) {
  GptConfig g;
  SW_REQUIRE(c.model.vocab == 0 || c.model.vocab >= data.vocab_size(), ConfigError,
             "model.vocab (", c.model.vocab, ") is smaller than the data's vocabulary (",
             data.vocab_size(), ")");
  g.vocab_size = c.model.vocab > 0 ? c.model.vocab : data.vocab_size();
  g.seq_len = data.seq_len();
  g.num_layers = c.model.layers;
  g.hidden = c.model.hidden;
  g.num_heads = c.model.heads;
  g.ffn_hidden = c.model.ffn;
  g.rope = c.model.position == PositionEmbedding::kRope;
  g.tied_embeddings = c.model.tied_embeddings;
  g.init_std = c.model.init_std;
  g.validate();
  return g;
}

optim::MuonOptions muon_options(const OptimizerConfig& o) {
  optim::MuonOptions m;
  m.lr = o.muon_lr;
  m.weight_decay = o.weight_decay;
  m.momentum = o.muon_momentum;
  m.nesterov = o.muon_nesterov;
  m.newton_schulz.steps = o.muon_ns_steps;
  m.newton_schulz.coefficients = o.muon_coefficient_set == MuonCoefficientSet::kQuintic
                                     ? optim::NsCoefficients::kQuintic
                                 : o.muon_coefficient_set == MuonCoefficientSet::kSimple
                                     ? optim::NsCoefficients::kSimple
                                     : optim::NsCoefficients::kPolarExpress;
  m.newton_schulz.precision = o.muon_matmul_precision == MatmulPrecision::kBf16
                                  ? optim::MatmulPrecision::kBf16
                                  : optim::MatmulPrecision::kFp32;
  m.scale_mode = o.muon_scale_mode == MuonScaleMode::kSpectral ? optim::MuonScaleMode::kSpectral
                 : o.muon_scale_mode == MuonScaleMode::kUnitRmsNorm
                     ? optim::MuonScaleMode::kUnitRmsNorm
                     : optim::MuonScaleMode::kShapeScaling;
  m.extra_scale_factor = o.muon_extra_scale_factor;
  m.split_qkv = o.muon_split_qkv;
  return m;
}

optim::AdamWOptions adamw_options(const OptimizerConfig& o) {
  optim::AdamWOptions a;
  a.lr = o.lr;
  a.weight_decay = o.weight_decay;
  a.beta1 = o.adam_beta1;
  a.beta2 = o.adam_beta2;
  a.eps = o.adam_eps;
  return a;
}

optim::OptimizerMode optimizer_mode(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kLayerWise: return optim::OptimizerMode::kLayerWise;
    case OptimizerKind::kDistributed: return optim::OptimizerMode::kDistributed;
    case OptimizerKind::kDdp: return optim::OptimizerMode::kDdp;
    case OptimizerKind::kLegacyLayerWise: return optim::OptimizerMode::kLegacyLayerWise;
  }
  return optim::OptimizerMode::kLayerWise;
}

class ProgressBar {
 public:
  ProgressBar(std::int64_t total, bool enabled) : total_(total), enabled_(enabled) {}
  void update(std::int64_t done, const std::string& status) {
    if (!enabled_) return;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / std::max<std::int64_t>(1, total_));
    std::fprintf(stdout, "\r[%s%s] %lld/%lld %s", std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), static_cast<long long>(done),
                 static_cast<long long>(total_), status.c_str());
    std::fflush(stdout);
    if (done == total_) std::fputc('\n', stdout);
  }
  bool enabled() const { return enabled_; }

 private:
  std::int64_t total_;
  bool enabled_;
};

double busy_seconds(const ProcessGroup& group) {
  double total = 0;
  for (const auto& [kind, seconds] : group.traffic().busy_seconds) {
    if (kind == CollectiveKind::kReduceScatter || kind == CollectiveKind::kAllReduce) {
      total += seconds;
    }
  }
  return total;
}

// The model's params as complete views into the DDP param buffer (what a checkpoint stores).
std::vector<ModelTensor> model_tensors(const ParamList& params, const DistributedDataParallel& ddp) {
  std::vector<ModelTensor> out;
  for (ParamId id = 0; id < params.size(); ++id) {
    out.push_back(ModelTensor{params[id].name, params[id].shape, ddp.param(id)});
  }
  return out;
}

nlohmann::ordered_json layouts_summary(const DistributedDataParallel& ddp) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& buffer : ddp.buffers()) {
    out.push_back({{"buffer", buffer->key().to_string()},
                   {"numel", buffer->numel()},
                   {"numel_unpadded", buffer->numel_unpadded()},
                   {"buckets", buffer->buckets().size()},
                   {"num_shards", buffer->layout().num_shards},
                   {"shard_aligned", buffer->layout().shard_aligned}});
  }
  return out;
}

std::int64_t bytes_moved(const ProcessGroup& group) {
  const TrafficCounters t = group.traffic();
  return t.total_sent() + t.total_received();
}

}  // namespace

TrainingSummary run_training(const TrainingConfig& input_config, const ProcessGroupPtr& world,
                             const TrainerOptions& options) {
  const auto t_start = Clock::now();
  TrainingConfig config = input_config;
  SW_REQUIRE(config.parallel.tp == 1 && config.parallel.pp == 1 && config.parallel.cp == 1,
             ConfigError,
             "the reference trainer runs data parallelism only: parallel.tp, parallel.pp and "
             "parallel.cp must be 1 (got ",
             config.parallel.tp, ", ", config.parallel.pp, ", ", config.parallel.cp, ")");
  SW_REQUIRE(config.model.dtype == DType::kFloat32, ConfigError,
             "model.dtype: the CPU reference model trains in fp32 (got ",
             dtype_name(config.model.dtype), ")");
  // The communication-overlap config decides the data-parallel settings (user values win).
  const CommOverlapResolution resolution = resolve_comm_overlap(config, world->size());
  if (options.overlap_param_gather_with_optimizer_step) {
    config.optimizer.overlap_param_gather_with_optimizer_step =
        *options.overlap_param_gather_with_optimizer_step;
  }
  const ParallelGroups groups =
      make_parallel_groups(world, ParallelSizes{1, 1, 0, config.parallel.ep});
  const ProcessGroupPtr& dp_group = groups.data_parallel;
  const int dp = dp_group->size(), rank = dp_group->rank();
  const bool is_rank0 = world->rank() == 0;
  const std::string jsonl =
      !options.log_jsonl.empty() ? options.log_jsonl : config.logging.jsonl_path;
  const std::string plot = !options.plot.empty() ? options.plot : config.logging.plot_path;
  // Before any work: every output writable, the --save root ours alone (held until we return).
  const auto save_root_lock = train_detail::prepare_outputs(*world, {options.save_dir, jsonl, plot},
                                                            is_rank0 && !options.quiet);

  const auto dataset = make_dataset(config);
  const GptConfig model_config = gpt_config(config, *dataset);
  const auto mode = optimizer_mode(config.optimizer.kind);
  train_detail::require_memory(*world, model_config, config,
                               mode == optim::OptimizerMode::kDdp ? 1 : dp);
  GptModel<float> model(model_config);
  auto ddps = optim::wrap_with_ddp({model.params()}, mode, config.ddp,
                                   DataParallelGroups::from(groups));
  DistributedDataParallel& ddp = *ddps.front();
  {
    std::vector<float*> values, grads;
    for (ParamId id = 0; id < model.params().size(); ++id) {
      values.push_back(ddp.param(id).as<float>());
      grads.push_back(ddp.main_grad(id).as<float>());
    }
    model.bind(std::move(values), std::move(grads));
  }
  model.init_parameters(static_cast<std::uint64_t>(config.model.seed));
  auto optimizer = optim::make_optimizer(mode, {&ddp}, muon_options(config.optimizer),
                                         adamw_options(config.optimizer), dp_group,
                                         config.optimizer.overlap_param_gather_with_optimizer_step);
  optimizer->set_step_options({config.optimizer.clip_grad, false});
  if (ddp.config().overlap_param_gather) {
    model.set_before_param_use(
        [&ddp](ParamId id) { ddp.finish_param_sync(ddp.bucket_group_of(id)); });
  }

  TrainingSummary summary;
  for (const auto& p : model.params()) summary.parameters += p.numel();
  summary.bucket_groups = static_cast<int>(ddp.bucket_groups().size());
  const int mbs = config.training.micro_batch_size, accum = config.training.grad_accumulation;
  const int seq = dataset->seq_len();
  const std::int64_t global_batch = std::int64_t{mbs} * accum * dp;
  const std::int64_t steps = config.training.steps;

  if (is_rank0 && !options.quiet) {
    log::info("shardwise train: ", dataset->describe());
    log::info("model: GPT ", model_config.num_layers, " layers, hidden ", model_config.hidden,
              ", heads ", model_config.num_heads, ", ffn ", model_config.ffn_hidden, ", vocab ",
              model_config.vocab_size, ", seq ", seq, " (", summary.parameters, " parameters)");
    log::info("data parallel: dp=", dp, ", optimizer=", optim::optimizer_mode_name(mode),
              ", global batch ", global_batch, " = ", mbs, " x ", accum, " x ", dp);
    log::info("resolved overlap: overlap_grad_reduce=", ddp.config().overlap_grad_reduce,
              " overlap_param_gather=", ddp.config().overlap_param_gather, " bucket_size=",
              ddp.config().bucket_size ? std::to_string(*ddp.config().bucket_size) : "none",
              " align_param_gather=", ddp.config().align_param_gather,
              " overlap_param_gather_with_optimizer_step=",
              config.optimizer.overlap_param_gather_with_optimizer_step, " bucket_groups=",
              ddp.bucket_groups().size());
    for (const auto& w : resolution.warnings) log::warning(w);
  }

  MetricsLog metrics(jsonl, is_rank0);
  ProgressBar progress(steps, is_rank0 && !options.quiet && config.logging.progress &&
                                  isatty(fileno(stdout)));
  const LrScheduleParams schedule{config.optimizer.lr, config.optimizer.min_lr,
                                  config.training.warmup_steps, steps,
                                  config.training.lr_schedule == LrSchedule::kCosine};

  // Resume: weights, optimizer state (resharded to this layout), step and data position.
  std::int64_t start_step = 0, consumed_samples = 0;
  if (!options.load_dir.empty()) {
    const auto dir = resolve_checkpoint_directory(options.load_dir, options.load_step);
    const LoadedCheckpoint loaded =
        load_checkpoint(dir, model_tensors(model.params(), ddp), *optimizer, *dp_group,
                        optim::optimizer_mode_name(mode));
    SW_REQUIRE(loaded.step <= steps, ConfigError, "checkpoint '", dir.string(), "' is of step ",
               loaded.step, ", beyond training.steps (", steps, ")");
    start_step = loaded.step;
    consumed_samples = loaded.consumed_samples;
    summary.start_step = start_step;
    if (is_rank0 && !options.quiet) {
      log::info("resumed from checkpoint '", dir.string(), "' at step ", start_step, " (",
                consumed_samples, " samples consumed)");
    }
  }
  auto save = [&](std::int64_t step) {
    ddp.finish_all_param_sync();  // every rank (rank 0 above all) must hold the current weights
    train_detail::require_finite_weights(*dp_group, model_tensors(model.params(), ddp), step);
    CheckpointSaveRequest request;
    request.root = options.save_dir;
    request.step = step;
    request.consumed_samples = consumed_samples;
    request.keep_last = options.keep_last;
    request.optimizer_kind = std::string(optim::optimizer_mode_name(mode));
    request.extra = {{"world_size", world->size()},
                     {"global_batch", global_batch},
                     {"rng", {{"model_seed", config.model.seed},
                              {"data_seed", config.training.seed},
                              {"note", "training is deterministic: the model is initialised from "
                                       "model_seed once and samples are a function of data_seed "
                                       "and the sample index (trainer.consumed_samples)"}}},
                     {"layouts", layouts_summary(ddp)},
                     {"config", to_json(config)}};
    const auto dir = save_checkpoint(request, model_tensors(model.params(), ddp), *optimizer,
                                     *dp_group);
    summary.checkpoints.push_back(dir.string());
    if (is_rank0 && !options.quiet) {
      if (progress.enabled()) std::fputc('\n', stdout);
      log::info("saved checkpoint '", dir.string(), "'");
    }
  };

  NonFiniteSteps nonfinite(config.training.skip_nonfinite_steps);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(mbs) * seq),
      targets(static_cast<std::size_t>(mbs) * seq);

  auto evaluate = [&](std::int64_t step) {
    const std::int64_t n = dataset->validation_size();
    constexpr int kEvalBatch = 64;
    double loss_sum = 0, correct = 0, count = 0;
    std::vector<std::int32_t> et(static_cast<std::size_t>(kEvalBatch) * seq),
        eg(static_cast<std::size_t>(kEvalBatch) * seq);
    // Rank r evaluates the r-th of dp contiguous slices of the held-out set.
    const std::int64_t lo = n * rank / dp, hi = n * (rank + 1) / dp;
    for (std::int64_t first = lo; first < hi; first += kEvalBatch) {
      const int b = static_cast<int>(std::min<std::int64_t>(kEvalBatch, hi - first));
      dataset->fill(Split::kValidation, first, b, et.data(), eg.data());
      loss_sum += model.forward(et.data(), eg.data(), b, seq) * b;
      for (bool ok : model.exact_match()) correct += ok;
      count += b;
    }
    EvalMetrics e;
    e.step = step;
    const double total = optim::all_reduce_sum_exact(*dp_group, count);
    e.eval_loss = optim::all_reduce_sum_exact(*dp_group, loss_sum) / total;
    e.accuracy = optim::all_reduce_sum_exact(*dp_group, correct) / total;
    add_language_model_metrics(e, *dataset);
    summary.evals.push_back(e);
    metrics.write(eval_record(e));
    if (is_rank0 && !options.quiet) {
      if (progress.enabled()) std::fputc('\n', stdout);
      log::info("eval step ", step, ": ", eval_summary(e));
    }
    return e;
  };

  for (std::int64_t step = start_step; step < steps; ++step) {
    const auto t0 = Clock::now();
    const double lr = learning_rate_at(schedule, step);
    optimizer->set_lr(lr);
    ddp.zero_grad_buffer();
    const double busy_before = busy_seconds(*dp_group);
    double local_loss = 0;
    for (int m = 0; m < accum; ++m) {
      ddp.set_is_last_microbatch(m == accum - 1);
      const std::int64_t first = consumed_samples + (std::int64_t{m} * dp + rank) * mbs;
      dataset->fill(Split::kTrain, first, mbs, tokens.data(), targets.data());
      local_loss += model.forward(tokens.data(), targets.data(), mbs, seq) / accum;
      model.backward(1.0 / accum, [&ddp](ParamId id) { ddp.register_grad_ready(id); });
    }
    int dispatched_in_backward = 0;
    for (const auto& group : ddp.bucket_groups()) {
      dispatched_in_backward += group->grad_sync_dispatched() ? 1 : 0;
    }
    const auto t_wait = Clock::now();
    ddp.finish_grad_sync();
    const double exposed = seconds_since(t_wait);
    const double comm = busy_seconds(*dp_group) - busy_before;
    const double loss = optim::all_reduce_sum_exact(*dp_group, local_loss) / dp;
    // A non-finite loss never reaches the optimizer; a non-finite grad norm makes it skip the
    // update. Either way the step is skipped (within the allowance) or the run stops here.
    optim::StepResult result;
    result.grad_norm = std::numeric_limits<double>::quiet_NaN();
    if (std::isfinite(loss)) result = optimizer->step();
    const bool skipped = nonfinite.skip_step(*dp_group, step + 1, loss, result.grad_norm);
    consumed_samples += global_batch;

    StepMetrics s;
    s.step = step + 1;
    s.loss = loss;
    s.grad_norm = result.grad_norm;
    s.lr = lr;
    s.step_ms = seconds_since(t0) * 1e3;
    s.tokens_per_s = static_cast<double>(global_batch * seq) / (s.step_ms / 1e3);
    s.comm_hidden_fraction = comm > 0 ? std::clamp(1.0 - exposed / comm, 0.0, 1.0) : 0.0;
    s.groups_dispatched_in_backward = dispatched_in_backward;
    s.skipped = skipped;
    summary.steps.push_back(s);
    metrics.write({{"step", s.step},
                   {"loss", s.loss},
                   {"grad_norm", s.grad_norm},
                   {"lr", s.lr},
                   {"tokens_per_s", s.tokens_per_s},
                   {"step_ms", s.step_ms},
                   {"comm_hidden_fraction", s.comm_hidden_fraction},
                   {"groups_dispatched_in_backward", s.groups_dispatched_in_backward},
                   {"skipped", skipped}});
    const bool log_line = config.logging.log_interval > 0 &&
                          (s.step % config.logging.log_interval == 0 || s.step == steps);
    if (is_rank0 && !options.quiet) {
      const std::string status = str_cat("loss ", s.loss, " | grad_norm ", s.grad_norm, " | lr ",
                                         s.lr, " | ", static_cast<long long>(s.tokens_per_s),
                                         " tok/s | ", s.step_ms, " ms | ",
                                         comm_hidden_text(s.comm_hidden_fraction));
      if (progress.enabled()) {
        progress.update(s.step, status);
      } else if (log_line) {
        log::info("step ", s.step, "/", steps, " | ", status);
      }
    }
    const std::int64_t interval = config.training.eval_interval;
    if (interval > 0 && s.step % interval == 0 && s.step != steps) evaluate(s.step);
    if (!options.save_dir.empty() &&
        ((options.save_interval > 0 && s.step % options.save_interval == 0) || s.step == steps)) {
      save(s.step);
    }
  }
  ddp.finish_all_param_sync();
  summary.final_loss = summary.steps.empty() ? 0 : summary.steps.back().loss;
  summary.final_eval = evaluate(steps);
  summary.wall_seconds = seconds_since(t_start);
  summary.bytes_communicated = bytes_moved(*dp_group);
  if (options.on_finish) {
    std::vector<TensorView> values;
    for (ParamId id = 0; id < model.params().size(); ++id) values.push_back(ddp.param(id));
    options.on_finish(TrainedModel{model.params(), values, *dp_group});
  }

  metrics.close();
  if (is_rank0) {
    if (!plot.empty()) {
      PlotSeries train{"train loss", {}}, eval{"held-out loss", {}, /*markers=*/true};
      for (const auto& s : summary.steps) train.points.emplace_back(s.step, s.loss);
      for (const auto& e : summary.evals) eval.points.emplace_back(e.step, e.eval_loss);
      write_loss_plot(plot, {train, eval},
                      str_cat("shardwise train: ", optim::optimizer_mode_name(mode), ", dp=", dp));
    }
    if (!options.quiet) {
      log::info("done: ", steps, " steps in ", summary.wall_seconds, " s | final loss ",
                summary.final_loss, " | held-out ", eval_summary(*summary.final_eval), " | ",
                summary.bytes_communicated, " bytes communicated by rank 0");
    }
  }
  return summary;
}

}  // namespace shardwise
