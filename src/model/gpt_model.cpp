#include "shardwise/model/gpt_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "shardwise/core/error.hpp"
#include "shardwise/model/dense_kernels.hpp"
#include "shardwise/model/gpt_param_ids.hpp"
#include "shardwise/model/layer_norm.hpp"
#include "shardwise/model/param_init.hpp"
#include "shardwise/model/tp_collectives.hpp"
#include "shardwise/model/tp_linear.hpp"
#include "shardwise/model/vocab_parallel.hpp"

namespace shardwise {

namespace {

constexpr double kLayerNormEps = 1e-5;

}  // namespace

template <typename Scalar>
struct GptModel<Scalar>::Activations {
  int batch = 0, seq = 0;
  std::int64_t n = 0;        // batch * seq: rows of the full sequence
  std::int64_t n_local = 0;  // rows this rank holds in sequence-sharded regions (n without SP)
  std::vector<std::int32_t> tokens, targets;
  // Per block: inputs and intermediates kept for backward. Sequence-sharded with SP: x_in,
  // ln1_*, x_mid, ln2_*; always full rows: qkv, probs, attn_out, gelu_out, gelu_grad (gelu' at
  // fc1's output, which itself is not kept).
  struct Block {
    std::vector<Scalar> x_in, ln1_out, ln1_mean, ln1_rstd, qkv, probs, attn_out, x_mid, ln2_out,
        ln2_mean, ln2_rstd, gelu_out, gelu_grad;
  };
  std::vector<Block> blocks;
  std::vector<Scalar> x_final, lnf_out, lnf_mean, lnf_rstd, logits;  // logits -> softmax probs
  std::int64_t counted = 0;
  GptParamIds ids;
  // TP shapes: local heads, hidden and ffn columns, vocabulary slice.
  int heads_local = 0, hidden_local = 0, ffn_local = 0;
  std::int64_t vocab_local = 0, vocab_begin = 0;
  std::vector<std::vector<Scalar>> grad_scratch;  // per param, SP-replicated grads only
  std::vector<Scalar> gathered_probs;             // probabilities() under TP
  // Temporaries of forward and backward, kept between steps so a step allocates (and page-faults)
  // nothing once the shapes repeat.
  struct Scratch {
    std::vector<Scalar> proj, fc1, mlp, dlogits, dx, dres, dgelu, dln2, dattn, dqkv, dln1;
  } scratch;
};

template <typename Scalar>
GptModel<Scalar>::GptModel(const GptConfig& config) : GptModel(config, TensorParallelOptions{}) {}

template <typename Scalar>
GptModel<Scalar>::GptModel(const GptConfig& config, const TensorParallelOptions& tp)
    : config_(config), tp_(tp), acts_(std::make_unique<Activations>()) {
  if (!tp_.enabled()) tp_.sequence_parallel = false;  // nothing to shard over
  constexpr bool kIsFloat = std::is_same_v<Scalar, float>;
  SW_REQUIRE(!tp_.enabled() || kIsFloat, InvalidArgument,
             "GptModel: tensor parallelism runs the model in float only");
  register_params();
}

template <typename Scalar>
GptModel<Scalar>::~GptModel() = default;

template <typename Scalar>
void GptModel<Scalar>::register_params() {
  const int t = tp_.size();
  params_ = gpt_param_list(config_, t);
  Activations& a = *acts_;
  a.heads_local = config_.num_heads / t;
  a.hidden_local = config_.hidden / t;
  a.ffn_local = config_.ffn_hidden / t;
  a.vocab_local = config_.padded_vocab_size(t) / t;
  a.vocab_begin = vocab_slice_begin(tp_, config_.padded_vocab_size(t));
  a.ids = gpt_param_ids(config_);
  SW_CHECK(a.ids.count == params_.size(), "GptModel: ", a.ids.count, " ids for ", params_.size(),
           " params");
  a.grad_scratch.resize(params_.size());
}

template <typename Scalar>
void GptModel<Scalar>::bind(std::vector<Scalar*> values, std::vector<Scalar*> grads) {
  SW_REQUIRE(values.size() == params_.size() && grads.size() == params_.size(), InvalidArgument,
             "GptModel::bind: got ", values.size(), " values and ", grads.size(), " grads for ",
             params_.size(), " parameters");
  for (std::size_t i = 0; i < params_.size(); ++i) {
    SW_REQUIRE(values[i] != nullptr && grads[i] != nullptr, InvalidArgument,
               "GptModel::bind: null storage for parameter '", params_[i].name, "'");
  }
  values_ = std::move(values);
  grads_ = std::move(grads);
}

// The tp = 1 model's initial value of a parameter (TP ranks slice their shard out of it, so a
// TP model starts from exactly the tp = 1 model's weights).
template <typename Scalar>
std::vector<Scalar> GptModel<Scalar>::full_initial_value(const ParamInfo& p,
                                                         std::uint64_t seed) const {
  const double out_std = config_.init_std / std::sqrt(2.0 * config_.num_layers);
  const bool is_bias = p.name.ends_with(".bias");
  const bool is_norm = p.name.find("layernorm") != std::string::npos;
  std::vector<Scalar> v(static_cast<std::size_t>(p.numel()));
  if (is_norm && !is_bias) {
    std::fill(v.begin(), v.end(), Scalar(1));
  } else if (is_bias) {
    std::fill(v.begin(), v.end(), Scalar(0));
  } else {
    const bool residual_out = p.name.ends_with("proj.weight") || p.name.ends_with("fc2.weight");
    fill_normal(v.data(), p.numel(), residual_out ? out_std : config_.init_std, seed, p.name);
  }
  return v;
}

template <typename Scalar>
void GptModel<Scalar>::init_parameters(std::uint64_t seed) {
  SW_REQUIRE(!values_.empty(), InvalidArgument, "GptModel::init_parameters before bind()");
  const ParamList full = tp_.enabled() ? gpt_param_list(config_, 1) : params_;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::vector<Scalar> value = full_initial_value(full[i], seed);
    slice_tp_shard(full[i], params_[i], tp_.size(), tp_.rank(), value.data(), values_[i]);
  }
}

template <typename Scalar>
void GptModel<Scalar>::set_before_param_use(std::function<void(ParamId)> hook) {
  before_use_ = std::move(hook);
}

template <typename Scalar>
const Scalar* GptModel<Scalar>::use(ParamId id) {
  if (before_use_) before_use_(id);
  return values_[id];
}

template <typename Scalar>
double GptModel<Scalar>::forward(const std::int32_t* tokens, const std::int32_t* targets, int batch,
                                 int seq) {
  SW_REQUIRE(!values_.empty(), InvalidArgument, "GptModel::forward before bind()");
  SW_REQUIRE(batch >= 1 && seq >= 1 && seq <= config_.seq_len, ShapeError,
             "GptModel::forward: batch ", batch, " x seq ", seq, " (max seq ", config_.seq_len,
             ")");
  Activations& a = *acts_;
  const int h = config_.hidden, v = config_.vocab_size;
  const std::int64_t n = std::int64_t{batch} * seq;
  SW_REQUIRE(!tp_.sequence_parallel || n % tp_.size() == 0, ShapeError,
             "GptModel::forward: sequence parallelism needs batch x seq (", batch, " x ", seq,
             ") divisible by the TP size ", tp_.size());
  a.batch = batch;
  a.seq = seq;
  a.n = n;
  a.n_local = tp_.sequence_parallel ? n / tp_.size() : n;
  a.tokens.assign(tokens, tokens + n);
  a.targets.assign(targets, targets + n);
  for (std::int64_t i = 0; i < n; ++i) {
    SW_REQUIRE(tokens[i] >= 0 && tokens[i] < v, ShapeError, "GptModel::forward: token ", tokens[i],
               " at position ", i, " outside vocabulary of ", v);
    SW_REQUIRE(targets[i] < v, ShapeError, "GptModel::forward: target ", targets[i],
               " outside vocabulary of ", v);
  }

  // The residual stream goes straight into the buffers backward reads (each block's x_in, then
  // x_final), without copies.
  const int layers = config_.num_layers;
  a.blocks.resize(layers);
  embed_forward(layers > 0 ? a.blocks[0].x_in : a.x_final);
  for (int l = 0; l < layers; ++l) {
    block_forward(l, l + 1 < layers ? a.blocks[l + 1].x_in : a.x_final);
  }
  layer_norm_forward(a.x_final.data(), use(a.ids.lnf_w), use(a.ids.lnf_b), a.n_local, h,
                     kLayerNormEps, a.lnf_out, a.lnf_mean, a.lnf_rstd);
  column_parallel_forward(TpGemmSlot::kOutput, tp_, a.lnf_out.data(), use(a.ids.head),
                          static_cast<const Scalar*>(nullptr), n, h, a.vocab_local, a.logits);
  if (!tp_.enabled()) return softmax_cross_entropy(a.logits, a.targets, n, v, a.counted);
  return vocab_parallel_cross_entropy(tp_, a.logits, a.targets, n, a.vocab_local, v, a.counted);
}

// x = word embedding (summed over the vocabulary slices: all-reduced, or reduce-scattered to
// this rank's rows with SP) + position embedding.
template <typename Scalar>
void GptModel<Scalar>::embed_forward(std::vector<Scalar>& x) {
  Activations& a = *acts_;
  const int h = config_.hidden;
  const Scalar* wte = use(a.ids.wte);
  const Scalar* wpe = a.ids.has_wpe ? use(a.ids.wpe) : nullptr;
  x.resize(static_cast<std::size_t>(a.n) * h);
  vocab_parallel_embedding_lookup(a.tokens.data(), a.n, wte, a.vocab_begin, a.vocab_local, h,
                                  x.data());
  if (tp_.sequence_parallel) {
    std::vector<Scalar> partial = std::move(x);
    tp_reduce_scatter_rows(tp_, partial.data(), a.n, h, x);
  } else {
    tp_all_reduce(tp_, x.data(), a.n * h);
  }
  if (!wpe) return;
  const std::int64_t first_row = tp_.sequence_parallel ? a.n_local * tp_.rank() : 0;
  for (std::int64_t i = 0; i < a.n_local; ++i) {
    const Scalar* pe = wpe + (first_row + i) % a.seq * std::int64_t{h};
    Scalar* xi = x.data() + i * h;
    for (int c = 0; c < h; ++c) xi[c] += pe[c];
  }
}

namespace {

// out = a + b over `count` values (the residual stream).
template <typename Scalar>
void residual_sum(const std::vector<Scalar>& a, const std::vector<Scalar>& b, std::int64_t count,
                  std::vector<Scalar>& out) {
  out.resize(static_cast<std::size_t>(count));
  const Scalar* __restrict pa = a.data();
  const Scalar* __restrict pb = b.data();
  Scalar* __restrict po = out.data();
  for (std::int64_t i = 0; i < count; ++i) po[i] = pa[i] + pb[i];
}

}  // namespace

// out = x_mid + mlp(ln2(x_mid)), x_mid = x_in + attn(ln1(x_in)), x_in: this block's stored input.
template <typename Scalar>
void GptModel<Scalar>::block_forward(int l, std::vector<Scalar>& out) {
  Activations& a = *acts_;
  const int h = config_.hidden, hd = config_.head_dim();
  const int nh = a.heads_local, hl = a.hidden_local, fl = a.ffn_local;
  const std::int64_t n = a.n, nl = a.n_local;
  const GptBlockParamIds& id = a.ids.blocks[l];
  auto& b = a.blocks[l];
  layer_norm_forward(b.x_in.data(), use(id.ln1_w), use(id.ln1_b), nl, h, kLayerNormEps, b.ln1_out,
                     b.ln1_mean, b.ln1_rstd);
  column_parallel_forward(TpGemmSlot::kQkv, tp_, b.ln1_out.data(), use(id.qkv_w), use(id.qkv_b), n,
                          h, 3 * hl, b.qkv);
  if (config_.rope) rope_apply(b.qkv.data(), a.batch, a.seq, nh, hd, 3 * hl, /*inverse=*/false);
  attention_forward(b.qkv.data(), a.batch, a.seq, nh, hd, b.probs, b.attn_out);
  std::vector<Scalar>& proj = a.scratch.proj;
  row_parallel_forward(TpGemmSlot::kProj, tp_, b.attn_out.data(), use(id.proj_w), use(id.proj_b), n,
                       hl, h, proj);
  residual_sum(b.x_in, proj, nl * h, b.x_mid);
  layer_norm_forward(b.x_mid.data(), use(id.ln2_w), use(id.ln2_b), nl, h, kLayerNormEps, b.ln2_out,
                     b.ln2_mean, b.ln2_rstd);
  std::vector<Scalar>& fc1 = a.scratch.fc1;
  column_parallel_forward(TpGemmSlot::kFc1, tp_, b.ln2_out.data(), use(id.fc1_w), use(id.fc1_b), n,
                          h, fl, fc1);
  gelu_forward(fc1, b.gelu_out, b.gelu_grad);
  std::vector<Scalar>& mlp = a.scratch.mlp;
  row_parallel_forward(TpGemmSlot::kFc2, tp_, b.gelu_out.data(), use(id.fc2_w), use(id.fc2_b), n,
                       fl, h, mlp);
  residual_sum(b.x_mid, mlp, nl * h, out);
}

template <typename Scalar>
Scalar* GptModel<Scalar>::grad_target(ParamId id) {
  if (!tp_.sequence_parallel || !params_[id].tp_duplicate) return grads_[id];
  std::vector<Scalar>& scratch = acts_->grad_scratch[id];
  scratch.assign(static_cast<std::size_t>(params_[id].numel()), Scalar(0));
  return scratch.data();
}

template <typename Scalar>
void GptModel<Scalar>::grad_done(ParamId id, const std::function<void(ParamId)>& grad_ready) {
  if (tp_.sequence_parallel && params_[id].tp_duplicate) {
    // Each rank saw only its rows: sum this backward's partial gradient over the TP group.
    std::vector<Scalar>& scratch = acts_->grad_scratch[id];
    tp_all_reduce(tp_, scratch.data(), static_cast<std::int64_t>(scratch.size()));
    Scalar* g = grads_[id];
    for (std::size_t i = 0; i < scratch.size(); ++i) g[i] += scratch[i];
  }
  if (grad_ready) grad_ready(id);
}

template <typename Scalar>
void GptModel<Scalar>::backward(double loss_scale, const std::function<void(ParamId)>& grad_ready) {
  Activations& a = *acts_;
  SW_REQUIRE(a.batch > 0, InvalidArgument, "GptModel::backward without a forward pass");
  const int h = config_.hidden;
  const std::int64_t n = a.n, vl = a.vocab_local;

  // d loss / d logits = (softmax - onehot) * scale / counted, zero for ignored targets.
  std::vector<Scalar>& dlogits = a.scratch.dlogits;
  dlogits = a.logits;
  const Scalar scale = a.counted > 0 ? static_cast<Scalar>(loss_scale / a.counted) : Scalar(0);
  for (std::int64_t i = 0; i < n; ++i) {
    Scalar* row = dlogits.data() + i * vl;
    if (a.targets[i] < 0) {
      std::fill(row, row + vl, Scalar(0));
      continue;
    }
    const std::int64_t t = a.targets[i] - a.vocab_begin;
    if (t >= 0 && t < vl) row[t] -= Scalar(1);
    for (std::int64_t c = 0; c < vl; ++c) row[c] *= scale;
  }
  std::vector<Scalar>& dx = a.scratch.dx;
  column_parallel_backward(TpGemmSlot::kOutput, tp_, dlogits.data(), a.lnf_out.data(),
                           values_[a.ids.head], n, h, vl, grads_[a.ids.head],
                           static_cast<Scalar*>(nullptr), dx);
  if (a.ids.head != a.ids.wte && grad_ready) grad_ready(a.ids.head);
  std::vector<Scalar>& dres = a.scratch.dres;
  Scalar* g_lnf_w = grad_target(a.ids.lnf_w);
  Scalar* g_lnf_b = grad_target(a.ids.lnf_b);
  layer_norm_backward(dx.data(), a.x_final.data(), a.lnf_mean, a.lnf_rstd, values_[a.ids.lnf_w],
                      a.n_local, h, g_lnf_w, g_lnf_b, dres);
  grad_done(a.ids.lnf_b, grad_ready);
  grad_done(a.ids.lnf_w, grad_ready);
  for (int l = config_.num_layers - 1; l >= 0; --l) block_backward(l, dres, grad_ready);
  embed_backward(dres, grad_ready);
}

template <typename Scalar>
void GptModel<Scalar>::block_backward(int l, std::vector<Scalar>& dres,
                                      const std::function<void(ParamId)>& grad_ready) {
  Activations& a = *acts_;
  const int h = config_.hidden, hd = config_.head_dim();
  const int nh = a.heads_local, hl = a.hidden_local, fl = a.ffn_local;
  const std::int64_t n = a.n, nl = a.n_local;
  const GptBlockParamIds& id = a.ids.blocks[l];
  auto& b = a.blocks[l];
  auto done = [&](ParamId p) { grad_done(p, grad_ready); };
  // MLP: x = x_mid + fc2(gelu(fc1(ln2(x_mid)))).
  std::vector<Scalar>& dgelu = a.scratch.dgelu;
  row_parallel_backward(TpGemmSlot::kFc2, tp_, dres.data(), b.gelu_out.data(), values_[id.fc2_w], n,
                        fl, h, grads_[id.fc2_w], grad_target(id.fc2_b), dgelu);
  done(id.fc2_b);
  done(id.fc2_w);
  // fc1's bias gradient is summed in the GELU pass (same sums, one pass less over dgelu).
  gelu_backward(b.gelu_grad, dgelu, fl, grads_[id.fc1_b]);
  std::vector<Scalar>& dln2 = a.scratch.dln2;
  column_parallel_backward(TpGemmSlot::kFc1, tp_, dgelu.data(), b.ln2_out.data(), values_[id.fc1_w],
                           n, h, fl, grads_[id.fc1_w], static_cast<Scalar*>(nullptr), dln2);
  done(id.fc1_b);
  done(id.fc1_w);
  // The layer norm's input gradient goes straight onto the residual stream's (dres +=).
  Scalar* g_ln2_w = grad_target(id.ln2_w);
  Scalar* g_ln2_b = grad_target(id.ln2_b);
  layer_norm_backward(dln2.data(), b.x_mid.data(), b.ln2_mean, b.ln2_rstd, values_[id.ln2_w], nl, h,
                      g_ln2_w, g_ln2_b, dres, LayerNormDx::kAdd);
  done(id.ln2_b);
  done(id.ln2_w);

  // Attention: x_mid = x_in + proj(attn(qkv(ln1(x_in)))).
  std::vector<Scalar>& dattn = a.scratch.dattn;
  row_parallel_backward(TpGemmSlot::kProj, tp_, dres.data(), b.attn_out.data(), values_[id.proj_w],
                        n, hl, h, grads_[id.proj_w], grad_target(id.proj_b), dattn);
  done(id.proj_b);
  done(id.proj_w);
  std::vector<Scalar>& dqkv = a.scratch.dqkv;
  attention_backward(b.qkv.data(), b.probs, dattn.data(), a.batch, a.seq, nh, hd, dqkv);
  if (config_.rope) rope_apply(dqkv.data(), a.batch, a.seq, nh, hd, 3 * hl, /*inverse=*/true);
  std::vector<Scalar>& dln1 = a.scratch.dln1;
  column_parallel_backward(TpGemmSlot::kQkv, tp_, dqkv.data(), b.ln1_out.data(), values_[id.qkv_w],
                           n, h, 3 * hl, grads_[id.qkv_w], grads_[id.qkv_b], dln1);
  done(id.qkv_b);
  done(id.qkv_w);
  Scalar* g_ln1_w = grad_target(id.ln1_w);
  Scalar* g_ln1_b = grad_target(id.ln1_b);
  layer_norm_backward(dln1.data(), b.x_in.data(), b.ln1_mean, b.ln1_rstd, values_[id.ln1_w], nl, h,
                      g_ln1_w, g_ln1_b, dres, LayerNormDx::kAdd);
  done(id.ln1_b);
  done(id.ln1_w);
}

template <typename Scalar>
void GptModel<Scalar>::embed_backward(std::vector<Scalar>& dres,
                                      const std::function<void(ParamId)>& grad_ready) {
  Activations& a = *acts_;
  const int h = config_.hidden;
  if (a.ids.has_wpe) {
    Scalar* gpe = grad_target(a.ids.wpe);
    const std::int64_t first_row = tp_.sequence_parallel ? a.n_local * tp_.rank() : 0;
    for (std::int64_t i = 0; i < a.n_local; ++i) {
      Scalar* g = gpe + (first_row + i) % a.seq * std::int64_t{h};
      const Scalar* d = dres.data() + i * h;
      for (int c = 0; c < h; ++c) g[c] += d[c];
    }
    grad_done(a.ids.wpe, grad_ready);
  }
  // Every rank's vocabulary slice needs the gradient of every row.
  const Scalar* d = dres.data();
  std::vector<Scalar> gathered;
  if (tp_.sequence_parallel) {
    tp_all_gather_rows(tp_, dres.data(), a.n_local, h, gathered);
    d = gathered.data();
  }
  vocab_parallel_embedding_backward(a.tokens.data(), a.n, d, a.vocab_begin, a.vocab_local, h,
                                    grads_[a.ids.wte]);
  if (grad_ready) grad_ready(a.ids.wte);
}

// Per-row argmax over this rank's vocabulary slice as (value, global index) pairs, gathered so
// every TP rank picks the same overall argmax (the lowest index among equal maxima).
template <typename Scalar>
std::vector<bool> GptModel<Scalar>::exact_match() const {
  const Activations& a = *acts_;
  const std::int64_t vl = a.vocab_local;
  const std::int64_t valid = std::clamp<std::int64_t>(config_.vocab_size - a.vocab_begin, 0, vl);
  std::vector<Scalar> best(static_cast<std::size_t>(2 * a.n));
  for (std::int64_t i = 0; i < a.n; ++i) {
    const Scalar* row = a.logits.data() + i * vl;
    const std::int64_t c = valid > 0 ? std::max_element(row, row + valid) - row : 0;
    best[2 * i] = valid > 0 ? row[c] : -std::numeric_limits<Scalar>::infinity();
    best[2 * i + 1] = static_cast<Scalar>(a.vocab_begin + c);
  }
  std::vector<Scalar> all;
  tp_all_gather_rows(tp_, best.data(), a.n, 2, all);
  std::vector<bool> match(a.batch, true);
  for (std::int64_t i = 0; i < a.n; ++i) {
    if (a.targets[i] < 0) continue;
    std::int64_t winner = 0;  // rank order is vocabulary order: the first strict maximum wins
    for (int r = 1; r < tp_.size(); ++r) {
      if (all[(r * a.n + i) * 2] > all[(winner * a.n + i) * 2]) winner = r;
    }
    const auto best_index = static_cast<std::int64_t>(all[(winner * a.n + i) * 2 + 1]);
    if (best_index != a.targets[i]) match[i / a.seq] = false;
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
  const Scalar* row = a.logits.data() + (static_cast<std::size_t>(b) * a.seq + t) * a.vocab_local;
  if (!tp_.enabled()) return {row, v};
  tp_all_gather_rows(tp_, row, 1, a.vocab_local, acts_->gathered_probs);
  return {acts_->gathered_probs.data(), v};
}

template class GptModel<float>;
template class GptModel<double>;

}  // namespace shardwise
