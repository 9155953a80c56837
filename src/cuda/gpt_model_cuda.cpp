// GptModelCuda: construction, binding, initialisation, the forward entry point and its loss,
// exact match. The per-block passes are in gpt_model_cuda_passes.cpp.
#include "shardwise/cuda/gpt_model_cuda.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "cuda_status.hpp"
#include "gpt_kernels.hpp"
#include "gpt_model_cuda_state.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/model/gpt_model.hpp"

namespace shardwise::cuda {

using detail::check_cuda;
using detail::floats;

namespace {

constexpr float kLayerNormEps = 1e-5f;  // the CPU model's, rounded to fp32 as it rounds it

// The rotary cos / sin of every (position, pair) exactly as model/dense_kernels.cpp computes them
// (angle in fp64, then rounded to fp32).
void rope_tables(int seq, int head_dim, std::vector<float>& cos_t, std::vector<float>& sin_t) {
  const int pairs = head_dim / 2;
  cos_t.resize(static_cast<std::size_t>(seq) * pairs);
  sin_t.resize(cos_t.size());
  for (int pos = 0; pos < seq; ++pos) {
    for (int pair = 0; pair < pairs; ++pair) {
      const double inv_freq = std::pow(10000.0, -2.0 * pair / static_cast<double>(head_dim));
      const double angle = pos * inv_freq;
      cos_t[static_cast<std::size_t>(pos) * pairs + pair] = static_cast<float>(std::cos(angle));
      sin_t[static_cast<std::size_t>(pos) * pairs + pair] = static_cast<float>(std::sin(angle));
    }
  }
}

bool is_device_memory(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error of a failed query
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

}  // namespace

GptModelCuda::GptModelCuda(const GptConfig& config, const GptCudaOptions& options)
    : config_(config), options_(options), state_(std::make_unique<State>()) {
  SW_REQUIRE(options_.tensor_parallel_size == 1, ConfigError, "GptModelCuda: tensor_parallel_size ",
             options_.tensor_parallel_size,
             ": the device model has no tensor parallelism (use 1, or the CPU model)");
  params_ = gpt_param_list(config_, 1);
  State& s = *state_;
  s.ids = gpt_param_ids(config_);
  SW_CHECK(s.ids.count == params_.size(), "GptModelCuda: ", s.ids.count, " ids for ",
           params_.size(), " params");
  SW_REQUIRE(gpu_available(), CudaError, "GptModelCuda: no CUDA device");
  s.stream = detail::as_stream(options_.stream);
  s.gemm = std::make_unique<detail::DeviceGemm>(options_.precision, s.stream);
  if (config_.rope) {
    std::vector<float> cos_t, sin_t;
    rope_tables(config_.seq_len, config_.head_dim(), cos_t, sin_t);
    s.rope_cos = to_device(cos_t);
    s.rope_sin = to_device(sin_t);
  }
  s.layers.resize(static_cast<std::size_t>(config_.num_layers));
}

GptModelCuda::~GptModelCuda() = default;

void GptModelCuda::bind(std::vector<float*> values, std::vector<float*> grads) {
  SW_REQUIRE(values.size() == params_.size() && grads.size() == params_.size(), InvalidArgument,
             "GptModelCuda::bind: got ", values.size(), " values and ", grads.size(), " grads for ",
             params_.size(), " parameters");
  for (std::size_t i = 0; i < params_.size(); ++i) {
    for (const auto& [p, what] : {std::pair{values[i], "value"}, std::pair{grads[i], "gradient"}}) {
      SW_REQUIRE(p != nullptr, InvalidArgument, "GptModelCuda::bind: null ", what,
                 " for parameter '", params_[i].name, "'");
      SW_REQUIRE(is_device_memory(p), InvalidArgument, "GptModelCuda::bind: the ", what,
                 " of parameter '", params_[i].name, "' is not device memory");
    }
  }
  values_ = std::move(values);
  grads_ = std::move(grads);
}

void GptModelCuda::init_parameters(std::uint64_t seed) {
  SW_REQUIRE(!values_.empty(), InvalidArgument, "GptModelCuda::init_parameters before bind()");
  GptModel<float> host(config_);
  std::vector<std::vector<float>> storage(params_.size());
  std::vector<float*> host_values, host_grads;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    storage[i].resize(static_cast<std::size_t>(params_[i].numel()));
    host_values.push_back(storage[i].data());
    host_grads.push_back(storage[i].data());  // never written: init only
  }
  host.bind(host_values, host_grads);
  host.init_parameters(seed);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    check_cuda(cudaMemcpyAsync(values_[i], storage[i].data(), storage[i].size() * sizeof(float),
                               cudaMemcpyHostToDevice, state_->stream),
               "cudaMemcpyAsync (initial parameter values)");
  }
  check_cuda(cudaStreamSynchronize(state_->stream), "cudaStreamSynchronize (initial values)");
}

void GptModelCuda::set_before_param_use(std::function<void(ParamId)> hook) {
  before_use_ = std::move(hook);
}

const float* GptModelCuda::use(ParamId id) {
  if (before_use_) before_use_(id);
  return values_[id];
}

void GptModelCuda::reserve_activations(int batch, int seq) {
  State& s = *state_;
  const auto n = static_cast<std::size_t>(batch) * seq;
  const auto h = static_cast<std::size_t>(config_.hidden);
  const auto f = static_cast<std::size_t>(config_.ffn_hidden);
  const auto v = static_cast<std::size_t>(config_.vocab_size);
  const std::size_t scores =
      static_cast<std::size_t>(batch) * config_.num_heads * static_cast<std::size_t>(seq) * seq;
  const std::size_t fp = sizeof(float);
  for (detail::GptLayerActivations& a : s.layers) {
    for (DeviceBuffer* b : {&a.x_in, &a.ln1_out, &a.attn_out, &a.x_mid, &a.ln2_out}) {
      b->reserve(n * h * fp);
    }
    for (DeviceBuffer* b : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd}) b->reserve(n * fp);
    a.qkv_heads.reserve(3 * n * h * fp);
    a.probs.reserve(scores * fp);
    a.fc1_out.reserve(n * f * fp);
    a.gelu_out.reserve(n * f * fp);
  }
  s.tokens_d.reserve(n * sizeof(std::int32_t));
  s.targets_d.reserve(n * sizeof(std::int32_t));
  s.argmax.reserve(n * sizeof(std::int32_t));
  s.row_loss.reserve(n * sizeof(double));
  for (DeviceBuffer* b : {&s.x_final, &s.lnf_out, &s.heads, &s.branch, &s.dres, &s.dx, &s.dln}) {
    b->reserve(n * h * fp);
  }
  s.lnf_mean.reserve(n * fp);
  s.lnf_rstd.reserve(n * fp);
  s.logits.reserve(n * v * fp);
  s.rows3.reserve(3 * n * h * fp);
  s.dqkv_heads.reserve(3 * n * h * fp);
  s.dffn.reserve(n * f * fp);
  s.dprobs.reserve(scores * fp);
  const std::int64_t widest = std::max<std::int64_t>(3 * config_.hidden, config_.ffn_hidden);
  const std::int64_t partials =
      std::max(detail::column_sum_partials(static_cast<std::int64_t>(n), widest),
               detail::layer_norm_partials(static_cast<std::int64_t>(n), config_.hidden));
  s.partials.reserve(static_cast<std::size_t>(partials) * fp);
}

double GptModelCuda::forward(const std::int32_t* tokens, const std::int32_t* targets, int batch,
                             int seq) {
  SW_REQUIRE(!values_.empty(), InvalidArgument, "GptModelCuda::forward before bind()");
  SW_REQUIRE(batch >= 1 && seq >= 1 && seq <= config_.seq_len, ShapeError,
             "GptModelCuda::forward: batch ", batch, " x seq ", seq, " (max seq ", config_.seq_len,
             ")");
  State& s = *state_;
  const int h = config_.hidden, v = config_.vocab_size;
  const std::int64_t n = std::int64_t{batch} * seq;
  s.counted = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    SW_REQUIRE(tokens[i] >= 0 && tokens[i] < v, ShapeError, "GptModelCuda::forward: token ",
               tokens[i], " at position ", i, " outside vocabulary of ", v);
    SW_REQUIRE(targets[i] < v, ShapeError, "GptModelCuda::forward: target ", targets[i],
               " outside vocabulary of ", v);
    if (targets[i] >= 0) ++s.counted;
  }
  reserve_activations(batch, seq);
  s.batch = batch;
  s.seq = seq;
  s.n = n;
  s.targets.assign(targets, targets + n);
  const std::size_t index_bytes = static_cast<std::size_t>(n) * sizeof(std::int32_t);
  check_cuda(
      cudaMemcpyAsync(s.tokens_d.data(), tokens, index_bytes, cudaMemcpyHostToDevice, s.stream),
      "cudaMemcpyAsync (tokens)");
  check_cuda(
      cudaMemcpyAsync(s.targets_d.data(), targets, index_bytes, cudaMemcpyHostToDevice, s.stream),
      "cudaMemcpyAsync (targets)");

  const int layers = config_.num_layers;
  embed_forward(layers > 0 ? floats(s.layers[0].x_in) : floats(s.x_final));
  for (int l = 0; l < layers; ++l) {
    block_forward(l, l + 1 < layers ? floats(s.layers[l + 1].x_in) : floats(s.x_final));
  }
  detail::launch_layer_norm_forward(floats(s.x_final), use(s.ids.lnf_w), use(s.ids.lnf_b), n, h,
                                    kLayerNormEps, floats(s.lnf_out), floats(s.lnf_mean),
                                    floats(s.lnf_rstd), s.stream);
  s.gemm->run(false, true, 1.0f, {floats(s.lnf_out), n, h, h}, {use(s.ids.head), v, h, h}, 0.0f,
              floats(s.logits), v, "cublasGemmEx (logits)");
  detail::launch_softmax_cross_entropy(floats(s.logits), s.targets_d.as<std::int32_t>(), n, v,
                                       s.row_loss.as<double>(), s.argmax.as<std::int32_t>(),
                                       s.stream);
  std::vector<double> row_loss(static_cast<std::size_t>(n));
  check_cuda(cudaMemcpyAsync(row_loss.data(), s.row_loss.data(), row_loss.size() * sizeof(double),
                             cudaMemcpyDeviceToHost, s.stream),
             "cudaMemcpyAsync (row losses)");
  check_cuda(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize (forward)");
  s.forward_done = true;
  double total = 0;  // rows in order, as the CPU model adds them
  for (std::int64_t i = 0; i < n; ++i) {
    if (targets[i] >= 0) total += row_loss[static_cast<std::size_t>(i)];
  }
  return s.counted > 0 ? total / static_cast<double>(s.counted) : 0.0;
}

void GptModelCuda::embed_forward(float* x) {
  State& s = *state_;
  const float* wte = use(s.ids.wte);
  const float* wpe = s.ids.has_wpe ? use(s.ids.wpe) : nullptr;
  detail::launch_embedding_forward(s.tokens_d.as<std::int32_t>(), wte, wpe, s.n, s.seq,
                                   config_.hidden, x, s.stream);
}

std::vector<bool> GptModelCuda::exact_match() const {
  const State& s = *state_;
  SW_REQUIRE(s.n > 0, InvalidArgument, "GptModelCuda::exact_match without a forward pass");
  std::vector<std::int32_t> argmax(static_cast<std::size_t>(s.n));
  check_cuda(cudaMemcpyAsync(argmax.data(), s.argmax.data(), argmax.size() * sizeof(std::int32_t),
                             cudaMemcpyDeviceToHost, s.stream),
             "cudaMemcpyAsync (argmax)");
  check_cuda(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize (exact match)");
  std::vector<bool> match(static_cast<std::size_t>(s.batch), true);
  for (std::int64_t i = 0; i < s.n; ++i) {
    const std::int32_t t = s.targets[static_cast<std::size_t>(i)];
    if (t >= 0 && argmax[static_cast<std::size_t>(i)] != t) match[i / s.seq] = false;
  }
  return match;
}

std::span<const float> GptModelCuda::probabilities(int b, int t) const {
  const State& s = *state_;
  SW_REQUIRE(s.forward_done, InvalidArgument,
             "GptModelCuda::probabilities: needs a forward pass and no backward since");
  SW_REQUIRE(b >= 0 && b < s.batch && t >= 0 && t < s.seq, ShapeError,
             "GptModelCuda::probabilities: position (", b, ", ", t, ") outside the last forward's ",
             s.batch, " x ", s.seq);
  const auto v = static_cast<std::size_t>(config_.vocab_size);
  probabilities_.resize(v);
  const float* row = floats(s.logits) + (static_cast<std::size_t>(b) * s.seq + t) * v;
  check_cuda(cudaMemcpyAsync(probabilities_.data(), row, v * sizeof(float), cudaMemcpyDeviceToHost,
                             s.stream),
             "cudaMemcpyAsync (probabilities)");
  check_cuda(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize (probabilities)");
  return {probabilities_.data(), v};
}

double gpt_model_flops_per_token(const GptConfig& config, int seq) {
  const double h = config.hidden, layers = config.num_layers;
  const double matmul_weights =
      layers * (4 * h * h + 2 * h * config.ffn_hidden) + static_cast<double>(config.vocab_size) * h;
  return 6 * matmul_weights + 12 * layers * seq * h;
}

}  // namespace shardwise::cuda
