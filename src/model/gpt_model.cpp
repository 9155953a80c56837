#include "shardwise/model/gpt_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "shardwise/core/error.hpp"
#include "shardwise/model/dense_kernels.hpp"
#include "shardwise/model/param_init.hpp"

namespace shardwise {

namespace {

// Ids of one block's parameters in the forward-order list.
struct BlockIds {
  ParamId ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
};

constexpr double kLayerNormEps = 1e-5;

}  // namespace

template <typename Scalar>
struct GptModel<Scalar>::Activations {
  int batch = 0, seq = 0;
  std::vector<std::int32_t> tokens, targets;
  // Per block: inputs and intermediates kept for backward.
  struct Block {
    std::vector<Scalar> x_in, ln1_out, ln1_mean, ln1_rstd, qkv, probs, attn_out, x_mid, ln2_out,
        ln2_mean, ln2_rstd, fc1_out, gelu_out;
  };
  std::vector<Block> blocks;
  std::vector<Scalar> x_final, lnf_out, lnf_mean, lnf_rstd, logits;  // logits -> softmax probs
  std::int64_t counted = 0;
  std::vector<BlockIds> ids;
  ParamId wte = 0, wpe = 0, lnf_w = 0, lnf_b = 0, head = 0;
  bool has_wpe = false;
};

template <typename Scalar>
GptModel<Scalar>::GptModel(const GptConfig& config)
    : config_(config), acts_(std::make_unique<Activations>()) {
  config_.validate();
  register_params();
}

template <typename Scalar>
GptModel<Scalar>::~GptModel() = default;

template <typename Scalar>
void GptModel<Scalar>::register_params() {
  const std::int64_t v = config_.vocab_size, h = config_.hidden, f = config_.ffn_hidden;
  auto add = [&](std::string name, std::vector<std::int64_t> shape) -> ParamId {
    ParamInfo p;
    p.name = std::move(name);
    p.shape = std::move(shape);
    p.dtype = DType::kFloat32;  // the CPU model computes and stores fp32
    params_.push_back(std::move(p));
    return params_.size() - 1;
  };
  Activations& a = *acts_;
  a.wte = add("embedding.word_embeddings.weight", {v, h});
  params_[a.wte].embedding_or_output = true;
  params_[a.wte].shared_embedding = config_.tied_embeddings;
  a.has_wpe = !config_.rope;
  if (a.has_wpe) {
    a.wpe = add("embedding.position_embeddings.weight", {config_.seq_len, h});
    params_[a.wpe].embedding_or_output = true;
    params_[a.wpe].use_muon = false;
  }
  for (int l = 0; l < config_.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    BlockIds b{};
    b.ln1_w = add(p + "input_layernorm.weight", {h});
    b.ln1_b = add(p + "input_layernorm.bias", {h});
    b.qkv_w = add(p + "attention.qkv.weight", {3 * h, h});
    params_[b.qkv_w].qkv_split = {h, h, h};
    b.qkv_b = add(p + "attention.qkv.bias", {3 * h});
    b.proj_w = add(p + "attention.proj.weight", {h, h});
    b.proj_b = add(p + "attention.proj.bias", {h});
    b.ln2_w = add(p + "post_attention_layernorm.weight", {h});
    b.ln2_b = add(p + "post_attention_layernorm.bias", {h});
    b.fc1_w = add(p + "mlp.fc1.weight", {f, h});
    b.fc1_b = add(p + "mlp.fc1.bias", {f});
    b.fc2_w = add(p + "mlp.fc2.weight", {h, f});
    b.fc2_b = add(p + "mlp.fc2.bias", {h});
    a.ids.push_back(b);
  }
  a.lnf_w = add("final_layernorm.weight", {h});
  a.lnf_b = add("final_layernorm.bias", {h});
  if (config_.tied_embeddings) {
    a.head = a.wte;
  } else {
    a.head = add("output_layer.weight", {v, h});
    params_[a.head].embedding_or_output = true;
  }
}

template <typename Scalar>
void GptModel<Scalar>::bind(std::vector<Scalar*> values, std::vector<Scalar*> grads) {
  SW_REQUIRE(values.size() == params_.size() && grads.size() == params_.size(), InvalidArgument,
             "GptModel::bind: got ", values.size(), " values and ", grads.size(),
             " grads for ", params_.size(), " parameters");
  for (std::size_t i = 0; i < params_.size(); ++i) {
    SW_REQUIRE(values[i] != nullptr && grads[i] != nullptr, InvalidArgument,
               "GptModel::bind: null storage for parameter '", params_[i].name, "'");
  }
  values_ = std::move(values);
  grads_ = std::move(grads);
}

template <typename Scalar>
void GptModel<Scalar>::init_parameters(std::uint64_t seed) {
  SW_REQUIRE(!values_.empty(), InvalidArgument, "GptModel::init_parameters before bind()");
  const double out_std = config_.init_std / std::sqrt(2.0 * config_.num_layers);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const ParamInfo& p = params_[i];
    const bool is_bias = p.name.ends_with(".bias");
    const bool is_norm = p.name.find("layernorm") != std::string::npos;
    Scalar* v = values_[i];
    if (is_norm && !is_bias) {
      std::fill(v, v + p.numel(), Scalar(1));
    } else if (is_bias) {
      std::fill(v, v + p.numel(), Scalar(0));
    } else {
      const bool residual_out = p.name.ends_with("proj.weight") || p.name.ends_with("fc2.weight");
      fill_normal(v, p.numel(), residual_out ? out_std : config_.init_std, seed, p.name);
    }
  }
}

template <typename Scalar>
void GptModel<Scalar>::set_before_param_use(std::function<void(ParamId)> hook) {
  before_use_ = std::move(hook);
}

template <typename Scalar>
double GptModel<Scalar>::forward(const std::int32_t* tokens, const std::int32_t* targets,
                                 int batch, int seq) {
  SW_REQUIRE(!values_.empty(), InvalidArgument, "GptModel::forward before bind()");
  SW_REQUIRE(batch >= 1 && seq >= 1 && seq <= config_.seq_len, ShapeError,
             "GptModel::forward: batch ", batch, " x seq ", seq, " (max seq ", config_.seq_len,
             ")");
  Activations& a = *acts_;
  const int h = config_.hidden, f = config_.ffn_hidden, v = config_.vocab_size;
  const int nh = config_.num_heads, hd = config_.head_dim();
  const std::int64_t n = std::int64_t{batch} * seq;
  a.batch = batch;
  a.seq = seq;
  a.tokens.assign(tokens, tokens + n);
  a.targets.assign(targets, targets + n);
  for (std::int64_t i = 0; i < n; ++i) {
    SW_REQUIRE(tokens[i] >= 0 && tokens[i] < v, ShapeError, "GptModel::forward: token ",
               tokens[i], " at position ", i, " outside vocabulary of ", v);
    SW_REQUIRE(targets[i] < v, ShapeError, "GptModel::forward: target ", targets[i],
               " outside vocabulary of ", v);
  }
  auto use = [&](ParamId id) -> const Scalar* {
    if (before_use_) before_use_(id);
    return values_[id];
  };

  // Embeddings.
  std::vector<Scalar> x(static_cast<std::size_t>(n) * h);
  const Scalar* wte = use(a.wte);
  const Scalar* wpe = a.has_wpe ? use(a.wpe) : nullptr;
  for (std::int64_t i = 0; i < n; ++i) {
    const Scalar* e = wte + std::int64_t{tokens[i]} * h;
    Scalar* xi = x.data() + i * h;
    for (int c = 0; c < h; ++c) xi[c] = e[c];
    if (wpe) {
      const Scalar* pe = wpe + (i % seq) * std::int64_t{h};
      for (int c = 0; c < h; ++c) xi[c] += pe[c];
    }
  }

  a.blocks.resize(config_.num_layers);
  for (int l = 0; l < config_.num_layers; ++l) {
    const BlockIds& id = a.ids[l];
    auto& b = a.blocks[l];
    b.x_in = x;
    layer_norm_forward(x.data(), use(id.ln1_w), use(id.ln1_b), n, h, kLayerNormEps, b.ln1_out,
                       b.ln1_mean, b.ln1_rstd);
    linear_forward(b.ln1_out.data(), use(id.qkv_w), use(id.qkv_b), n, h, 3 * h, b.qkv);
    if (config_.rope) rope_apply(b.qkv.data(), batch, seq, nh, hd, 3 * h, /*inverse=*/false);
    attention_forward(b.qkv.data(), batch, seq, nh, hd, b.probs, b.attn_out);
    std::vector<Scalar> proj;
    linear_forward(b.attn_out.data(), use(id.proj_w), use(id.proj_b), n, h, h, proj);
    for (std::int64_t i = 0; i < n * h; ++i) x[i] += proj[i];
    b.x_mid = x;
    layer_norm_forward(x.data(), use(id.ln2_w), use(id.ln2_b), n, h, kLayerNormEps, b.ln2_out,
                       b.ln2_mean, b.ln2_rstd);
    linear_forward(b.ln2_out.data(), use(id.fc1_w), use(id.fc1_b), n, h, f, b.fc1_out);
    gelu_forward(b.fc1_out, b.gelu_out);
    std::vector<Scalar> mlp;
    linear_forward(b.gelu_out.data(), use(id.fc2_w), use(id.fc2_b), n, f, h, mlp);
    for (std::int64_t i = 0; i < n * h; ++i) x[i] += mlp[i];
  }
  a.x_final = x;
  layer_norm_forward(x.data(), use(a.lnf_w), use(a.lnf_b), n, h, kLayerNormEps, a.lnf_out,
                     a.lnf_mean, a.lnf_rstd);
  linear_forward(a.lnf_out.data(), use(a.head), static_cast<const Scalar*>(nullptr), n, h, v,
                 a.logits);
  return softmax_cross_entropy(a.logits, a.targets, n, v, a.counted);
}

template <typename Scalar>
void GptModel<Scalar>::backward(double loss_scale,
                                const std::function<void(ParamId)>& grad_ready) {
  Activations& a = *acts_;
  SW_REQUIRE(a.batch > 0, InvalidArgument, "GptModel::backward without a forward pass");
  const int h = config_.hidden, f = config_.ffn_hidden, v = config_.vocab_size;
  const int nh = config_.num_heads, hd = config_.head_dim();
  const int batch = a.batch, seq = a.seq;
  const std::int64_t n = std::int64_t{batch} * seq;
  auto ready = [&](ParamId id) {
    if (grad_ready) grad_ready(id);
  };

  // d loss / d logits = (softmax - onehot) * scale / counted, zero for ignored targets.
  std::vector<Scalar> dlogits = a.logits;
  const Scalar scale = a.counted > 0 ? static_cast<Scalar>(loss_scale / a.counted) : Scalar(0);
  for (std::int64_t i = 0; i < n; ++i) {
    Scalar* row = dlogits.data() + i * v;
    if (a.targets[i] < 0) {
      std::fill(row, row + v, Scalar(0));
      continue;
    }
    row[a.targets[i]] -= Scalar(1);
    for (int c = 0; c < v; ++c) row[c] *= scale;
  }
  std::vector<Scalar> dx;
  linear_backward(dlogits.data(), a.lnf_out.data(), values_[a.head], n, h, v, grads_[a.head],
                  static_cast<Scalar*>(nullptr), dx);
  if (a.head != a.wte) ready(a.head);
  std::vector<Scalar> dres;
  layer_norm_backward(dx.data(), a.x_final.data(), a.lnf_mean, a.lnf_rstd, values_[a.lnf_w], n,
                      h, grads_[a.lnf_w], grads_[a.lnf_b], dres);
  ready(a.lnf_b);
  ready(a.lnf_w);

  for (int l = config_.num_layers - 1; l >= 0; --l) {
    const BlockIds& id = a.ids[l];
    auto& b = a.blocks[l];
    // MLP: x = x_mid + fc2(gelu(fc1(ln2(x_mid)))).
    std::vector<Scalar> dgelu;
    linear_backward(dres.data(), b.gelu_out.data(), values_[id.fc2_w], n, f, h, grads_[id.fc2_w],
                    grads_[id.fc2_b], dgelu);
    ready(id.fc2_b);
    ready(id.fc2_w);
    gelu_backward(b.fc1_out, dgelu);
    std::vector<Scalar> dln2;
    linear_backward(dgelu.data(), b.ln2_out.data(), values_[id.fc1_w], n, h, f, grads_[id.fc1_w],
                    grads_[id.fc1_b], dln2);
    ready(id.fc1_b);
    ready(id.fc1_w);
    std::vector<Scalar> dmid;
    layer_norm_backward(dln2.data(), b.x_mid.data(), b.ln2_mean, b.ln2_rstd, values_[id.ln2_w],
                        n, h, grads_[id.ln2_w], grads_[id.ln2_b], dmid);
    ready(id.ln2_b);
    ready(id.ln2_w);
    for (std::int64_t i = 0; i < n * h; ++i) dres[i] += dmid[i];

    // Attention: x_mid = x_in + proj(attn(qkv(ln1(x_in)))).
    std::vector<Scalar> dattn;
    linear_backward(dres.data(), b.attn_out.data(), values_[id.proj_w], n, h, h,
                    grads_[id.proj_w], grads_[id.proj_b], dattn);
    ready(id.proj_b);
    ready(id.proj_w);
    std::vector<Scalar> dqkv;
    attention_backward(b.qkv.data(), b.probs, dattn.data(), batch, seq, nh, hd, dqkv);
    if (config_.rope) rope_apply(dqkv.data(), batch, seq, nh, hd, 3 * h, /*inverse=*/true);
    std::vector<Scalar> dln1;
    linear_backward(dqkv.data(), b.ln1_out.data(), values_[id.qkv_w], n, h, 3 * h,
                    grads_[id.qkv_w], grads_[id.qkv_b], dln1);
    ready(id.qkv_b);
    ready(id.qkv_w);
    std::vector<Scalar> din;
    layer_norm_backward(dln1.data(), b.x_in.data(), b.ln1_mean, b.ln1_rstd, values_[id.ln1_w], n,
                        h, grads_[id.ln1_w], grads_[id.ln1_b], din);
    ready(id.ln1_b);
    ready(id.ln1_w);
    for (std::int64_t i = 0; i < n * h; ++i) dres[i] += din[i];
  }

  // Embeddings.
  if (a.has_wpe) {
    Scalar* gpe = grads_[a.wpe];
    for (std::int64_t i = 0; i < n; ++i) {
      Scalar* g = gpe + (i % seq) * std::int64_t{h};
      const Scalar* d = dres.data() + i * h;
      for (int c = 0; c < h; ++c) g[c] += d[c];
    }
    ready(a.wpe);
  }
  Scalar* gte = grads_[a.wte];
  for (std::int64_t i = 0; i < n; ++i) {
    Scalar* g = gte + std::int64_t{a.tokens[i]} * h;
    const Scalar* d = dres.data() + i * h;
    for (int c = 0; c < h; ++c) g[c] += d[c];
  }
  ready(a.wte);
}

template <typename Scalar>
std::vector<bool> GptModel<Scalar>::exact_match() const {
  const Activations& a = *acts_;
  const int v = config_.vocab_size;
  std::vector<bool> match(a.batch, true);
  for (int b = 0; b < a.batch; ++b) {
    for (int t = 0; t < a.seq; ++t) {
      const std::int64_t i = std::int64_t{b} * a.seq + t;
      if (a.targets[i] < 0) continue;
      const Scalar* row = a.logits.data() + i * v;
      const int best = static_cast<int>(std::max_element(row, row + v) - row);
      if (best != a.targets[i]) match[b] = false;
    }
  }
  return match;
}

template <typename Scalar>
std::span<const Scalar> GptModel<Scalar>::probabilities(int b, int t) const {
  const Activations& a = *acts_;
  SW_REQUIRE(b >= 0 && b < a.batch && t >= 0 && t < a.seq, ShapeError,
             "GptModel::probabilities: position (", b, ", ", t, ") outside the last forward's ",
             a.batch, " x ", a.seq);
  const auto v = static_cast<std::size_t>(config_.vocab_size);
  return {a.logits.data() + (static_cast<std::size_t>(b) * a.seq + t) * v, v};
}

template class GptModel<float>;
template class GptModel<double>;

}  // namespace shardwise
