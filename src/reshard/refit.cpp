#include "shardwise/reshard/refit.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <string_view>
#include <utility>

#include "shardwise/core/error.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/core/shape.hpp"
#include "shardwise/reshard/tp_export.hpp"

namespace shardwise {
namespace {

void check_float_param(TensorView src, const std::string& name) {
  SW_REQUIRE(
      src.dtype == DType::kFloat32 || src.dtype == DType::kBFloat16 || src.dtype == DType::kFloat16,
      InvalidArgument, "refit: param ", name, " has dtype ", dtype_name(src.dtype),
      "; expected fp32, bf16 or fp16");
}

// Copies `n` elements of a float tensor (fp32 / bf16 / fp16) into bf16.
void convert_to_bf16(TensorView src, std::uint16_t* dst, const std::string& name) {
  check_float_param(src, name);
  convert_floats(src, {dst, src.numel, DType::kBFloat16}, name);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

const char* refit_mode_name(RefitMode mode) {
  switch (mode) {
    case RefitMode::kBf16:
      return "bf16";
    case RefitMode::kMxfp8ReceiverSide:
      return "mxfp8-receiver";
    case RefitMode::kMxfp8ConvertOnSend:
      return "mxfp8-send";
  }
  return "?";
}

TpRule refit_tp_rule(const RefitParam& p) {
  return p.tp_rule ? *p.tp_rule : megatron_tp_rule(p.name, p.shape);
}

std::vector<ParamReshardRequest> make_refit_requests(const std::vector<RefitParam>& params,
                                                     const RefitTopology& topology) {
  SW_REQUIRE(topology.num_train_ranks >= 1 && topology.tp >= 1, InvalidArgument,
             "refit topology: ", topology.num_train_ranks, " training ranks and tp ", topology.tp,
             " (both must be >= 1)");
  std::vector<ParamReshardRequest> requests;
  requests.reserve(params.size());
  for (const RefitParam& p : params) {
    ParallelSharding replicas;
    replicas.dp = topology.num_train_ranks;
    requests.push_back({p.name, DType::kBFloat16, parallel_sharding(p.name, p.shape, replicas),
                        tp_sharding(p.name, p.shape, refit_tp_rule(p), topology.tp,
                                    topology.first_inference_rank())});
  }
  return requests;
}

namespace {

// The params stored as MXFP8 in this mode.
std::set<std::string> mxfp8_param_names(const std::vector<RefitParam>& params, RefitMode mode) {
  std::set<std::string> names;
  if (mode == RefitMode::kBf16) return names;
  for (const RefitParam& p : params) {
    if (is_mxfp8_refit_candidate(p.name, p.shape)) names.insert(p.name);
  }
  return names;
}

// An inference rank's persistent tensor for `p`: its TP-local shape, allocated once.
InferenceTensor allocate_inference_tensor(const RefitParam& p, int tp, bool mxfp8,
                                          Mxfp8ScaleRule scale_rule) {
  InferenceTensor t;
  t.name = p.name;
  t.global_shape = p.shape;
  t.rule = refit_tp_rule(p);
  t.local_shape = tp_local_shape(p.shape, t.rule, tp);
  t.mxfp8 = mxfp8;
  if (t.mxfp8) {
    t.quantized = Mxfp8Tensor::allocate(t.local_shape[0], t.local_shape[1]);
    t.quantized.rule = scale_rule;
  } else {
    t.bf16.assign(static_cast<std::size_t>(shape_numel(t.local_shape)), 0);
  }
  return t;
}

// Views into t's buffers, one per destination box of this rank, in box order: bf16 params as
// executor destinations, MXFP8 params as data + scale views for the MXFP8 transform.
void add_destination_views(InferenceTensor& t, const std::vector<Box>& boxes,
                           ReshardDestinations& destinations,
                           Mxfp8PersistentBuffers& mxfp8_buffers) {
  // Several boxes (strided split) are consecutive row blocks of the local tensor only when
  // the split is along dim 0; the Megatron rules only stride dim 0.
  SW_CHECK(boxes.size() <= 1 || t.rule.partition_dim == 0, "refit: param ", t.name, " has ",
           boxes.size(), " boxes split along dim ", t.rule.partition_dim);
  std::int64_t offset = 0;
  for (const Box& box : boxes) {
    const std::int64_t n = box.numel();
    if (t.mxfp8) {
      const std::int64_t cols = t.quantized.cols;
      const std::int64_t rows = n / cols;
      const std::int64_t blocks = t.quantized.geometry().blocks_per_row;
      const std::int64_t row0 = offset / cols;
      mxfp8_buffers[t.name].push_back(
          Mxfp8View{std::span<std::uint8_t>(t.quantized.data)
                        .subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(n)),
                    std::span<std::uint8_t>(t.quantized.scale)
                        .subspan(static_cast<std::size_t>(row0 * blocks),
                                 static_cast<std::size_t>(rows * blocks)),
                    rows, cols, Mxfp8ScaleLayout::kRowMajor});
    } else {
      destinations[t.name].push_back({t.bf16.data() + offset, n, DType::kBFloat16});
    }
    offset += n;
  }
  SW_CHECK(offset == shape_numel(t.local_shape), "refit: boxes of ", t.name, " cover ", offset,
           " of ", shape_numel(t.local_shape), " local elements");
}

}  // namespace

RefitEngine::RefitEngine(ProcessGroupPtr group, std::vector<RefitParam> params,
                         RefitTopology topology, RefitMode mode, Mxfp8Options mxfp8_options,
                         Mxfp8QuantizerPtr quantizer)
    : group_(std::move(group)),
      params_(std::move(params)),
      topology_(topology),
      mode_(mode),
      mxfp8_options_(mxfp8_options) {
  SW_REQUIRE(group_ != nullptr, InvalidArgument, "refit: no process group");
  SW_REQUIRE(group_->size() >= topology_.num_ranks(), InvalidArgument,
             "refit: ", topology_.num_train_ranks, " training ranks + tp ", topology_.tp,
             " inference ranks do not fit a group of ", group_->size());
  SW_REQUIRE(mxfp8_options_.layout == Mxfp8ScaleLayout::kRowMajor, InvalidArgument,
             "refit: MXFP8 scales are kept row-major (one contiguous buffer per param)");
  std::sort(params_.begin(), params_.end(),
            [](const RefitParam& a, const RefitParam& b) { return a.name < b.name; });
  const std::vector<ParamReshardRequest> requests = make_refit_requests(params_, topology_);
  const int me = group_->rank();
  plan_ = plan_reshard(requests, me);

  const std::set<std::string> convertible = mxfp8_param_names(params_, mode_);
  if (is_train_rank()) {
    for (const RefitParam& p : params_)
      staging_.emplace_back(static_cast<std::size_t>(shape_numel(p.shape)));
  }
  if (is_inference_rank()) {
    // Allocate everything first, then take views: the views point into heap buffers that stay
    // where they are for the engine's lifetime.
    weights_.reserve(params_.size());
    for (const RefitParam& p : params_) {
      weights_.push_back(allocate_inference_tensor(p, topology_.tp, convertible.count(p.name) != 0,
                                                   mxfp8_options_.rule));
    }
    for (InferenceTensor& t : weights_) {
      const int index = plan_.param_index(t.name);
      SW_CHECK(index >= 0, "refit: param ", t.name, " missing from its own plan");
      add_destination_views(
          t, plan_.params()[static_cast<std::size_t>(index)].destination.boxes_of(me),
          destinations_, mxfp8_buffers_);
    }
  }
  if (mode_ != RefitMode::kBf16) {
    transform_ = std::make_unique<Mxfp8ReshardTransform>(convertible, mxfp8_buffers_, "",
                                                         mode_ == RefitMode::kMxfp8ConvertOnSend,
                                                         mxfp8_options_, std::move(quantizer));
  }
}

bool RefitEngine::is_train_rank() const { return group_->rank() < topology_.num_train_ranks; }

bool RefitEngine::is_inference_rank() const { return tp_rank() >= 0; }

int RefitEngine::tp_rank() const {
  const int t = group_->rank() - topology_.first_inference_rank();
  return t >= 0 && t < topology_.tp ? t : -1;
}

RefitStats RefitEngine::refit(const std::map<std::string, TensorView>& full_values) {
  const auto t_stage = std::chrono::steady_clock::now();
  ReshardSources sources;
  if (is_train_rank()) {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const RefitParam& p = params_[i];
      const auto it = full_values.find(p.name);
      SW_REQUIRE(it != full_values.end(), InvalidArgument, "refit: training rank ", group_->rank(),
                 " has no value for param ", p.name);
      SW_REQUIRE(it->second.numel == shape_numel(p.shape), InvalidArgument, "refit: param ", p.name,
                 " has ", it->second.numel, " elements on training rank ", group_->rank(),
                 ", its shape ", to_string(p.shape), " needs ", shape_numel(p.shape));
      convert_to_bf16(it->second, staging_[i].data(), p.name);
      sources[p.name].push_back(SourceShard::plain(
          {staging_[i].data(), static_cast<std::int64_t>(staging_[i].size()), DType::kBFloat16}));
    }
  }
  const double stage_seconds = seconds_since(t_stage);

  group_->barrier()->wait();  // time the transfer alone, from a common start
  const auto t0 = std::chrono::steady_clock::now();
  RefitStats stats;
  ReshardOptions options;
  options.workspace = &workspace_;  // the same plan every refit: its staging buffers stay
  stats.local = execute_reshard(*group_, plan_, sources, destinations_, transform_.get(), options);
  const double seconds = seconds_since(t0);

  std::int64_t delivered = 0;
  for (const InferenceTensor& t : weights_) delivered += shape_numel(t.local_shape);
  std::int64_t sums[2] = {stats.local.bytes_sent, delivered};
  group_->all_reduce({sums, 2, DType::kInt64}, ReduceOp::kSum)->wait();
  std::int64_t nanos[2] = {static_cast<std::int64_t>(seconds * 1e9),
                           static_cast<std::int64_t>(stage_seconds * 1e9)};
  group_->all_reduce({nanos, 2, DType::kInt64}, ReduceOp::kMax)->wait();
  stats.wire_bytes = sums[0];
  stats.elements = sums[1];
  stats.seconds = static_cast<double>(nanos[0]) / 1e9;
  stats.stage_seconds = static_cast<double>(nanos[1]) / 1e9;
  return stats;
}

std::vector<const void*> RefitEngine::buffer_addresses() const {
  std::vector<const void*> out;
  for (const InferenceTensor& t : weights_) {
    if (t.mxfp8) {
      out.push_back(t.quantized.data.data());
      out.push_back(t.quantized.scale.data());
    } else {
      out.push_back(t.bf16.data());
    }
  }
  return out;
}

void RefitEngine::fill_buffers(std::uint8_t byte) {
  for (InferenceTensor& t : weights_) {
    if (t.mxfp8) {
      std::fill(t.quantized.data.begin(), t.quantized.data.end(), byte);
      std::fill(t.quantized.scale.begin(), t.quantized.scale.end(), byte);
    } else {
      std::memset(t.bf16.data(), byte, t.bf16.size() * sizeof(std::uint16_t));
    }
  }
}

}  // namespace shardwise
