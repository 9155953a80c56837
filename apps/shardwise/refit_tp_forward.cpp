#include "refit_tp_forward.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/core/input_file.hpp"
#include "shardwise/core/json_text.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/core/mxfp8.hpp"
#include "shardwise/model/gpt_model.hpp"
#include "shardwise/optim/tensor_parallel_matrix.hpp"
#include "shardwise/reshard/tp_export.hpp"

namespace shardwise::cli {
namespace {

// fp32 rounding of the TP forward against the tp = 1 one (summation order only).
constexpr double kFp32Slack = 1e-5;
// The bounds are first order in the weight perturbation; the factor covers the second-order rest.
constexpr double kFirstOrderFactor = 2.0;

using Values = std::map<std::string, std::vector<float>>;

// The local tensor as the inference side computes with it: bf16, MXFP8 dequantized to bf16.
std::vector<float> decode(const InferenceTensor& t) {
  std::vector<float> out;
  if (t.mxfp8) {
    out = dequantize_mxfp8_to_float(t.quantized);
    for (float& x : out) x = round_to_bf16(x);
  } else {
    out.resize(t.bf16.size());
    bf16_to_float_n(t.bf16.data(), out.data(), static_cast<std::int64_t>(out.size()));
  }
  return out;
}

// The full value of a param from every inference rank's slice (Megatron's TP rules).
std::vector<float> gather_full(const InferenceTensor& t, ProcessGroup& group) {
  std::vector<float> local = decode(t);
  if (t.rule.kind == TpKind::kReplicated) return local;
  const std::int64_t rows = t.local_shape.at(0);
  const std::int64_t cols = t.local_shape.size() > 1 ? t.local_shape[1] : 1;
  const optim::TensorParallelSplit split{&group, t.rule.partition_dim, t.rule.stride};
  return optim::gather_full_matrix(split, local.data(), rows, cols);
}

// How far a delivered element may sit from the checkpoint's: bf16 rounding (also of an fp16 or
// fp32 export, which the inference side rounds to bf16) is within 2^-9 relative, twice that after
// a double rounding, plus fp16's subnormal step; an MXFP8 element is within 1/8 of its block's
// largest magnitude (the floor rule clamps scaled values in [448, 512) to 448), and a block's is at
// most its row's.
double element_tolerance(bool mxfp8, float reference, float row_amax) {
  const double rounding = std::ldexp(std::fabs(static_cast<double>(reference)), -8) + 0x1p-24;
  return mxfp8 ? rounding + row_amax / 8.0 : rounding;
}

// The weights a refit or an export delivered must be the checkpoint's up to their format's
// rounding. The forward bounds grow with the weight difference, so weights from another
// checkpoint (or scaled, or corrupted) would pass them; this names the first element that is off.
void require_rounded_reference(const InferenceTensor& t, const std::vector<float>& delivered,
                               const std::vector<float>& reference) {
  SW_REQUIRE(delivered.size() == reference.size(), ShapeError, "tensor '", printable(t.name),
             "' has ", delivered.size(), " elements where the checkpoint's has ", reference.size());
  const std::size_t cols =
      t.global_shape.size() > 1 ? static_cast<std::size_t>(t.global_shape.back()) : 1;
  for (std::size_t row = 0; row * cols < reference.size(); ++row) {
    const std::size_t begin = row * cols, end = std::min(begin + cols, reference.size());
    float row_amax = 0;  // only MXFP8's tolerance uses it
    for (std::size_t k = begin; t.mxfp8 && k < end; ++k)
      row_amax = std::max(row_amax, std::fabs(reference[k]));
    for (std::size_t k = begin; k < end; ++k) {
      const double off = std::fabs(static_cast<double>(delivered[k]) - reference[k]);
      if (off <= element_tolerance(t.mxfp8, reference[k], row_amax)) continue;  // NaN fails
      throw FormatError(
          str_cat("tensor '", printable(t.name), "' is not the checkpoint's weights rounded to ",
                  t.mxfp8 ? "MXFP8" : "bf16", ": element ", k, " is ", delivered[k],
                  " where the checkpoint has ", reference[k],
                  " (more than its rounding allows); were these weights cut from another "
                  "checkpoint?"));
    }
  }
}

// A model bound to storage it owns (values from `full`, by param name; grads zeroed).
struct BoundModel {
  std::unique_ptr<GptModel<float>> model;
  std::vector<std::vector<float>> values, grads;
  BoundModel(const GptConfig& config, const TensorParallelOptions& tp, const Values& full) {
    model = std::make_unique<GptModel<float>>(config, tp);
    const ParamList whole = gpt_param_list(config, 1);
    std::vector<float*> v, g;
    for (std::size_t i = 0; i < model->params().size(); ++i) {
      const ParamInfo& p = model->params()[i];
      const auto it = full.find(p.name);
      SW_REQUIRE(it != full.end(), InvalidArgument, "refit: the refitted weights have no param '",
                 p.name, "' of the model the config describes");
      SW_REQUIRE(static_cast<std::int64_t>(it->second.size()) == whole[i].numel(), ShapeError,
                 "refit: param '", p.name, "' has ", it->second.size(),
                 " elements, the config's model ", whole[i].numel());
      values.emplace_back(static_cast<std::size_t>(p.numel()));
      grads.emplace_back(static_cast<std::size_t>(p.numel()), 0.0f);
      slice_tp_shard(whole[i], p, tp.size(), tp.rank(), it->second.data(), values.back().data());
      v.push_back(values.back().data());
      g.push_back(grads.back().data());
    }
    model->bind(std::move(v), std::move(g));
  }
  // Sum over params of |grad| . |delta| (the first-order bound), after a fresh backward.
  double weighted_perturbation(const Values& delta) {
    double total = 0;
    for (std::size_t i = 0; i < grads.size(); ++i) {
      const std::vector<float>& d = delta.at(model->params()[i].name);
      for (std::size_t k = 0; k < d.size(); ++k) total += std::fabs(grads[i][k] * d[k]);
    }
    return total;
  }
  void zero_grads() {
    for (auto& g : grads) std::fill(g.begin(), g.end(), 0.0f);
  }
};

std::vector<double> log_probabilities(GptModel<float>& model, int batch, int seq, int vocab) {
  std::vector<double> out;
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < seq; ++t) {
      const auto p = model.probabilities(b, t);
      for (int c = 0; c < vocab; ++c) out.push_back(std::log(std::max(p[c], FLT_MIN)));
    }
  }
  return out;
}

}  // namespace

TpForwardReport check_tp_forward(const std::vector<InferenceTensor>& weights,
                                 const Values& reference, const GptConfig& config,
                                 const HeldOutBatch& batch, ProcessGroup& inference_group) {
  Values delivered, delta;
  for (const InferenceTensor& t : weights) {
    delivered[t.name] = gather_full(t, inference_group);
    const auto found = reference.find(t.name);
    SW_REQUIRE(found != reference.end(), FormatError, "tensor '", printable(t.name),
               "' is not a param of the checkpoint's model");
    const std::vector<float>& ref = found->second;
    require_rounded_reference(t, delivered[t.name], ref);
    std::vector<float>& d = delta[t.name];
    for (std::size_t k = 0; k < ref.size(); ++k) d.push_back(delivered[t.name][k] - ref[k]);
  }
  const int vocab = config.vocab_size;
  TpForwardReport r;
  TensorParallelOptions options;
  options.group = &inference_group;
  BoundModel tp(config, options, delivered);
  r.loss = tp.model->forward(batch.tokens.data(), batch.targets.data(), batch.batch, batch.seq);
  const std::vector<double> got = log_probabilities(*tp.model, batch.batch, batch.seq, vocab);

  BoundModel ref(config, TensorParallelOptions{}, reference);
  r.reference_loss =
      ref.model->forward(batch.tokens.data(), batch.targets.data(), batch.batch, batch.seq);
  const std::vector<double> want = log_probabilities(*ref.model, batch.batch, batch.seq, vocab);
  ref.model->backward(1.0, [](ParamId) {});
  r.loss_difference = r.loss - r.reference_loss;
  r.loss_bound = kFirstOrderFactor * ref.weighted_perturbation(delta) +
                 kFp32Slack * std::fabs(r.reference_loss);

  double max_ref = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    r.max_abs_logit_error = std::max(r.max_abs_logit_error, std::fabs(got[i] - want[i]));
    max_ref = std::max(max_ref, std::fabs(want[i]));
  }
  // The bound of one output (sequence b, position t, token c) needs the gradient of log p_c at
  // (b, t): a backward of the loss with that one target counted. One backward each, so it is
  // checked on the outputs that decide the loss and the prediction: at every counted position
  // the target token and the reference's most likely token.
  std::vector<std::int32_t> one_target(static_cast<std::size_t>(batch.seq));
  for (int b = 0; b < batch.batch; ++b) {
    const std::size_t row = static_cast<std::size_t>(b) * batch.seq;
    for (int t = 0; t < batch.seq; ++t) {
      const std::int32_t target = batch.targets[row + t];
      if (target < 0) continue;
      const std::size_t at = (row + t) * vocab;
      const auto top = static_cast<std::int32_t>(
          std::max_element(want.begin() + at, want.begin() + at + vocab) - want.begin() - at);
      for (std::int32_t c : {target, top}) {
        std::fill(one_target.begin(), one_target.end(), -1);
        one_target[static_cast<std::size_t>(t)] = c;
        ref.zero_grads();
        ref.model->forward(batch.tokens.data() + row, one_target.data(), 1, batch.seq);
        ref.model->backward(1.0, [](ParamId) {});
        const double bound = kFirstOrderFactor * ref.weighted_perturbation(delta) + kFp32Slack;
        r.worst_logit_ratio =
            std::max(r.worst_logit_ratio, std::fabs(got[at + c] - want[at + c]) / bound);
      }
    }
  }
  r.max_rel_logit_error = max_ref > 0 ? r.max_abs_logit_error / max_ref : 0;
  return r;
}

namespace {

TpRule rule_from(const nlohmann::json& entry) {
  const auto kind = entry.at("rule").get<std::string>();
  TpRule rule;
  rule.kind = kind == "column" ? TpKind::kColumnParallel
              : kind == "row"  ? TpKind::kRowParallel
                               : TpKind::kReplicated;
  rule.partition_dim = std::max(0, entry.at("partition_dim").get<int>());
  rule.stride = entry.at("stride").get<int>();
  return rule;
}

std::vector<std::uint8_t> bytes_of(const SafetensorsFile& file, const std::string& name) {
  const SafetensorsTensorView t = file.tensor(name);
  const auto* first = reinterpret_cast<const std::uint8_t*>(t.data);
  return {first, first + t.numel() * static_cast<std::int64_t>(dtype_size(t.dtype()))};
}

// The tensors the "tensors" metadata lists, read from `file` in its order.
void read_tp_export_tensors(const SafetensorsFile& file, const nlohmann::json& tensors,
                            std::vector<InferenceTensor>& out) {
  for (const auto& [name, entry] : tensors.items()) {
    InferenceTensor t;
    t.name = name;
    t.global_shape = entry.at("global_shape").get<std::vector<std::int64_t>>();
    t.local_shape = entry.at("local_shape").get<std::vector<std::int64_t>>();
    t.rule = rule_from(entry);
    t.mxfp8 = entry.at("format") == "mxfp8";
    if (t.mxfp8) {
      t.quantized.rows = t.local_shape.at(0);
      t.quantized.cols = t.local_shape.at(1);
      t.quantized.data = bytes_of(file, name);
      t.quantized.scale = bytes_of(file, entry.at("scale_tensor").get<std::string>());
    } else {
      const SafetensorsTensorView v = file.tensor(name);
      std::vector<float> values(static_cast<std::size_t>(v.numel()));
      convert_floats(TensorView{const_cast<std::byte*>(v.data), v.numel(), v.dtype()},
                     TensorView{values.data(), v.numel(), DType::kFloat32}, name);
      for (float x : values) t.bf16.push_back(float_to_bf16(x));
    }
    out.push_back(std::move(t));
  }
}

// The per-tensor table a big export keeps next to the rank's file: a plain name in its directory.
std::string tensors_file_text(const std::filesystem::path& path,
                              const std::map<std::string, std::string>& meta) {
  const std::string& name = meta.at(kTpExportTensorsFileKey);
  SW_REQUIRE(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
             FormatError, "'", path.string(), "': ", kTpExportTensorsFileKey,
             " must name a file next to it, got '", printable(name), "'");
  return read_input_file(path.parent_path() / name,
                         str_cat("tensor table of '", path.string(), "'"), kNoSizeLimit);
}

}  // namespace

std::vector<InferenceTensor> read_tp_export_rank(const std::filesystem::path& dir, int tp,
                                                 int tp_rank) {
  const std::filesystem::path path = dir / tp_export_file_name(tp_rank, tp);
  const SafetensorsFile file = SafetensorsFile::open(path);
  const auto& meta = file.metadata();
  SW_REQUIRE(meta.contains("tp_size") && meta.at("tp_size") == std::to_string(tp) &&
                 (meta.contains("tensors") || meta.contains(kTpExportTensorsFileKey)),
             FormatError, "'", path.string(), "' is not a tp=", tp,
             " export of `shardwise reshard` (no matching tp_size / tensors metadata)");
  std::vector<InferenceTensor> out;
  const nlohmann::json tensors =
      parse_json_text(meta.contains("tensors") ? meta.at("tensors") : tensors_file_text(path, meta),
                      str_cat("'", path.string(), "': the tensor table"));
  // A field missing or of the wrong type is damage to the file, not a bug here.
  try {
    read_tp_export_tensors(file, tensors, out);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(
        str_cat("'", path.string(), "': metadata \"tensors\" is malformed: ", json_error_text(e)));
  }
  return out;
}

}  // namespace shardwise::cli
