#include "tensor_parallel_checkpoint.hpp"

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>

#include "shardwise/checkpoint/checkpoint_shards.hpp"
#include "shardwise/comm/rank_flags.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/model/tensor_parallel.hpp"
#include "shardwise/train/checkpoint_gpt.hpp"

namespace shardwise::train_detail {
namespace {

namespace fs = std::filesystem;

// Every state field an optimizer of the trainer keeps (AdamW's and Muon's).
const std::vector<std::string> kStateFields = {"exp_avg", "exp_avg_sq", "step", "momentum_buffer"};

// A whole-param, local optimizer over storage it owns: the checkpoint layer saves and loads it
// like the tp = 1 'ddp' optimizer (every param whole, state stored once). It never steps.
class HeldState : public optim::Optimizer {
 public:
  // params: names and shapes; fields: per param, the state fields it carries.
  HeldState(const ParamList& params, const std::vector<std::vector<std::string>>& fields)
      : Optimizer({}), main_(params.size()) {
    std::vector<optim::OptimParam> list;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto n = static_cast<std::size_t>(params[i].numel());
      main_[i].assign(n, 0.0f);
      list.push_back({params[i].name, params[i].shape, main_[i].data(), nullptr, {}});
      for (const std::string& f : fields[i]) {
        state_[params[i].name][f].assign(is_per_param_field(f) ? 1 : n, 0.0f);
      }
    }
    groups_ = optim::single_group(std::move(list));
  }
  std::string_view kind() const override { return "tensor_parallel_checkpoint"; }
  bool step_with_ready_grads() override {
    throw InvalidArgument("the checkpoint view of a tensor-parallel run does not step");
  }
  optim::OptimizerState state_dict() const override { return state_; }
  optim::OptimizerStateView state_view() const override {
    optim::OptimizerStateView view;
    for (const auto& [param, fields] : state_) {
      for (const auto& [field, values] : fields) view.fields_of(param)[field] = values;
    }
    return view;
  }
  void load_state_dict(const optim::OptimizerState& state) override {
    optim::check_no_unknown_params(*this, state, "tensor-parallel checkpoint");
    state_ = state;
  }
  std::vector<float>& main(std::size_t i) { return main_[i]; }
  optim::OptimizerState& state() { return state_; }

 private:
  std::vector<std::vector<float>> main_;
  optim::OptimizerState state_;
};

ParamList full_params(const TrainingModel& m) { return gpt_param_list(m.model_config, 1); }

// Which state fields each param carries: the union over the DP group of what its owners hold.
std::vector<std::vector<std::string>> fields_per_param(const TrainingModel& m,
                                                       const optim::OptimizerState& owned,
                                                       ProcessGroup& dp, bool replicated) {
  const ParamList& params = m.model->params();
  std::vector<float> flags(params.size() * kStateFields.size(), 0.0f);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto it = owned.find(params[i].name);
    if (it == owned.end()) continue;
    for (const auto& [field, values] : it->second) {
      const auto f = std::find(kStateFields.begin(), kStateFields.end(), field);
      SW_CHECK(f != kStateFields.end(), "optimizer state field '", field, "' of param ",
               params[i].name, " is unknown to the tensor-parallel checkpoint");
      flags[i * kStateFields.size() + static_cast<std::size_t>(f - kStateFields.begin())] = 1;
    }
  }
  if (!replicated) {
    dp.all_reduce(TensorView{flags.data(), static_cast<std::int64_t>(flags.size())}, ReduceOp::kMax)
        ->wait();
  }
  std::vector<std::vector<std::string>> out(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    for (std::size_t f = 0; f < kStateFields.size(); ++f) {
      if (flags[i * kStateFields.size() + f] > 0) out[i].push_back(kStateFields[f]);
    }
  }
  return out;
}

// One field of one param over the whole (shard-space) param: each DP rank adds the elements it
// owns (every element is owned by exactly one rank, the others add zeros).
std::vector<float> assemble_over_dp(const OptimizerShard* owned, const std::vector<float>* values,
                                    std::int64_t numel, bool per_param, ProcessGroup& dp,
                                    bool replicated) {
  std::vector<float> out(static_cast<std::size_t>(per_param ? 1 : numel), 0.0f);
  if (owned != nullptr && values != nullptr) {
    std::copy(values->begin(), values->end(), out.begin() + (per_param ? 0 : owned->start));
  }
  if (!replicated) {
    // A per-param field (the step count) is the same on every owner: the maximum is it.
    dp.all_reduce(TensorView{out.data(), static_cast<std::int64_t>(out.size())},
                  per_param ? ReduceOp::kMax : ReduceOp::kSum)
        ->wait();
  }
  return out;
}

// The run's optimizer state as full (tp = 1) tensors, on every rank.
std::unique_ptr<HeldState> gather_full_state(const TrainingModel& m, const RunContext& run,
                                             const ParamList& full) {
  const ParamList& shards = m.model->params();
  const bool replicated = optimizer_state_is_replicated(*m.optimizer);
  const optim::OptimizerState owned = m.optimizer->state_dict();
  std::map<std::string, OptimizerShard> owned_shards;
  for (const OptimizerShard& s : optimizer_shards(*m.optimizer)) owned_shards[s.param] = s;
  const auto fields = fields_per_param(m, owned, run.dp_group(), replicated);
  auto held = std::make_unique<HeldState>(full, fields);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const auto shard_it = owned_shards.find(shards[i].name);
    const OptimizerShard* mine = shard_it != owned_shards.end() ? &shard_it->second : nullptr;
    const auto state_it = owned.find(shards[i].name);
    std::vector<float> main_values;
    if (mine != nullptr) main_values.assign(mine->main_param, mine->main_param + mine->count());
    auto gather = [&](const std::vector<float>* values, bool per_param, std::vector<float>& dst) {
      const std::vector<float> dp_whole =
          assemble_over_dp(mine, values, shards[i].numel(), per_param, run.dp_group(), replicated);
      if (per_param) {
        dst = dp_whole;
      } else {
        gather_tp_param(full[i], shards[i], run.tp_group(), dp_whole.data(), dst.data());
      }
    };
    gather(mine != nullptr ? &main_values : nullptr, false, held->main(i));
    for (const std::string& field : fields[i]) {
      const std::vector<float>* values = state_it != owned.end() && state_it->second.contains(field)
                                             ? &state_it->second.at(field)
                                             : nullptr;
      gather(values, is_per_param_field(field), held->state()[full[i].name][field]);
    }
  }
  return held;
}

// The fields each param carries in checkpoint `directory` (main_param aside), from its manifest's
// index, checked as load_checkpoint checks it (this runs before that load).
std::vector<std::vector<std::string>> saved_fields(const fs::path& directory,
                                                   const ParamList& full) {
  std::map<std::string, const std::vector<std::string>*> by_param;
  const std::vector<SavedShard> index = read_checkpoint_index(directory);
  for (const SavedShard& s : index) by_param.emplace(s.param, &s.fields);
  std::vector<std::vector<std::string>> out(full.size());
  for (std::size_t i = 0; i < full.size(); ++i) {
    const auto it = by_param.find(full[i].name);
    if (it == by_param.end()) continue;
    for (const std::string& name : *it->second) {
      if (name != kMainParamField) out[i].push_back(name);
    }
  }
  return out;
}

// `text` with every `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// This TP rank's slice of the loaded full tensors: the weights into the model, the optimizer
// state (a whole-param local state in shard shapes) through the checkpoint layer's resharding
// reader, which picks out the element ranges this rank owns under its layout.
void take_tensor_parallel_slice(TrainingModel& m, const RunContext& run, const fs::path& directory,
                                const std::vector<std::vector<std::string>>& fields,
                                HeldState& held, FullWeights& weights, const ParamList& full) {
  const ParamList& shards = m.model->params();
  HeldState sliced(shards, fields);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    auto slice = [&](const std::vector<float>& src, std::vector<float>& dst) {
      slice_tp_shard(full[i], shards[i], run.tp, run.tp_rank, src.data(), dst.data());
    };
    slice(weights.values[i], sliced.main(i));
    std::copy(sliced.main(i).begin(), sliced.main(i).end(), m.ddp().param(i).as<float>());
    for (const std::string& field : fields[i]) {
      std::vector<float>& dst = sliced.state()[shards[i].name][field];
      const std::vector<float>& src = held.state()[full[i].name][field];
      if (is_per_param_field(field)) {
        dst = src;
      } else {
        slice(src, dst);
      }
    }
  }
  const fs::path scratch =
      fs::temp_directory_path() /
      str_cat("shardwise-tp-load-", ::getpid(), "-", run.tp_rank, "-", run.rank, ".safetensors");
  try {
    save_state_dict_to_file(sliced, scratch);
    load_optimizer_shards(*m.optimizer, read_shard_file_index(scratch),
                          str_cat("checkpoint '", directory.string(), "'"));
  } catch (const std::exception& e) {
    fs::remove(scratch);
    // The scratch file is ours, not the user's: name the checkpoint it was sliced from.
    throw FormatError(
        replaced(e.what(), quoted(scratch),
                 str_cat(quoted(directory), " (this rank's tensor-parallel slice of its state)")));
  }
  fs::remove(scratch);
}

// Runs `step` on every rank of `world`; a failure on any rank fails all of them (none is left
// waiting in the next collective): the failing rank with its own error, the others naming it.
// A failure that is not a shardwise::Error (a JSON library's, say) still reads as a bad
// checkpoint: FormatError.
void fail_together(ProcessGroup& world, const fs::path& directory,
                   const std::function<void()>& step) {
  const std::vector<int> failed = run_on_every_rank(world, [&] {
    try {
      step();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw FormatError(e.what());
    }
  });
  SW_REQUIRE(failed.empty(), FormatError, "loading checkpoint '", directory.string(),
             "' failed on rank(s) ", rank_list(failed), " (see their errors)");
}

}  // namespace

std::vector<ModelTensor> FullWeights::tensors() { return fp32_model_tensors(params, values); }

FullWeights gather_full_weights(const TrainingModel& m, const RunContext& run) {
  FullWeights out;
  out.params = full_params(m);
  const ParamList& shards = m.model->params();
  for (std::size_t i = 0; i < shards.size(); ++i) {
    out.values.emplace_back(static_cast<std::size_t>(out.params[i].numel()));
    gather_tp_param(out.params[i], shards[i], run.tp_group(), m.ddp().param(i).as<float>(),
                    out.values.back().data());
  }
  return out;
}

std::string save_tensor_parallel_checkpoint(TrainingModel& m, const RunContext& run,
                                            CheckpointSaveRequest request) {
  FullWeights weights = gather_full_weights(m, run);
  const std::unique_ptr<HeldState> state = gather_full_state(m, run, weights.params);
  // TP rank 0 of every DP rank saves the (identical) full tensors as a DP group; the other TP
  // ranks learn the outcome from their TP rank 0.
  std::string error, directory;
  if (run.tp_rank == 0) {
    try {
      directory = save_checkpoint(request, weights.tensors(), *state, run.dp_group()).string();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  float failed = error.empty() ? 0.0f : 1.0f;
  run.tp_group().broadcast(TensorView{&failed, 1}, 0)->wait();
  if (run.tp_rank == 0 && !error.empty()) throw IoError(error);
  SW_REQUIRE(failed == 0.0f, IoError, "saving checkpoint step ", request.step,
             " failed on TP rank 0 (see its error)");
  if (run.tp_rank != 0) directory = (request.root / step_directory_name(request.step)).string();
  return directory;
}

LoadedCheckpoint load_tensor_parallel_checkpoint(TrainingModel& m, const RunContext& run,
                                                 const fs::path& directory) {
  const ParamList full = full_params(m);
  std::vector<std::vector<std::string>> fields;
  fail_together(*run.groups.world, directory, [&] { fields = saved_fields(directory, full); });
  HeldState held(full, fields);
  FullWeights weights{full, {}};
  for (const ParamInfo& p : full) weights.values.emplace_back(static_cast<std::size_t>(p.numel()));
  LoadedCheckpoint loaded =
      load_checkpoint(directory, weights.tensors(), held, *run.groups.world, to_string(m.kind));
  fail_together(*run.groups.world, directory, [&] {
    take_tensor_parallel_slice(m, run, directory, fields, held, weights, full);
  });
  return loaded;
}

}  // namespace shardwise::train_detail
