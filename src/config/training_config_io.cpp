// Loading TrainingConfig from YAML (with "section.key=value" overrides) and printing it back. One
// field table per section drives key validation, reading and printing, so the three never drift.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "shardwise/config/training_config.hpp"
#include "shardwise/core/closest_name.hpp"
#include "shardwise/core/input_file.hpp"
#include "shardwise/core/message_text.hpp"
#include "yaml_fields.hpp"

namespace shardwise {
namespace {

using config_detail::field;
using config_detail::FieldSpec;
using config_detail::Json;

const std::vector<FieldSpec<ModelConfig>>& model_fields() {
  using C = ModelConfig;
  static const std::vector<FieldSpec<C>> fields = {
      field("arch", &C::arch),
      field("layers", &C::layers),
      field("hidden", &C::hidden),
      field("heads", &C::heads),
      field("ffn", &C::ffn),
      field("vocab", &C::vocab),
      field("seq_len", &C::seq_len),
      field("position", &C::position),
      field("tied_embeddings", &C::tied_embeddings),
      field("dtype", &C::dtype),
      field("init_std", &C::init_std),
      field("seed", &C::seed),
  };
  return fields;
}

const std::vector<FieldSpec<DataConfig>>& data_fields() {
  using C = DataConfig;
  static const std::vector<FieldSpec<C>> fields = {
      field("source", &C::source),     field("task", &C::task),
      field("digits", &C::digits),     field("path", &C::path),
      field("val_path", &C::val_path), field("eval_samples", &C::eval_samples),
  };
  return fields;
}

const std::vector<FieldSpec<OptimizerConfig>>& optimizer_fields() {
  using C = OptimizerConfig;
  static const std::vector<FieldSpec<C>> fields = {
      field("kind", &C::kind),
      field("lr", &C::lr),
      field("min_lr", &C::min_lr),
      field("muon_lr", &C::muon_lr),
      field("weight_decay", &C::weight_decay),
      field("adam_beta1", &C::adam_beta1),
      field("adam_beta2", &C::adam_beta2),
      field("adam_eps", &C::adam_eps),
      field("muon_momentum", &C::muon_momentum),
      field("muon_nesterov", &C::muon_nesterov),
      field("muon_ns_steps", &C::muon_ns_steps),
      field("muon_coefficient_set", &C::muon_coefficient_set),
      field("muon_ns_algorithm", &C::muon_ns_algorithm),
      field("muon_scale_mode", &C::muon_scale_mode),
      field("muon_extra_scale_factor", &C::muon_extra_scale_factor),
      field("muon_split_qkv", &C::muon_split_qkv),
      field("muon_matmul_precision", &C::muon_matmul_precision),
      field("clip_grad", &C::clip_grad),
      field("overlap_param_gather_with_optimizer_step",
            &C::overlap_param_gather_with_optimizer_step),
  };
  return fields;
}

const std::vector<FieldSpec<DistributedDataParallelConfig>>& ddp_fields() {
  using C = DistributedDataParallelConfig;
  static const std::vector<FieldSpec<C>> fields = {
      field("grad_reduce_in_fp32", &C::grad_reduce_in_fp32),
      field("overlap_grad_reduce", &C::overlap_grad_reduce),
      field("overlap_param_gather", &C::overlap_param_gather),
      field("align_param_gather", &C::align_param_gather),
      field("use_distributed_optimizer", &C::use_distributed_optimizer),
      field("bucket_size", &C::bucket_size),
      field("average_in_collective", &C::average_in_collective),
      field("pad_buckets_for_high_nccl_busbw", &C::pad_buckets_for_high_nccl_busbw),
      field("per_token_loss", &C::per_token_loss),
      field("use_legacy_layer_wise_sync", &C::use_legacy_param_sync),
      field("num_buckets_per_group", &C::num_buckets_per_group),
      field("layer_wise_shard_group_size", &C::layer_wise_shard_group_size),
      field("layer_wise_cuts", &C::layer_wise_cuts),
      field("reproducible_reduction", &C::reproducible_reduction),
      field("symmetric_buffers", &C::symmetric_buffers),
  };
  return fields;
}

const std::vector<FieldSpec<TrainLoopConfig>>& training_fields() {
  using C = TrainLoopConfig;
  static const std::vector<FieldSpec<C>> fields = {
      field("steps", &C::steps),
      field("micro_batch_size", &C::micro_batch_size),
      field("grad_accumulation", &C::grad_accumulation),
      field("warmup_steps", &C::warmup_steps),
      field("lr_schedule", &C::lr_schedule),
      field("eval_interval", &C::eval_interval),
      field("seed", &C::seed),
      field("skip_nonfinite_steps", &C::skip_nonfinite_steps),
      field("device", &C::device),
      field("precision", &C::precision),
  };
  return fields;
}

const std::vector<FieldSpec<LoggingConfig>>& logging_fields() {
  using C = LoggingConfig;
  static const std::vector<FieldSpec<C>> fields = {
      field("log_interval", &C::log_interval),
      field("jsonl_path", &C::jsonl_path),
      field("plot_path", &C::plot_path),
      field("progress", &C::progress),
  };
  return fields;
}

const std::vector<FieldSpec<CommOverlapSettings>>& comm_overlap_fields() {
  using C = CommOverlapSettings;
  static const std::vector<FieldSpec<C>> fields = {
      field("tp_comm_overlap", &C::tp_comm_overlap),
      field("tp_comm_overlap_cfg", &C::tp_comm_overlap_cfg),
      field("tp_comm_bootstrap_backend", &C::tp_comm_bootstrap_backend),
      field("overlap_p2p_comm", &C::overlap_p2p_comm),
      field("batch_p2p_comm", &C::batch_p2p_comm),
      field("overlap_grad_reduce", &C::overlap_grad_reduce),
      field("overlap_param_gather", &C::overlap_param_gather),
      field("overlap_param_gather_with_optimizer_step",
            &C::overlap_param_gather_with_optimizer_step),
      field("align_param_gather", &C::align_param_gather),
      field("bucket_size", &C::bucket_size),
      field("defer_embedding_wgrad_compute", &C::defer_embedding_wgrad_compute),
      field("wgrad_deferral_limit", &C::wgrad_deferral_limit),
      field("data_parallel_size", &C::data_parallel_size),
  };
  return fields;
}

const std::vector<FieldSpec<ParallelConfig>>& parallel_fields() {
  using C = ParallelConfig;
  static const std::vector<FieldSpec<C>> fields = {
      field("tp", &C::tp), field("pp", &C::pp), field("vp", &C::vp),
      field("cp", &C::cp), field("ep", &C::ep), field("sequence_parallel", &C::sequence_parallel),
  };
  return fields;
}

// A config is a small regular file: a directory opens fine as a stream and reads as empty (which
// would train with every default), a FIFO blocks the reader, /dev/zero never ends.
std::string read_config_text(const std::filesystem::path& path) {
  return read_input_file(path, "config file", kConfigFileMaxBytes);
}

constexpr std::string_view kSections[] = {"model",    "data",    "optimizer",    "ddp",
                                          "training", "logging", "comm_overlap", "parallel"};

// An override is one command-line word, but its value is read as YAML: a " #" starts a comment
// and a line break folds into a space, so `logging.jsonl_path=/tmp/out #1.jsonl` would name
// /tmp/out. Such a value is refused instead of taken as some other path or text.
void check_value_reads_as_written(const YAML::Node& value, const std::string& raw,
                                  const std::string& where) {
  SW_REQUIRE(raw.find_first_of("\r\n") == std::string::npos, ConfigError, where,
             ": the value holds a line break (YAML would fold it into a space)");
  if (!value.IsScalar() || value.Tag() != "?") return;  // collections, quoted text
  const auto first = raw.find_first_not_of(" \t");
  const auto last = raw.find_last_not_of(" \t");
  const std::string trimmed = first == std::string::npos ? "" : raw.substr(first, last - first + 1);
  // Name the YAML syntax that changed it: a comment, or else an anchor (&a) or tag (!t) prefix.
  const bool comment = trimmed.find(" #") != std::string::npos;
  SW_REQUIRE(value.Scalar() == trimmed, ConfigError, where, ": the value reads as '",
             printable(value.Scalar(), 200), "' in YAML (",
             comment ? "a ' #' starts a comment" : "a leading '&' or '!' is YAML syntax",
             "); quote it to keep it whole: key='\"...\"'");
}

// Sets root[a][b]...[z] = value for the dotted path, creating mappings on the way.
void apply_override(YAML::Node& root, const std::string& text) {
  const auto eq = text.find('=');
  SW_REQUIRE(eq != std::string::npos && eq > 0, ConfigError, "override '", printable(text, 200),
             "': expected section.key=value");
  const std::string dotted = text.substr(0, eq);
  std::vector<std::string> parts;
  std::stringstream split(dotted);
  for (std::string part; std::getline(split, part, '.');) {
    SW_REQUIRE(!part.empty(), ConfigError, "override '", printable(text, 200), "': empty key in '",
               printable(dotted, 200), "'");
    parts.push_back(part);
  }
  SW_REQUIRE(parts.size() >= 2 && dotted.back() != '.', ConfigError, "override '",
             printable(text, 200), "': expected section.key=value");
  const std::string where = str_cat("override '", printable(text, 200), "'");
  const std::string raw = text.substr(eq + 1);
  const YAML::Node value = config_detail::load_yaml_document(raw, where, "value is not valid YAML");
  check_value_reads_as_written(value, raw, where);
  config_detail::check_no_duplicate_keys(value, where);
  YAML::Node cursor;
  cursor.reset(root);
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = cursor[parts[i]];
    if (!next || next.IsNull()) {
      cursor[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next.reset(cursor[parts[i]]);
    }
    if (!next.IsMap()) {
      std::string prefix = parts[0];
      for (std::size_t j = 1; j <= i; ++j) prefix += "." + parts[j];
      throw ConfigError(str_cat("override '", printable(text, 200), "': ", printable(prefix, 200),
                                " is not a mapping"));
    }
    cursor.reset(next);
  }
  cursor[parts.back()] = value;
}

TrainingConfig from_node(YAML::Node root, const std::vector<std::string>& overrides) {
  if (!root || root.IsNull()) root.reset(YAML::Node(YAML::NodeType::Map));
  if (!root.IsMap()) config_detail::type_error("config", "a mapping of sections", root);
  for (const auto& text : overrides) apply_override(root, text);
  const std::vector<std::string_view> sections(std::begin(kSections), std::end(kSections));
  config_detail::check_keys(root, "config", sections, "section");

  TrainingConfig cfg;
  using config_detail::read_fields;
  read_fields<ModelConfig>(root["model"], "model", model_fields(), cfg.model);
  read_fields<DataConfig>(root["data"], "data", data_fields(), cfg.data);
  read_fields<OptimizerConfig>(root["optimizer"], "optimizer", optimizer_fields(), cfg.optimizer);
  read_fields<DistributedDataParallelConfig>(root["ddp"], "ddp", ddp_fields(), cfg.ddp);
  read_fields<TrainLoopConfig>(root["training"], "training", training_fields(), cfg.training);
  read_fields<LoggingConfig>(root["logging"], "logging", logging_fields(), cfg.logging);
  read_fields<CommOverlapSettings>(root["comm_overlap"], "comm_overlap", comm_overlap_fields(),
                                   cfg.comm_overlap);
  read_fields<ParallelConfig>(root["parallel"], "parallel", parallel_fields(), cfg.parallel);

  // The optimizer kind decides these two unless the file says otherwise (then validate() checks
  // that it agrees).
  const YAML::Node ddp = root["ddp"];
  const bool ddp_is_map = ddp && ddp.IsMap();
  if (!ddp_is_map || !ddp["use_distributed_optimizer"]) {
    cfg.ddp.use_distributed_optimizer = cfg.optimizer.use_distributed_optimizer();
  }
  if (!ddp_is_map || !ddp["use_legacy_layer_wise_sync"]) {
    cfg.ddp.use_legacy_param_sync = cfg.optimizer.kind == OptimizerKind::kLegacyLayerWise;
  }
  validate(cfg);
  return cfg;
}

}  // namespace

std::span<const std::string_view> training_config_sections() { return kSections; }

std::vector<std::string_view> training_config_keys(std::string_view section) {
  using config_detail::keys_of;
  if (section == "model") return keys_of<ModelConfig>(model_fields());
  if (section == "data") return keys_of<DataConfig>(data_fields());
  if (section == "optimizer") return keys_of<OptimizerConfig>(optimizer_fields());
  if (section == "ddp") return keys_of<DistributedDataParallelConfig>(ddp_fields());
  if (section == "training") return keys_of<TrainLoopConfig>(training_fields());
  if (section == "logging") return keys_of<LoggingConfig>(logging_fields());
  if (section == "comm_overlap") return keys_of<CommOverlapSettings>(comm_overlap_fields());
  if (section == "parallel") return keys_of<ParallelConfig>(parallel_fields());
  throw ConfigError(str_cat("unknown section '", section, "' (valid sections: ",
                            config_detail::join_keys({std::begin(kSections), std::end(kSections)}),
                            ")"));
}

namespace {

// An override names a known section and, for section.key=value, a key of that section. Checked
// before the file is read so a typo is blamed on the override, with the closest valid name.
void check_override_key(const std::string& text) {
  const auto eq = text.find('=');
  SW_REQUIRE(eq != std::string::npos && eq > 0, ConfigError, "override '", printable(text, 200),
             "': expected section.key=value");
  const std::string dotted = text.substr(0, eq);
  const auto dot = dotted.find('.');
  SW_REQUIRE(dot != std::string::npos && dot > 0, ConfigError, "override '", printable(text, 200),
             "': expected section.key=value");
  const std::string section = dotted.substr(0, dot);
  const std::span<const std::string_view> sections = training_config_sections();
  SW_REQUIRE(std::find(sections.begin(), sections.end(), section) != sections.end(), ConfigError,
             "override '", printable(text, 200), "': unknown section '", printable(section), "'",
             did_you_mean(section, sections),
             " (valid sections: ", config_detail::join_keys({sections.begin(), sections.end()}),
             ")");
  const std::string key = dotted.substr(dot + 1);
  if (key.find('.') != std::string::npos) return;  // nested keys are checked with the file
  const std::vector<std::string_view> keys = training_config_keys(section);
  SW_REQUIRE(std::find(keys.begin(), keys.end(), key) != keys.end(), ConfigError, "override '",
             printable(text, 200), "': ", section, " has no key '", printable(key), "'",
             did_you_mean(key, keys), " (valid keys: ", config_detail::join_keys(keys), ")");
}

}  // namespace

TrainingConfig parse_training_config(std::string_view yaml_text,
                                     const std::vector<std::string>& overrides,
                                     std::string_view source) {
  for (const auto& text : overrides) check_override_key(text);
  try {
    const YAML::Node root = config_detail::load_yaml_document(std::string(yaml_text), "");
    config_detail::check_no_duplicate_keys(root, "");
    return from_node(root, overrides);
  } catch (const ConfigError& e) {
    // The value at fault may come from the command line rather than the file: say both.
    throw ConfigError(
        str_cat(source, overrides.empty() ? "" : " with its overrides", ": ", e.what()));
  }
}

TrainingConfig load_training_config(const std::filesystem::path& path,
                                    const std::vector<std::string>& overrides) {
  return parse_training_config(read_config_text(path), overrides, path.string());
}

nlohmann::ordered_json to_json(const TrainingConfig& config) {
  using config_detail::write_fields;
  Json out = Json::object();
  out["model"] = write_fields<ModelConfig>(config.model, model_fields());
  out["data"] = write_fields<DataConfig>(config.data, data_fields());
  out["optimizer"] = write_fields<OptimizerConfig>(config.optimizer, optimizer_fields());
  out["ddp"] = write_fields<DistributedDataParallelConfig>(config.ddp, ddp_fields());
  out["training"] = write_fields<TrainLoopConfig>(config.training, training_fields());
  out["logging"] = write_fields<LoggingConfig>(config.logging, logging_fields());
  out["comm_overlap"] =
      write_fields<CommOverlapSettings>(config.comm_overlap, comm_overlap_fields());
  out["parallel"] = write_fields<ParallelConfig>(config.parallel, parallel_fields());
  return out;
}

bool same_ddp_settings(const DistributedDataParallelConfig& a,
                       const DistributedDataParallelConfig& b) {
  for (const auto& f : ddp_fields()) {
    if (f.write(a) != f.write(b)) return false;
  }
  return true;
}

bool TrainingConfig::operator==(const TrainingConfig& other) const {
  return model == other.model && data == other.data && optimizer == other.optimizer &&
         same_ddp_settings(ddp, other.ddp) && training == other.training &&
         logging == other.logging && comm_overlap == other.comm_overlap &&
         parallel == other.parallel;
}

nlohmann::ordered_json to_json(const TransformerLayerTPOverlapCfg& cfg) {
  return config_detail::encode(cfg);
}

std::string json_to_yaml(const nlohmann::ordered_json& value) {
  return config_detail::json_to_yaml(value);
}

std::string to_yaml(const TrainingConfig& config) {
  return config_detail::json_to_yaml(to_json(config));
}

}  // namespace shardwise
