// `mpirun -np 6 shardwise refit --config FILE.yaml [section.key=value ...] [--repeat K]
//  [--mxfp8 all|none|receiver|send] [--checkpoint DIR] [--tp N] [--json FILE]`
//
// An RL-style weight refit: the first world-N ranks train (a short run_training on their own
// sub-group, or the weights of --checkpoint DIR) and so hold every param whole, as data-parallel
// replicas; the last N ranks (--tp, default 2) are an inference group that wants Megatron
// tensor-parallel weights - MXFP8 for the 2-D non-embedding weights, bf16 for the rest - in
// persistent buffers. Each mode refits K times into the same buffers (their addresses are checked
// after every refit), and every refit is verified bit for bit on the inference ranks against an
// independent path: rank 0 sends the whole fp32 params point-to-point, each inference rank slices
// and quantizes its part itself. Prints bytes on the wire, time and GB/s per mode; exits 0 with
// "verified N tensors, all bit-exact", 1 naming the first mismatch, 2 for bad input.
//
// With --config the inference ranks then run a TP forward of what the last refit of each mode
// delivered (MXFP8 dequantized to bf16) on a fixed held-out batch and compare its normalised logits
// and loss with the training model's forward (refit_tp_forward.hpp): errors and bounds per mode in
// the table and the JSON ("tp_forward"); exit 1 when an error exceeds its bound. --tp-export DIR2
// runs the same TP forward on what `shardwise reshard --tp N` wrote to DIR2 (give --checkpoint DIR,
// the weights it was cut from, and --config for the model and data): JSON "tp_export_forward".
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_weights_path.hpp"
#include "cli_integer.hpp"
#include "cli_path.hpp"
#include "comm_timeout_option.hpp"
#include "command_registry.hpp"
#include "launch_env.hpp"
#include "rank0_outputs_check.hpp"
#include "refit_tp_forward.hpp"
#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/comm/settings_agreement.hpp"
#include "shardwise/config/training_config.hpp"
#include "shardwise/core/atomic_file.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/command_paths.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/finite_values.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/core/output_preflight.hpp"
#include "shardwise/reshard/refit_verification.hpp"
#include "shardwise/reshard/tp_export.hpp"
#include "shardwise/train/model_from_config.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise::cli {
namespace {

struct RefitArgs {
  std::string config;
  std::vector<std::string> overrides;
  int repeat = 3;
  std::string mxfp8 = "all";
  std::string checkpoint;
  int tp = 2;
  std::string json;
  std::string tp_export;     // a `shardwise reshard --tp N` output to run through the TP forward
  std::string weights_file;  // the weights file --checkpoint names, resolved once before MPI
  double comm_timeout = kDefaultCommTimeoutSeconds;
};

std::vector<RefitMode> modes_of(const std::string& name) {
  if (name == "all") {
    return {RefitMode::kBf16, RefitMode::kMxfp8ReceiverSide, RefitMode::kMxfp8ConvertOnSend};
  }
  if (name == "none") return {RefitMode::kBf16};
  if (name == "receiver") return {RefitMode::kMxfp8ReceiverSide};
  if (name == "send") return {RefitMode::kMxfp8ConvertOnSend};
  throw InvalidArgument(
      str_cat("--mxfp8: unknown mode '", name, "' (valid: all, none, receiver, send)"));
}

// Whole params of the training side, fp32, in model order.
struct ModelWeights {
  std::vector<RefitParam> params;
  std::map<std::string, std::vector<float>> values;
};

std::vector<float> to_fp32(const void* data, std::int64_t n, DType dtype, const std::string& name) {
  SW_REQUIRE(dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16,
             InvalidArgument, "refit: param ", name, " has dtype ", dtype_name(dtype),
             "; expected fp32, bf16 or fp16");
  std::vector<float> out(static_cast<std::size_t>(n));
  convert_floats(TensorView{const_cast<void*>(data), n, dtype},
                 TensorView{out.data(), n, DType::kFloat32}, name);
  return out;
}

ModelWeights load_checkpoint_weights(const std::string& weights_file) {
  const SafetensorsFile file = SafetensorsFile::open(weights_file);
  require_whole_model_weights(file);
  ModelWeights w;
  for (const SafetensorsTensorInfo& info : file.tensors()) {
    w.params.push_back({info.name, info.shape});
    const std::vector<float>& v = w.values[info.name] =
        to_fp32(file.tensor(info.name).data, info.numel(), info.dtype, info.name);
    require_finite_tensor(v.data(), info.numel(), file.path(), info.name);
  }
  return w;
}

ModelWeights train_weights(const TrainingConfig& config, const ProcessGroupPtr& train_group) {
  ModelWeights w;
  TrainerOptions options;
  options.on_finish = [&w](const TrainedModel& model) {
    for (std::size_t i = 0; i < model.params.size(); ++i) {
      const ParamInfo& p = model.params[i];
      const TensorView& v = model.values[i];
      std::optional<TpRule> rule;
      if (p.tp_split) rule = tp_rule_from_split(p.name, p.tp_split->dim, p.tp_split->stride);
      w.params.push_back({p.name, p.shape, rule});
      w.values[p.name] = to_fp32(v.data, v.numel, v.dtype, p.name);
    }
  };
  run_training(config, train_group, options);
  return w;
}

// Rank 0's param list with the model's TP splits (null: the name rules), sent to every rank of
// the world (the inference ranks build nothing).
std::vector<RefitParam> broadcast_params(ProcessGroup& world, const std::vector<RefitParam>& mine) {
  std::string text;
  if (world.rank() == 0) {
    nlohmann::json list = nlohmann::json::array();
    for (const RefitParam& p : mine) {
      nlohmann::json rule = nullptr;
      if (p.tp_rule) {
        const bool split = p.tp_rule->kind != TpKind::kReplicated;
        rule = {split ? p.tp_rule->partition_dim : -1, p.tp_rule->stride};
      }
      list.push_back({p.name, p.shape, rule});
    }
    text = list.dump();
  }
  std::int64_t length = static_cast<std::int64_t>(text.size());
  world.broadcast({&length, 1, DType::kInt64}, 0)->wait();
  text.resize(static_cast<std::size_t>(length));
  world.broadcast({text.data(), length, DType::kUInt8}, 0)->wait();
  std::vector<RefitParam> params;
  for (const auto& entry : nlohmann::json::parse(text)) {
    RefitParam p{entry.at(0).get<std::string>(), entry.at(1).get<std::vector<std::int64_t>>()};
    if (!entry.at(2).is_null()) {
      p.tp_rule =
          tp_rule_from_split(p.name, entry.at(2).at(0).get<int>(), entry.at(2).at(1).get<int>());
    }
    params.push_back(std::move(p));
  }
  return params;
}

struct ModeReport {
  RefitMode mode = RefitMode::kBf16;
  std::int64_t wire_bytes = 0;
  std::int64_t elements = 0;
  std::vector<double> seconds;  // per refit
  double stage_seconds = 0;
  std::optional<TpForwardReport> forward;  // with a config: the TP forward check
  double median() const {
    std::vector<double> s = seconds;
    std::sort(s.begin(), s.end());
    return s.empty() ? 0 : s[s.size() / 2];
  }
  double best() const {
    return seconds.empty() ? 0 : *std::min_element(seconds.begin(), seconds.end());
  }
};

// Agrees on the lowest failing rank (or -1) so exactly one rank reports.
int first_failing_rank(ProcessGroup& world, bool failed) {
  std::int64_t v = failed ? world.size() - world.rank() : 0;
  world.all_reduce({&v, 1, DType::kInt64}, ReduceOp::kMax)->wait();
  return v == 0 ? -1 : world.size() - static_cast<int>(v);
}

// What every rank refits: the param list (all ranks) and fp32 views of the values (training
// ranks; the values live in `weights`).
struct RefitInputs {
  ModelWeights weights;
  std::vector<RefitParam> params;
  std::map<std::string, TensorView> views;
  std::int64_t total_elements = 0;
  int mxfp8_params = 0;
  // With a training config: the model it describes, a held-out batch and the inference ranks'
  // group, for the TP forward check (null group on the other ranks).
  std::optional<GptConfig> model;
  HeldOutBatch batch;
  ProcessGroupPtr inference_group;
};

// The first sequences of the held-out split (at most 2: the check backpropagates once per
// position and token).
void prepare_forward_check(const TrainingConfig& config, int inference_tp, RefitInputs& in) {
  const auto data = make_token_dataset(config);
  TrainingConfig tp1 = config;
  tp1.parallel.tp = 1;
  in.model = gpt_config_for(tp1, *data);
  in.model->validate_tensor_parallel(inference_tp, "--tp");  // on every rank: all exit 2 alike
  in.batch.batch = static_cast<int>(std::min<std::int64_t>(2, data->validation_size()));
  in.batch.seq = data->seq_len();
  const auto n = static_cast<std::size_t>(in.batch.batch) * in.batch.seq;
  in.batch.tokens.resize(n);
  in.batch.targets.resize(n);
  data->fill(Split::kValidation, 0, in.batch.batch, in.batch.tokens.data(),
             in.batch.targets.data());
}

// Sends the TP forward report of the first inference rank to rank 0.
std::optional<TpForwardReport> report_to_rank0(ProcessGroup& world, int first_inference,
                                               const std::optional<TpForwardReport>& mine) {
  double v[6] = {};
  if (mine) {
    const TpForwardReport& r = *mine;
    const double fill[6] = {r.max_abs_logit_error, r.max_rel_logit_error, r.loss,
                            r.reference_loss,      r.loss_bound,          r.worst_logit_ratio};
    std::copy(fill, fill + 6, v);
  }
  if (world.rank() == first_inference) world.send({v, 6, DType::kInt64}, 0, 7301)->wait();
  if (world.rank() != 0) return std::nullopt;
  world.recv({v, 6, DType::kInt64}, first_inference, 7301)->wait();
  TpForwardReport r;
  r.max_abs_logit_error = v[0];
  r.max_rel_logit_error = v[1];
  r.loss = v[2];
  r.reference_loss = v[3];
  r.loss_difference = v[2] - v[3];
  r.loss_bound = v[4];
  r.worst_logit_ratio = v[5];
  return r;
}

// The training ranks each read --checkpoint: storage each node has its own copy of may hold
// another run's weights under the same path, and the refit would then deliver a mix (it ended in
// "mismatch on rank N", exit 1). FormatError on every training rank, naming the ranks.
void require_same_weights_on_every_training_rank(ProcessGroup& train_group,
                                                 const std::string& weights_file,
                                                 ModelWeights& weights) {
  std::vector<ModelTensor> tensors;
  for (const RefitParam& p : weights.params) {
    std::vector<float>& v = weights.values.at(p.name);
    tensors.push_back({p.name, p.shape,
                       TensorView{v.data(), static_cast<std::int64_t>(v.size()), DType::kFloat32}});
  }
  require_same_checkpoint_on_every_rank(train_group, weights_file, nlohmann::json(), tensors);
}

void gather_refit_inputs(const RefitArgs& args, const TrainingConfig* config, ProcessGroup& world,
                         const ProcessGroupPtr& train_group, bool trains, RefitInputs& in) {
  if (trains && args.checkpoint.empty()) in.weights = train_weights(*config, train_group);
  if (trains && !args.checkpoint.empty()) {
    in.weights = load_checkpoint_weights(args.weights_file);
    require_same_weights_on_every_training_rank(*train_group, args.weights_file, in.weights);
  }
  in.params = broadcast_params(world, in.weights.params);
  for (auto& [name, v] : in.weights.values) {
    in.views[name] = {v.data(), static_cast<std::int64_t>(v.size()), DType::kFloat32};
  }
  for (const RefitParam& p : in.params) {
    std::int64_t n = 1;
    for (auto d : p.shape) n *= d;
    in.total_elements += n;
    in.mxfp8_params += is_mxfp8_refit_candidate(p.name, p.shape) ? 1 : 0;
  }
}

// Runs args.repeat verified refits in `mode`. Returns nullopt when a rank found a mismatch (the
// lowest such rank has reported it).
std::optional<ModeReport> refit_in_mode(const RefitArgs& args, const ProcessGroupPtr& world,
                                        const RefitInputs& in, const RefitTopology& topology,
                                        const std::map<std::string, std::vector<float>>& reference,
                                        RefitMode mode, std::int64_t& verified) {
  const int me = world->rank();
  const bool trains = me < topology.num_train_ranks;
  RefitEngine engine(world, in.params, topology, mode);
  const std::vector<const void*> addresses = engine.buffer_addresses();
  ModeReport report;
  report.mode = mode;
  for (int k = 0; k < args.repeat; ++k) {
    engine.fill_buffers(0xFF);  // stale contents cannot pass verification
    const RefitStats stats = engine.refit(trains ? in.views : std::map<std::string, TensorView>{});
    report.wire_bytes = stats.wire_bytes;
    report.elements = stats.elements;
    report.seconds.push_back(stats.seconds);
    report.stage_seconds = std::max(report.stage_seconds, stats.stage_seconds);
    std::string problem;
    if (engine.buffer_addresses() != addresses) {
      problem = "persistent buffer addresses changed";
    } else if (engine.is_inference_rank()) {
      const RefitVerification v =
          verify_refit(engine.weights(), reference, topology.tp, engine.tp_rank());
      verified += v.tensors_checked;
      problem = v.first_mismatch;
    }
    const int failing = first_failing_rank(*world, !problem.empty());
    if (failing == me) {
      std::fprintf(stderr,
                   "shardwise refit: mismatch on rank %d (tp rank %d), mode %s, refit %d: %s\n", me,
                   engine.tp_rank(), refit_mode_name(mode), k + 1, problem.c_str());
      std::fflush(stderr);
    }
    if (failing >= 0) return std::nullopt;
  }
  if (in.model) {
    std::optional<TpForwardReport> mine;
    if (engine.is_inference_rank()) {
      mine =
          check_tp_forward(engine.weights(), reference, *in.model, in.batch, *in.inference_group);
    }
    report.forward = report_to_rank0(*world, topology.first_inference_rank(), mine);
  }
  return report;
}

double gigabytes_per_second(const ModeReport& r) {
  return r.median() > 0 ? static_cast<double>(r.wire_bytes) / r.median() / 1e9 : 0.0;
}

void print_forward_line(const std::string& what, const TpForwardReport& f) {
  std::printf(
      "tp forward %-15s max |logit error| %.3e (relative %.3e, %.2f of its bound)  loss %.6f vs "
      "%.6f (difference %.3e, bound %.3e)  %s\n",
      what.c_str(), f.max_abs_logit_error, f.max_rel_logit_error, f.worst_logit_ratio, f.loss,
      f.reference_loss, f.loss_difference, f.loss_bound,
      f.within_bounds() ? "within bounds" : "OUT OF BOUNDS");
  std::fflush(stdout);
}

nlohmann::ordered_json forward_json(const TpForwardReport& f) {
  return {{"max_abs_logit_error", f.max_abs_logit_error},
          {"max_rel_logit_error", f.max_rel_logit_error},
          {"worst_logit_error_over_bound", f.worst_logit_ratio},
          {"loss", f.loss},
          {"reference_loss", f.reference_loss},
          {"loss_difference", f.loss_difference},
          {"loss_bound", f.loss_bound},
          {"within_bounds", f.within_bounds()}};
}

void print_refit_table(const std::vector<ModeReport>& reports, std::int64_t verified) {
  std::printf("%-15s %14s %12s %11s %11s %10s %10s\n", "mode", "wire bytes", "bytes/elem",
              "median ms", "best ms", "GB/s", "vs bf16");
  const double bf16_median = reports.front().median();
  for (const ModeReport& r : reports) {
    const double ms = r.median() * 1e3;
    std::printf(
        "%-15s %14lld %12.3f %11.3f %11.3f %10.3f %9.2fx\n", refit_mode_name(r.mode),
        static_cast<long long>(r.wire_bytes),
        r.elements ? static_cast<double>(r.wire_bytes) / static_cast<double>(r.elements) : 0.0, ms,
        r.best() * 1e3, gigabytes_per_second(r), r.median() > 0 ? bf16_median / r.median() : 0.0);
  }
  std::printf("verified %lld tensors, all bit-exact\n", static_cast<long long>(verified));
  for (const ModeReport& r : reports) {
    if (r.forward) print_forward_line(refit_mode_name(r.mode), *r.forward);
  }
  std::fflush(stdout);
}

void write_refit_json(const RefitArgs& args, int world_size, const RefitTopology& topology,
                      const RefitInputs& in, const std::vector<ModeReport>& reports,
                      std::int64_t verified, const std::optional<TpForwardReport>& exported) {
  nlohmann::ordered_json j;
  j["world_size"] = world_size;
  j["training_ranks"] = topology.num_train_ranks;
  j["tp"] = topology.tp;
  j["params"] = in.params.size();
  j["elements"] = in.total_elements;
  j["refits_per_mode"] = args.repeat;
  j["verified_tensors"] = verified;
  for (const ModeReport& r : reports) {
    nlohmann::ordered_json m;
    m["mode"] = refit_mode_name(r.mode);
    m["wire_bytes"] = r.wire_bytes;
    m["elements_delivered"] = r.elements;
    m["seconds"] = r.seconds;
    m["median_seconds"] = r.median();
    m["gigabytes_per_second"] = gigabytes_per_second(r);
    m["bf16_staging_seconds"] = r.stage_seconds;
    if (r.forward) m["tp_forward"] = forward_json(*r.forward);
    j["modes"].push_back(m);
  }
  if (exported) j["tp_export_forward"] = forward_json(*exported);
  write_file_atomic(args.json, j.dump(2) + "\n");
}

// Every rank must run with the same config and options: the transfer plan is built from them.
void check_refit_settings_agree(ProcessGroup& world, const RefitArgs& args,
                                const TrainingConfig* config) {
  // First: ranks that run different subcommands are told so, not that some option is missing.
  nlohmann::ordered_json settings = {{"subcommand", "refit"}};
  if (config) settings.update(to_json(*config));
  settings["--repeat"] = args.repeat;
  settings["--mxfp8"] = args.mxfp8;
  settings["--checkpoint"] = args.checkpoint;
  settings["--tp"] = args.tp;
  settings["--tp-export"] = args.tp_export;
  settings["--comm-timeout"] = args.comm_timeout;
  check_settings_agree(world, settings);
}

// Rank 0 prints the table (and writes --json); every rank returns 1 when a TP forward check
// fell outside its bounds, else 0.
int report_refit_results(const RefitArgs& args, ProcessGroup& world, const RefitTopology& topology,
                         const RefitInputs& in, const std::vector<ModeReport>& reports,
                         std::int64_t verified, const std::optional<TpForwardReport>& exported) {
  std::int64_t out_of_bounds = 0;
  if (world.rank() == 0) {
    print_refit_table(reports, verified);
    if (exported) print_forward_line(str_cat("export ", args.tp_export), *exported);
    if (!args.json.empty()) {
      write_refit_json(args, world.size(), topology, in, reports, verified, exported);
    }
    if (exported && !exported->within_bounds()) {
      std::fprintf(stderr, "shardwise refit: the TP forward of --tp-export is out of its bounds\n");
      out_of_bounds = 1;
    }
    for (const ModeReport& r : reports) {
      if (r.forward && !r.forward->within_bounds()) {
        std::fprintf(stderr, "shardwise refit: the TP forward of mode %s is out of its bounds\n",
                     refit_mode_name(r.mode));
        out_of_bounds = 1;
      }
    }
  }
  world.broadcast({&out_of_bounds, 1, DType::kInt64}, 0)->wait();
  return out_of_bounds != 0 ? 1 : 0;
}

int run_refit(const RefitArgs& args, const TrainingConfig* config) {
  // Every group below (training, inference, the trainer's own) is split from the world and
  // inherits its watchdog timeout.
  const ProcessGroupPtr world = init_mpi_world(ProcessGroupOptions{args.comm_timeout});
  check_refit_settings_agree(*world, args, config);
  const std::vector<CommandPath> report{{"--json", args.json, PathUse::kWriteFile}};
  check_rank0_outputs_clear_of_configs(*world, args.config, report);
  warn_of_outputs_only_rank0_writes(*world, report);
  const int size = world->size();
  const int me = world->rank();
  if (args.tp < 1 || size < args.tp + 1) {
    if (me == 0) {
      std::fprintf(stderr,
                   "shardwise: error: refit needs at least %d ranks (training ranks + %d "
                   "inference ranks, --tp %d), got %d\n",
                   std::max(args.tp, 1) + 1, args.tp, args.tp, size);
    }
    return 2;
  }
  const RefitTopology topology{size - args.tp, args.tp};
  const bool trains = me < topology.num_train_ranks;
  const ProcessGroupPtr train_group = split_group(world, trains ? 0 : -1, me, "refit-train");
  RefitInputs in;
  // Before any training: a --tp the model cannot take (heads % tp) fails at once, not after it.
  if (config != nullptr) prepare_forward_check(*config, args.tp, in);
  gather_refit_inputs(args, config, *world, train_group, trains, in);
  const bool infers = me >= topology.first_inference_rank() && me < topology.num_ranks();
  in.inference_group = split_group(world, infers ? 0 : -1, me, "refit-inference");
  if (me == 0) {
    std::printf(
        "refit: %zu params (%lld elements, %d MXFP8-eligible) from %s on ranks 0-%d -> "
        "TP=%d on ranks %d-%d, %d refit(s) per mode\n",
        in.params.size(), static_cast<long long>(in.total_elements), in.mxfp8_params,
        args.checkpoint.empty() ? "training" : args.checkpoint.c_str(),
        topology.num_train_ranks - 1, topology.tp, topology.first_inference_rank(),
        topology.num_ranks() - 1, args.repeat);
    std::fflush(stdout);
  }
  // The independent path for verification: whole fp32 params straight from rank 0.
  const auto reference = send_reference_weights(*world, in.params, topology, 0, in.views);

  std::vector<ModeReport> reports;
  std::int64_t verified = 0;
  for (RefitMode mode : modes_of(args.mxfp8)) {
    std::optional<ModeReport> report =
        refit_in_mode(args, world, in, topology, reference, mode, verified);
    if (!report) {
      world->barrier()->wait();
      return 1;
    }
    reports.push_back(std::move(*report));
  }
  world->all_reduce({&verified, 1, DType::kInt64}, ReduceOp::kSum)->wait();
  std::optional<TpForwardReport> exported;
  if (!args.tp_export.empty() && in.model) {
    std::optional<TpForwardReport> mine;
    if (infers) {
      const int tp_rank = me - topology.first_inference_rank();
      try {
        mine = check_tp_forward(read_tp_export_rank(args.tp_export, topology.tp, tp_rank),
                                reference, *in.model, in.batch, *in.inference_group);
      } catch (const FormatError& e) {
        throw FormatError(str_cat("--tp-export ", printable(args.tp_export), ": ", e.what()));
      }
    }
    exported = report_to_rank0(*world, topology.first_inference_rank(), mine);
  }
  return report_refit_results(args, *world, topology, in, reports, verified, exported);
}

const bool registered = register_command(
    "refit",
    "Refit trained weights into a TP inference group (bf16 / MXFP8), verified bit-exact "
    "(run under mpirun)",
    [](CLI::App& app) {
      auto args = std::make_shared<RefitArgs>();
      app.add_option("--config", args->config, "Training config (YAML) for the training ranks")
          ->check(non_empty_path());
      app.add_option("overrides", args->overrides, "Config overrides: section.key=value ...");
      app.add_option("--repeat", args->repeat, "Refits per mode into the same buffers (default 3)")
          ->check(integer_in(1, 1000000));
      app.add_option("--mxfp8", args->mxfp8,
                     "Modes: all (default: bf16, receiver, send), none (bf16), receiver, send")
          ->check(non_empty_value());
      app.add_option("--checkpoint", args->checkpoint,
                     "Take the weights from DIR/model.safetensors instead of training")
          ->check(non_empty_path());
      app.add_option("--tp", args->tp, "Inference TP size: the last N ranks (default 2)")
          ->check(integer_in(1, kMaxParallelSize));
      app.add_option("--json", args->json, "Write the measurements as JSON (rank 0)")
          ->check(non_empty_path());
      app.add_option("--tp-export", args->tp_export,
                     "Also run the TP forward on a `reshard --tp N` output DIR2 (needs "
                     "--checkpoint, the weights it came from, and --config)")
          ->check(non_empty_path());
      add_comm_timeout_option(app, args->comm_timeout);
      return [args] {
        // Everything checkable without MPI fails fast, with exit 2 on every rank.
        SW_REQUIRE(!args->config.empty() || !args->checkpoint.empty(), InvalidArgument,
                   "refit: --config (train first) or --checkpoint DIR is required");
        SW_REQUIRE(args->repeat >= 1, InvalidArgument, "--repeat: must be >= 1, got ",
                   args->repeat);
        // Overrides edit --config; with --checkpoint alone they would be dropped in silence.
        SW_REQUIRE(args->overrides.empty() || !args->config.empty(), InvalidArgument,
                   "refit: override '", printable(args->overrides.front()),
                   "' needs --config (overrides edit the training config; the --checkpoint "
                   "weights are used as they are)");
        modes_of(args->mxfp8);
        validate_comm_timeout(args->comm_timeout, "--comm-timeout");
        SW_REQUIRE(args->tp_export.empty() || (!args->checkpoint.empty() && !args->config.empty()),
                   InvalidArgument,
                   "--tp-export: give --checkpoint DIR (the weights the export was cut from) and "
                   "--config (the model and data)");
        std::unique_ptr<TrainingConfig> config;
        if (!args->config.empty()) {
          // Reported once per job (rank 0); every rank exits 2. With --checkpoint it only
          // describes the model and data (for the TP forward), nothing is trained.
          auto loaded = load_config_once_per_job(args->config, args->overrides);
          if (!loaded) return 2;
          config = std::make_unique<TrainingConfig>(std::move(*loaded));
        }
        if (!args->checkpoint.empty()) {
          args->weights_file = checkpoint_weights_file(args->checkpoint, std::nullopt).string();
        }
        // The measurements file is written last: find out now if that cannot work, or would
        // overwrite an input.
        if (!check_once_per_job([&] {
              check_command_paths({{"--config", args->config, PathUse::kReadFile},
                                   {"--checkpoint", args->weights_file, PathUse::kReadFile},
                                   {"--tp-export", args->tp_export, PathUse::kReadTree},
                                   {"--json", args->json, PathUse::kWriteFile}});
            })) {
          return 2;
        }
        return run_rank_main([&] { return run_refit(*args, config.get()); });
      };
    });

}  // namespace
}  // namespace shardwise::cli
