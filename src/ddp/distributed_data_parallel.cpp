#include "shardwise/ddp/distributed_data_parallel.hpp"

#include <algorithm>
#include <cstring>

#include "shardwise/comm/shard_groups.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/fnv1a.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/layout/layout_algorithms.hpp"

namespace shardwise {

namespace {

bool is_plain_float(DType d) {
  return d == DType::kFloat32 || d == DType::kBFloat16 || d == DType::kFloat16;
}

// What a rank says of one of its params when the ranks' layouts differ.
std::string param_text(const ParamInfo& p) {
  // With the shape, these decide whether Muon steps the param (is_managed_by_layer_wise_optimizer).
  return str_cat("'", p.name, "' ", shape_text(p.shape), " ", dtype_name(p.dtype),
                 p.embedding_or_output ? ", embedding/output" : "",
                 p.use_muon ? (*p.use_muon ? ", use_muon=true" : ", use_muon=false") : "");
}

// Layouts that differ with as many params on every rank: the first param whose name, shape,
// dtype or Muon choice differs is named on every rank, rather than two layout hashes (one
// collective per param up to it, on this failure path only). Returns when all params agree
// (the layouts then differ in their buckets).
void name_first_differing_param(ProcessGroup& group, const ParamList& params) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::string text = param_text(params[i]);
    Fnv1a h;
    h.text(text);
    group.check_same_on_all_ranks(h.value(), str_cat("param ", i, " (here ", text, ")"));
  }
}

// Every rank must hold the same layout before any rank allocates or issues a collective on it.
// A rank that fails the DP check still joins the expert-DP check (with a poisoned value), so
// ranks of an expert group spanning several DP groups all throw instead of hanging.
// The DP group's error is the one reported (the expert check then fails only because of it).
void check_same_layout_on_all_ranks(const DataParallelGroups& pgs, bool separate_expert_group,
                                    const ParamList& params, std::uint64_t hash) {
  const std::size_t num_params = params.size();
  std::exception_ptr dp_error;
  try {
    pgs.data_parallel->check_same_on_all_ranks(hash, "parameter layout (shapes, dtypes, buckets)");
  } catch (const CommError&) {
    dp_error = std::current_exception();
    // Every DP rank saw the mismatch; a model that differs in its param count says so plainly
    // rather than by a hash (one more collective, only on this path).
    try {
      pgs.data_parallel->check_same_on_all_ranks(num_params, "number of parameters");
      name_first_differing_param(*pgs.data_parallel, params);
    } catch (const CommError&) {
      dp_error = std::current_exception();
    }
  }
  if (separate_expert_group) {
    const std::uint64_t poisoned =
        hash ^ 0x9e3779b97f4a7c15ull ^ static_cast<std::uint64_t>(pgs.data_parallel->rank() + 1);
    try {
      pgs.expert_data_parallel->check_same_on_all_ranks(dp_error ? poisoned : hash,
                                                        "parameter layout (expert-DP group)");
    } catch (const CommError&) {
      if (!dp_error) throw;
    }
  }
  if (dp_error) std::rethrow_exception(dp_error);
}

// Each param's buffer (null for none), checking that no param is in two.
std::vector<const BufferKey*> buffer_of_each_param(const ParamList& params,
                                                   const FullParamLayout& layout) {
  std::vector<const BufferKey*> key_of(params.size(), nullptr);
  for (const auto& [key, buffer_layout] : layout.layouts) {
    for (const ParamRange& r : buffer_layout.param_index_map) {
      SW_REQUIRE(r.param < params.size(), InvalidArgument, "layout buffer ", key.to_string(), ": ",
                 param_label(params, r.param), " is out of range (the model has ", params.size(),
                 " params)");
      SW_REQUIRE(key_of[r.param] == nullptr || *key_of[r.param] == key, InvalidArgument,
                 "layout: ", param_label(params, r.param), " is in two buffers, ",
                 key_of[r.param] ? key_of[r.param]->to_string() : std::string(), " and ",
                 key.to_string());
      key_of[r.param] = &key;
    }
  }
  return key_of;
}

// Every param in exactly one buffer, and one whose grads reduce in the dtype the config asks for.
void check_param_buffers(const ParamList& params, const FullParamLayout& layout,
                         bool grad_reduce_in_fp32) {
  const std::vector<const BufferKey*> key_of = buffer_of_each_param(params, layout);
  for (ParamId id = 0; id < params.size(); ++id) {
    SW_REQUIRE(key_of[id] != nullptr, InvalidArgument, "layout: ", param_label(params, id),
               " is in no buffer");
    const ParamInfo& info = params[id];
    const BufferKey& key = *key_of[id];
    if (info.grad_dtype) continue;
    // Without an explicit grad dtype the param's grads reduce in fp32 (grad_reduce_in_fp32) or
    // in its own dtype.
    SW_REQUIRE(!grad_reduce_in_fp32 || key.grad_dtype == DType::kFloat32, ShapeError,
               "layout: ", param_label(params, id), " is in buffer ", key.to_string(),
               " which reduces in ", dtype_name(key.grad_dtype), " but grad_reduce_in_fp32 is set");
    SW_REQUIRE(grad_reduce_in_fp32 || !is_plain_float(info.dtype) || key.grad_dtype == info.dtype,
               ShapeError, "layout: ", param_label(params, id), " (", dtype_name(info.dtype),
               ") is in buffer ", key.to_string(), " which reduces in ", dtype_name(key.grad_dtype),
               " but grad_reduce_in_fp32 is off");
  }
}

}  // namespace

GradientScaling gradient_scaling(const DistributedDataParallelConfig& config, int dp,
                                 int expert_dp) {
  SW_REQUIRE(dp >= 1 && expert_dp >= 1, InvalidArgument, "gradient scaling: dp (", dp,
             ") and expert dp (", expert_dp, ") must be >= 1");
  GradientScaling s;
  s.op = config.average_in_collective ? ReduceOp::kAvg : ReduceOp::kSum;
  if (config.per_token_loss) return s;
  if (config.average_in_collective) {
    // The collective divides by its own size; expert grads are averaged over expert_dp ranks
    // only, so rescale them to the same 1/dp the dense grads get.
    s.dense = 1.0;
    s.expert = static_cast<double>(expert_dp) / static_cast<double>(dp);
  } else {
    s.dense = 1.0 / static_cast<double>(dp);
    s.expert = 1.0 / static_cast<double>(dp);
  }
  return s;
}

std::map<ParamId, int> ping_pong_owner_map(const ParamList& params, const FullParamLayout& layout,
                                           int dp, int expert_dp) {
  std::vector<ParamId> dense, expert;
  for (const auto& [key, buffer] : layout.layouts) {
    for (const ParamRange& r : buffer.param_index_map) {
      (key.is_expert_parallel ? expert : dense).push_back(r.param);
    }
  }
  // Forward order, so the deal does not depend on how buffers are keyed.
  std::sort(dense.begin(), dense.end());
  std::sort(expert.begin(), expert.end());
  std::map<ParamId, int> owner;
  for (const auto& [ids, ranks] : {std::pair{&dense, dp}, std::pair{&expert, expert_dp}}) {
    if (ids->empty()) continue;
    const auto assignment = ping_pong_shard_assignment(params, *ids, ranks);
    for (std::size_t r = 0; r < assignment.size(); ++r) {
      for (ParamId id : assignment[r]) owner[id] = static_cast<int>(r);
    }
  }
  return owner;
}

DistributedDataParallel::NoSyncScope::NoSyncScope(DistributedDataParallel* ddp)
    : ddp_(ddp), previous_(ddp->is_last_microbatch()) {
  ddp_->set_is_last_microbatch(false);
}

DistributedDataParallel::NoSyncScope::~NoSyncScope() { ddp_->set_is_last_microbatch(previous_); }

DistributedDataParallel::DistributedDataParallel(ParamList params, FullParamLayout layout,
                                                 DistributedDataParallelConfig config,
                                                 DataParallelGroups groups, BufferMemoryPtr memory)
    : config_(std::move(config)),
      params_(std::move(params)),
      layout_(std::move(layout)),
      pgs_(std::move(groups)),
      memory_(std::move(memory)) {
  config_.validate();
  SW_REQUIRE(memory_ != nullptr, InvalidArgument, "DistributedDataParallel: no buffer memory");
  SW_REQUIRE(pgs_.data_parallel != nullptr, InvalidArgument,
             "DistributedDataParallel: the data-parallel group is null");
  const bool separate_expert_group = pgs_.expert_data_parallel != nullptr;
  if (!separate_expert_group) pgs_.expert_data_parallel = pgs_.data_parallel;
  scaling_ =
      gradient_scaling(config_, pgs_.data_parallel->size(), pgs_.expert_data_parallel->size());

  check_same_layout_on_all_ranks(pgs_, separate_expert_group, params_,
                                 layout_hash(params_, layout_));
  if (config_.reproducible_reduction) {
    // One tree over the DP group's micro-batches: expert buffers would need their own.
    for (const auto& entry : layout_.layouts) {
      SW_REQUIRE(!entry.first.is_expert_parallel, ConfigError,
                 "ddp.reproducible_reduction does not support expert-parallel buffers (",
                 entry.first.to_string(), ")");
    }
    reproducible_ = std::make_unique<ReproducibleGradReduction>(pgs_.data_parallel->size());
  }
  check_param_buffers(params_, layout_, config_.grad_reduce_in_fp32);
  location_.assign(params_.size(), std::nullopt);

  for (const auto& [key, buffer_layout] : layout_.layouts) {
    make_buffer_groups(key, buffer_layout);
    const ProcessGroupPtr& pg = group_for(key);
    if (config_.reduce_scatter_grads()) {
      SW_REQUIRE(buffer_layout.num_shards == pg->size(), ShapeError, "layout buffer ",
                 key.to_string(), " is split into ", buffer_layout.num_shards,
                 " shards but its group ", pg->name(), " has ", pg->size(), " ranks");
    }
    buffer_index_[key] = buffers_.size();
    // Host buffers go into symmetric memory of their group: its collectives then run in place.
    const bool symmetric = config_.symmetric_buffers && memory_ == host_buffer_memory();
    buffers_.push_back(std::make_unique<ParamAndGradBuffer>(
        params_, key, buffer_layout, key.is_expert_parallel ? scaling_.expert : scaling_.dense,
        symmetric ? symmetric_host_buffer_memory(pg) : memory_));
  }

  std::vector<const ParamAndGradBuffer*> views;
  for (const auto& b : buffers_) views.push_back(b.get());
  for (BucketGroupPlan& plan : plan_bucket_groups(views, config_)) {
    ParamAndGradBuffer* buffer = buffers_[plan.buffer].get();
    const int index = static_cast<int>(groups_.size());
    groups_.push_back(std::make_unique<BucketGroup>(index, buffer, std::move(plan.buckets),
                                                    group_for(buffer->key()), &config_,
                                                    replica_group_for(buffer->key())));
    for (ParamId p : groups_.back()->params()) location_[p] = Location{plan.buffer, index};
  }

  const std::size_t n = groups_.size();
  ready_.assign(params_.size(), false);
  expected_param_.assign(params_.size(), true);
  ready_count_.assign(n, 0);
  expected_count_.resize(n);
  for (std::size_t g = 0; g < n; ++g) {
    expected_count_[g] = static_cast<std::int64_t>(groups_[g]->params().size());
  }
  complete_.assign(n, false);
  param_requested_.assign(n, false);
  reset_iteration();
}

DistributedDataParallel::~DistributedDataParallel() {
  // Collectives in flight still write into the buffers: wait before freeing them.
  for (auto& g : groups_) {
    try {
      g->reset_grad_sync();
      g->reset_param_sync();
    } catch (...) {
      // Destructors must not throw; the error was (or will be) reported by the waiting caller.
    }
  }
}

const DistributedDataParallel::Location& DistributedDataParallel::location(ParamId param) const {
  SW_REQUIRE(param < location_.size() && location_[param].has_value(), InvalidArgument,
             "DistributedDataParallel: ", param_label(params_, param), " is not in any buffer");
  return *location_[param];
}

ParamAndGradBuffer& DistributedDataParallel::buffer(const BufferKey& key) const {
  auto it = buffer_index_.find(key);
  SW_REQUIRE(it != buffer_index_.end(), InvalidArgument, "DistributedDataParallel: no buffer ",
             key.to_string());
  return *buffers_[it->second];
}

ParamAndGradBuffer& DistributedDataParallel::buffer_of(ParamId param) const {
  return *buffers_[location(param).buffer];
}

int DistributedDataParallel::bucket_group_of(ParamId param) const { return location(param).group; }

void DistributedDataParallel::make_buffer_groups(const BufferKey& key,
                                                 const PerBufferParamLayout& layout) {
  const ProcessGroupPtr& pg =
      key.is_expert_parallel ? pgs_.expert_data_parallel : pgs_.data_parallel;
  const int shards = layout.num_shards;
  if (!config_.reduce_scatter_grads() || !key.is_layer_wise || !layout.shard_aligned ||
      shards >= pg->size() || shards < 1 || pg->size() % shards != 0) {
    return;  // one sharding instance over the whole group (mismatches are reported by the caller)
  }
  // Every rank of the group holds the same layout (checked above), so every rank splits for the
  // same (expert, S) pairs in the same (key) order.
  auto& cached = shard_group_cache_[{key.is_expert_parallel, shards}];
  if (cached.first == nullptr) {
    ShardGroups made = make_shard_groups(pg, shards);
    cached = {std::move(made.shard), std::move(made.replica)};
  }
  shard_groups_[key] = cached;
}

const ProcessGroupPtr& DistributedDataParallel::group_for(const BufferKey& key) const {
  auto it = shard_groups_.find(key);
  if (it != shard_groups_.end()) return it->second.first;
  return key.is_expert_parallel ? pgs_.expert_data_parallel : pgs_.data_parallel;
}

const ProcessGroupPtr& DistributedDataParallel::replica_group_for(const BufferKey& key) const {
  static const ProcessGroupPtr kNone;
  auto it = shard_groups_.find(key);
  return it == shard_groups_.end() ? kNone : it->second.second;
}

BucketRange DistributedDataParallel::local_shard_range(const BufferKey& key, int bucket) const {
  const ParamAndGradBuffer& b = buffer(key);
  SW_REQUIRE(bucket >= 0 && static_cast<std::size_t>(bucket) < b.buckets().size(), InvalidArgument,
             "buffer ", key.to_string(), " has no bucket ", bucket);
  const Bucket& chosen = b.buckets()[static_cast<std::size_t>(bucket)];
  const ProcessGroup& group = *group_for(key);
  SW_REQUIRE(chosen.num_shards == group.size(), InvalidArgument, "bucket ", bucket, " of buffer ",
             key.to_string(), " is not sharded over its group of ", group.size(),
             " ranks: its grads are all-reduced (buckets are sharded for the distributed "
             "optimizer kinds)");
  return chosen.shard_range(group.rank());
}

TensorView DistributedDataParallel::param(ParamId id) const { return buffer_of(id).param_view(id); }

TensorView DistributedDataParallel::main_grad(ParamId id) const {
  return buffer_of(id).grad_view(id);
}

void DistributedDataParallel::register_grad_ready(ParamId param) {
  const Location& loc = location(param);
  if (!is_last_microbatch_) return;
  SW_REQUIRE(!ready_[param], InvalidArgument, "register_grad_ready: ", param_label(params_, param),
             " was registered twice in one iteration");
  ready_[param] = true;
  // The reproducible reduction waits for finish_grad_sync(): its order needs every grad.
  if (!config_.overlap_grad_reduce || reproducible_) return;
  SW_REQUIRE(expected_param_[param], InvalidArgument,
             "register_grad_ready: ", param_label(params_, param),
             " produced no gradient on the first iteration, so its bucket group (", loc.group,
             ") no longer waits for it");
  const auto g = static_cast<std::size_t>(loc.group);
  SW_CHECK(!groups_[g]->grad_sync_dispatched(), "bucket group ", g,
           " was dispatched before all its params were ready");
  if (++ready_count_[g] == expected_count_[g]) {
    complete_[g] = true;
    dispatch_ready_groups();
  }
  poll_grad_sync();
}

int DistributedDataParallel::poll_grad_sync() {
  // In index order, like the reduce-scatters: every rank of a replica group issues its
  // all-reduces in the same sequence, each as soon as its reduce-scatter has completed here.
  while (next_replica_dispatch_ < next_grad_dispatch_ &&
         groups_[static_cast<std::size_t>(next_replica_dispatch_)]->poll_replica_reduce()) {
    ++next_replica_dispatch_;
  }
  return next_replica_dispatch_;
}

void DistributedDataParallel::dispatch_ready_groups() {
  // Strictly in index order: a complete group waits for its predecessors, so every rank issues
  // the same sequence of collectives whatever order its grads arrive in.
  while (static_cast<std::size_t>(next_grad_dispatch_) < groups_.size() &&
         complete_[static_cast<std::size_t>(next_grad_dispatch_)]) {
    if (next_grad_dispatch_ == 0) grad_dispatch_log_.clear();
    groups_[static_cast<std::size_t>(next_grad_dispatch_)]->start_grad_sync();
    grad_dispatch_log_.push_back(next_grad_dispatch_);
    ++next_grad_dispatch_;
  }
}

void DistributedDataParallel::close_microbatch() {
  SW_REQUIRE(reproducible_ != nullptr, InvalidArgument,
             "close_microbatch() needs ddp.reproducible_reduction");
  reproducible_->close_microbatch(buffers_);
}

std::int64_t DistributedDataParallel::reproducible_reduction_peak_bytes() const {
  return reproducible_ ? reproducible_->peak_extra_bytes() : 0;
}

void DistributedDataParallel::finish_grad_sync() {
  SW_REQUIRE(is_last_microbatch_, InvalidArgument,
             "finish_grad_sync() called inside no_sync(): only the last micro-batch syncs");
  if (reproducible_) {
    reproducible_->reduce(buffers_, *pgs_.data_parallel, !config_.per_token_loss);
    reset_iteration();
    return;
  }
  for (std::size_t g = static_cast<std::size_t>(next_grad_dispatch_); g < groups_.size(); ++g) {
    complete_[g] = true;
  }
  dispatch_ready_groups();
  std::exception_ptr first_error;
  for (auto& g : groups_) {
    try {
      g->finish_grad_sync();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (config_.overlap_grad_reduce && !counts_learnt_) {
    // Learn which params produce grads (unused params would otherwise hold their group back
    // until finish_grad_sync every iteration).
    std::int64_t registered = 0;
    for (std::int64_t c : ready_count_) registered += c;
    if (registered > 0) {
      expected_count_ = ready_count_;
      expected_param_ = ready_;
      counts_learnt_ = true;
    }
  }
  reset_iteration();
  if (first_error) std::rethrow_exception(first_error);
}

void DistributedDataParallel::reset_iteration() {
  for (auto& g : groups_) g->reset_grad_sync();
  std::fill(ready_.begin(), ready_.end(), false);
  std::fill(ready_count_.begin(), ready_count_.end(), 0);
  for (std::size_t g = 0; g < groups_.size(); ++g) complete_[g] = expected_count_[g] == 0;
  next_grad_dispatch_ = 0;
  next_replica_dispatch_ = 0;
}

void DistributedDataParallel::zero_grad_buffer() {
  reset_iteration();
  if (reproducible_) reproducible_->clear();
  for (auto& b : buffers_) b->zero_grad();
}

std::vector<int> DistributedDataParallel::forward_order(const std::vector<bool>& selected) const {
  // Groups are indexed in backprop order; the forward pass meets them in reverse.
  std::vector<int> order;
  for (int g = static_cast<int>(groups_.size()) - 1; g >= 0; --g) {
    if (selected[static_cast<std::size_t>(g)]) order.push_back(g);
  }
  return order;
}

void DistributedDataParallel::dispatch_param_gather(int group_index, bool async) {
  groups_[static_cast<std::size_t>(group_index)]->start_param_sync(async);
}

void DistributedDataParallel::start_param_sync(bool force_sync) {
  start_param_sync_for_bucket_groups([](const BucketGroup&) { return true; }, force_sync);
}

void DistributedDataParallel::start_param_sync_for_bucket_groups(
    const std::function<bool(const BucketGroup&)>& select, bool force_sync) {
  SW_REQUIRE(config_.reduce_scatter_grads(), InvalidArgument,
             "start_param_sync needs use_distributed_optimizer (and not use_legacy_param_sync; "
             "the legacy path syncs params with legacy_param_sync)");
  std::vector<bool> selected(groups_.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) selected[g] = select(*groups_[g]);
  const std::vector<int> order = forward_order(selected);

  if (force_sync || !config_.overlap_param_gather) {
    // Dispatch everything not already in flight, then wait in the same order.
    for (int g : order) {
      BucketGroup& group = *groups_[static_cast<std::size_t>(g)];
      if (!group.param_sync_pending()) dispatch_param_gather(g, /*async=*/true);
    }
    for (int g : order) {
      groups_[static_cast<std::size_t>(g)]->reset_param_sync();
      param_requested_[static_cast<std::size_t>(g)] = false;
    }
    return;
  }
  for (int g : order) {
    // A gather still in flight from an earlier request completes first (same issue order).
    groups_[static_cast<std::size_t>(g)]->reset_param_sync();
    param_requested_[static_cast<std::size_t>(g)] = true;
  }
  if (order.empty()) return;
  if (config_.align_param_gather) {
    for (int g : order) dispatch_param_gather(g, /*async=*/true);
  } else {
    dispatch_param_gather(order.front(), /*async=*/true);
  }
}

void DistributedDataParallel::start_param_sync_for_group(int group_index) {
  SW_REQUIRE(config_.reduce_scatter_grads(), InvalidArgument,
             "start_param_sync_for_group needs use_distributed_optimizer (and not "
             "use_legacy_param_sync)");
  SW_REQUIRE(group_index >= 0 && static_cast<std::size_t>(group_index) < groups_.size(),
             InvalidArgument, "start_param_sync_for_group: no bucket group ", group_index,
             " (there are ", groups_.size(), ")");
  const auto g = static_cast<std::size_t>(group_index);
  groups_[g]->reset_param_sync();
  param_requested_[g] = true;
  dispatch_param_gather(group_index, /*async=*/true);
}

void DistributedDataParallel::finish_param_sync(int group_index) {
  SW_REQUIRE(group_index >= 0 && static_cast<std::size_t>(group_index) < groups_.size(),
             InvalidArgument, "finish_param_sync: no bucket group ", group_index, " (there are ",
             groups_.size(), ")");
  const auto g = static_cast<std::size_t>(group_index);
  if (!param_requested_[g]) return;  // nothing asked for (or already waited on)
  BucketGroup& group = *groups_[g];
  if (!group.param_sync_dispatched()) dispatch_param_gather(group_index, /*async=*/true);
  group.reset_param_sync();
  param_requested_[g] = false;
  // Chain: the next requested group in forward order starts gathering now.
  for (int next = group_index - 1; next >= 0; --next) {
    const auto n = static_cast<std::size_t>(next);
    if (!param_requested_[n]) continue;
    if (!groups_[n]->param_sync_dispatched()) dispatch_param_gather(next, /*async=*/true);
    break;
  }
}

void DistributedDataParallel::finish_all_param_sync() {
  for (int g : forward_order(param_requested_)) finish_param_sync(g);
}

void DistributedDataParallel::legacy_param_sync(const std::map<ParamId, int>& owner) {
  for (ParamId id = 0; id < params_.size(); ++id) {
    SW_REQUIRE(owner.count(id) != 0, InvalidArgument,
               "legacy_param_sync: ", param_label(params_, id), " has no owner");
  }
  for (const auto& buffer : buffers_) {
    const ProcessGroupPtr& pg = group_for(buffer->key());
    const int size = pg->size();
    const int me = pg->rank();
    const std::size_t esize = dtype_size(buffer->key().param_dtype);
    SW_REQUIRE(!buffer->param_data().on_device(), InvalidArgument, "legacy_param_sync: buffer ",
               buffer->key().to_string(), " is on CUDA device ", buffer->param_data().device,
               "; the legacy flatten / all_gather_v copy runs on host buffers only");
    // Each rank's params in layout order; the gathered buffer is rank 0's, then rank 1's, ...
    std::vector<std::vector<const ParamRange*>> owned(static_cast<std::size_t>(size));
    std::vector<std::int64_t> counts(static_cast<std::size_t>(size), 0);
    for (const ParamRange& r : buffer->params()) {
      const int rank = owner.at(r.param);
      SW_REQUIRE(rank >= 0 && rank < size, InvalidArgument,
                 "legacy_param_sync: ", param_label(params_, r.param), " is owned by rank ", rank,
                 " but group ", pg->name(), " has ", size, " ranks");
      owned[static_cast<std::size_t>(rank)].push_back(&r);
      counts[static_cast<std::size_t>(rank)] += r.numel();
    }
    std::int64_t total = 0;
    for (std::int64_t c : counts) total += c;

    // Copy 1: flatten this rank's params into a send buffer.
    AlignedStorage send(static_cast<std::size_t>(counts[static_cast<std::size_t>(me)]) * esize);
    std::int64_t offset = 0;
    for (const ParamRange* r : owned[static_cast<std::size_t>(me)]) {
      const TensorView src = buffer->param_view(r->param);
      std::memcpy(send.data() + static_cast<std::size_t>(offset) * esize, src.data, src.nbytes());
      offset += r->numel();
    }
    AlignedStorage recv(static_cast<std::size_t>(total) * esize);
    const DType dtype = buffer->key().param_dtype;
    pg->all_gather_v({recv.data(), total, dtype},
                     {send.data(), counts[static_cast<std::size_t>(me)], dtype}, counts)
        ->wait();
    // Copy 2: unflatten every rank's params back into their views.
    offset = 0;
    for (const auto& rank_params : owned) {
      for (const ParamRange* r : rank_params) {
        const TensorView dst = buffer->param_view(r->param);
        std::memcpy(dst.data, recv.data() + static_cast<std::size_t>(offset) * esize, dst.nbytes());
        offset += r->numel();
      }
    }
  }
}

}  // namespace shardwise
