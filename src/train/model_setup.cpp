// Trainer steps 2 and 3: the data and the model, then DDP buffers and the optimizer over them.
#include "shardwise/core/error.hpp"
#include "shardwise/train/synthetic_task.hpp"
#include "shardwise/train/token_file_dataset.hpp"
#include "trainer_guards.hpp"
#include "training_run.hpp"

namespace shardwise::train_detail {
namespace {

std::unique_ptr<TokenDataset> make_dataset(const TrainingConfig& c) {
  const auto seed = static_cast<std::uint64_t>(c.training.seed);
  switch (c.data.source) {
    case DataSource::kSynthetic:
      return std::make_unique<SyntheticTaskDataset>(c.data.task == SyntheticTask::kAddition
                                                        ? SyntheticTaskKind::kAddition
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
          c.data.eval_samples, str_cat(text ? "text file '" : "token file '", c.data.path, "'"));
    }
  }
  throw InvalidArgument("unknown data.source");
}

GptConfig gpt_config(const TrainingConfig& c, const TokenDataset& data) {
  GptConfig g;
  SW_REQUIRE(c.model.vocab == 0 || c.model.vocab >= data.vocab_size(), ConfigError, "model.vocab (",
             c.model.vocab, ") is smaller than the data's vocabulary (", data.vocab_size(), ")");
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

}  // namespace

TrainingModel build_model_and_data(const RunContext& run, ProcessGroup& world) {
  TrainingModel m;
  m.dataset = make_dataset(run.config);
  m.model_config = gpt_config(run.config, *m.dataset);
  m.mode = optimizer_choice(run.config.optimizer).mode;
  // Distributed optimizers hold 1/dp of the state per rank; plain DDP holds all of it.
  require_memory(world, m.model_config, run.config,
                 m.mode == optim::OptimizerMode::kDdp ? 1 : run.dp);
  m.model = std::make_unique<GptModel<float>>(m.model_config);
  return m;
}

void build_ddp_and_optimizer(TrainingModel& m, const RunContext& run) {
  GptModel<float>& model = *m.model;
  m.ddps = optim::wrap_with_ddp({model.params()}, m.mode, run.config.ddp,
                                DataParallelGroups::from(run.groups));
  DistributedDataParallel& ddp = m.ddp();
  std::vector<float*> values, grads;
  for (ParamId id = 0; id < model.params().size(); ++id) {
    values.push_back(ddp.param(id).as<float>());
    grads.push_back(ddp.main_grad(id).as<float>());
  }
  model.bind(std::move(values), std::move(grads));
  model.init_parameters(static_cast<std::uint64_t>(run.config.model.seed));
  const OptimizerChoice choice = optimizer_choice(run.config.optimizer);
  m.optimizer =
      optim::make_optimizer(m.mode, {&ddp}, choice.muon, choice.adamw, run.groups.data_parallel,
                            run.config.optimizer.overlap_param_gather_with_optimizer_step);
  m.optimizer->set_step_options({run.config.optimizer.clip_grad, false});
  if (ddp.config().overlap_param_gather) {
    // Forward waits for a param's all-gather only when it first reads that param.
    model.set_before_param_use(
        [&ddp](ParamId id) { ddp.finish_param_sync(ddp.bucket_group_of(id)); });
  }
}

std::vector<ModelTensor> model_tensors(const TrainingModel& m) {
  std::vector<ModelTensor> out;
  const ParamList& params = m.model->params();
  for (ParamId id = 0; id < params.size(); ++id) {
    out.push_back(ModelTensor{params[id].name, params[id].shape, m.ddp().param(id)});
  }
  return out;
}

}  // namespace shardwise::train_detail
