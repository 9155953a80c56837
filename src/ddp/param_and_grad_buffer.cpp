#include "shardwise/ddp/param_and_grad_buffer.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include "shardwise/comm/symmetric_memory.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/float_convert.hpp"

namespace shardwise {

namespace {

constexpr std::size_t kStorageAlignment = 64;

// Dtype a param occupies in the param buffer: fp8 values are stored as raw bytes.
DType storage_dtype(DType dtype) {
  return (dtype == DType::kFloat8E4M3 || dtype == DType::kFloat8E8M0) ? DType::kUInt8 : dtype;
}

}  // namespace

AlignedStorage::AlignedStorage(std::size_t nbytes) : nbytes_(nbytes) {
  // Round up so the aligned allocation's size is a multiple of the alignment; never zero bytes.
  const std::size_t padded = std::max<std::size_t>(
      kStorageAlignment, (nbytes + kStorageAlignment - 1) / kStorageAlignment * kStorageAlignment);
  auto* p = static_cast<std::byte*>(::operator new (padded, std::align_val_t{kStorageAlignment}));
  std::memset(p, 0, padded);
  data_.reset(p);
}

void AlignedStorage::Free::operator()(std::byte* p) const {
  ::operator delete (p, std::align_val_t{kStorageAlignment});
}

BucketRange Bucket::shard_range(int shard) const {
  SW_CHECK(shard >= 0 && shard < num_shards, "shard ", shard, " of a bucket with ", num_shards,
           " shards");
  const std::int64_t size = shard_size();
  return {range.start + shard * size, range.start + (shard + 1) * size};
}

TensorView Bucket::param_shard(int shard) const {
  const BucketRange r = shard_range(shard);
  return param_data.slice(r.start - range.start, r.numel());
}

TensorView Bucket::grad_shard(int shard) const {
  const BucketRange r = shard_range(shard);
  return grad_data.slice(r.start - range.start, r.numel());
}

void validate_buffer_layout(const ParamList& params, const BufferKey& key,
                            const PerBufferParamLayout& layout) {
  const std::string where = str_cat("buffer ", key.to_string());
  SW_REQUIRE(key.grad_dtype == DType::kFloat32 || key.grad_dtype == DType::kBFloat16 ||
                 key.grad_dtype == DType::kFloat16,
             InvalidArgument, where, ": gradients must be fp32, bf16 or fp16, not ",
             dtype_name(key.grad_dtype));
  SW_REQUIRE(layout.num_shards >= 1, InvalidArgument, where, ": num_shards must be >= 1, got ",
             layout.num_shards);
  SW_REQUIRE(!layout.bucket_indices.empty() || layout.param_index_map.empty(), InvalidArgument,
             where, ": has ", layout.param_index_map.size(), " params but no buckets");
  SW_REQUIRE(layout.per_bucket_numel_unpadded.size() == layout.bucket_indices.size(), ShapeError,
             where, ": per_bucket_numel_unpadded has ", layout.per_bucket_numel_unpadded.size(),
             " entries for ", layout.bucket_indices.size(), " buckets");
  SW_REQUIRE(
      layout.param_indices.empty() || layout.param_indices.size() == layout.param_index_map.size(),
      ShapeError, where, ": param_indices has ", layout.param_indices.size(), " entries for ",
      layout.param_index_map.size(), " params");

  std::int64_t expected_start = 0;
  for (std::size_t b = 0; b < layout.bucket_indices.size(); ++b) {
    const BucketRange& bucket = layout.bucket_indices[b];
    SW_REQUIRE(bucket.start == expected_start && bucket.end >= bucket.start, InvalidArgument, where,
               ": bucket ", b, " is [", bucket.start, ", ", bucket.end,
               "), expected it to start at ", expected_start, " (buckets must be contiguous)");
    SW_REQUIRE(bucket.numel() % layout.num_shards == 0, ShapeError, where, ": bucket ", b, " has ",
               bucket.numel(), " elements, not divisible by num_shards ", layout.num_shards);
    const std::int64_t unpadded = layout.per_bucket_numel_unpadded[b];
    SW_REQUIRE(unpadded >= 0 && unpadded <= bucket.numel(), ShapeError, where, ": bucket ", b,
               " claims ", unpadded, " unpadded elements but holds ", bucket.numel());
    expected_start = bucket.end;
  }

  std::vector<bool> seen(params.size(), false);
  std::vector<const ParamRange*> by_start;
  by_start.reserve(layout.param_index_map.size());
  for (const ParamRange& range : layout.param_index_map) {
    SW_REQUIRE(range.param < params.size(), InvalidArgument, where, ": ",
               param_label(params, range.param), " is out of range (the model has ", params.size(),
               " params)");
    const ParamInfo& info = params[range.param];
    const std::string label = param_label(params, range.param);
    SW_REQUIRE(!seen[range.param], InvalidArgument, where, ": ", label, " is listed twice");
    seen[range.param] = true;
    SW_REQUIRE(range.numel() == info.numel(), ShapeError, where, ": ", label, " has ", info.numel(),
               " elements but the layout gives it [", range.start, ", ", range.end,
               ") = ", range.numel());
    SW_REQUIRE(storage_dtype(info.dtype) == key.param_dtype, ShapeError, where, ": ", label, " is ",
               dtype_name(info.dtype), " but the buffer stores ", dtype_name(key.param_dtype));
    SW_REQUIRE(!info.grad_dtype || *info.grad_dtype == key.grad_dtype, ShapeError, where, ": ",
               label, " has grad dtype ", dtype_name(info.grad_dtype.value_or(DType::kFloat32)),
               " but the buffer reduces in ", dtype_name(key.grad_dtype));
    SW_REQUIRE(info.expert_parallel == key.is_expert_parallel, InvalidArgument, where, ": ", label,
               info.expert_parallel ? " is" : " is not", " expert-parallel but the buffer ",
               key.is_expert_parallel ? "is" : "is not");
    SW_REQUIRE(
        range.bucket >= 0 && static_cast<std::size_t>(range.bucket) < layout.bucket_indices.size(),
        InvalidArgument, where, ": ", label, " is in bucket ", range.bucket, " but there are ",
        layout.bucket_indices.size(), " buckets");
    const BucketRange& bucket = layout.bucket_indices[static_cast<std::size_t>(range.bucket)];
    SW_REQUIRE(range.start >= bucket.start && range.end <= bucket.end, InvalidArgument, where, ": ",
               label, " at [", range.start, ", ", range.end, ") is outside its bucket ",
               range.bucket, " [", bucket.start, ", ", bucket.end, ")");
    by_start.push_back(&range);
  }
  std::sort(by_start.begin(), by_start.end(),
            [](const ParamRange* a, const ParamRange* b) { return a->start < b->start; });
  for (std::size_t i = 1; i < by_start.size(); ++i) {
    const ParamRange& prev = *by_start[i - 1];
    const ParamRange& cur = *by_start[i];
    SW_REQUIRE(prev.end <= cur.start, InvalidArgument, where, ": ", param_label(params, prev.param),
               " at [", prev.start, ", ", prev.end, ") overlaps ", param_label(params, cur.param),
               " at [", cur.start, ", ", cur.end, ")");
  }
}

ParamAndGradBuffer::ParamAndGradBuffer(const ParamList& params, const BufferKey& key,
                                       PerBufferParamLayout layout, double gradient_scaling_factor,
                                       BufferMemoryPtr memory)
    : key_(key), layout_(std::move(layout)), memory_(std::move(memory)) {
  SW_REQUIRE(memory_ != nullptr, InvalidArgument, "buffer ", key_.to_string(), ": no memory");
  validate_buffer_layout(params, key_, layout_);
  names_.reserve(params.size());
  for (const ParamInfo& p : params) names_.push_back(p.name);

  const std::int64_t n = layout_.numel();
  param_storage_ =
      memory_->allocate_zeroed(static_cast<std::size_t>(n) * dtype_size(key_.param_dtype));
  grad_storage_ =
      memory_->allocate_zeroed(static_cast<std::size_t>(n) * dtype_size(key_.grad_dtype));
  param_data_ = {param_storage_.get(), n, key_.param_dtype, memory_->device()};
  grad_data_ = {grad_storage_.get(), n, key_.grad_dtype, memory_->device()};

  for (std::size_t i = 0; i < layout_.param_index_map.size(); ++i) {
    index_of_[layout_.param_index_map[i].param] = i;
  }
  buckets_.reserve(layout_.bucket_indices.size());
  for (std::size_t b = 0; b < layout_.bucket_indices.size(); ++b) {
    Bucket bucket;
    bucket.index = static_cast<int>(b);
    bucket.range = layout_.bucket_indices[b];
    bucket.numel_unpadded = layout_.per_bucket_numel_unpadded[b];
    bucket.param_data = param_data_.slice(bucket.range.start, bucket.range.numel());
    bucket.grad_data = grad_data_.slice(bucket.range.start, bucket.range.numel());
    bucket.gradient_scaling_factor = gradient_scaling_factor;
    bucket.num_shards = layout_.num_shards;
    buckets_.push_back(std::move(bucket));
  }
  for (const ParamRange& range : layout_.param_index_map) {
    buckets_[static_cast<std::size_t>(range.bucket)].params.push_back(range.param);
  }
}

const ParamRange& ParamAndGradBuffer::range_of(ParamId param) const {
  auto it = index_of_.find(param);
  SW_REQUIRE(it != index_of_.end(), InvalidArgument,
             param < names_.size() ? str_cat("param '", names_[param], "' (id ", param, ")")
                                   : str_cat("param id ", param),
             " is not in buffer ", key_.to_string());
  return layout_.param_index_map[it->second];
}

TensorView ParamAndGradBuffer::param_view(ParamId param) const {
  const ParamRange& r = range_of(param);
  return param_data_.slice(r.start, r.numel());
}

TensorView ParamAndGradBuffer::grad_view(ParamId param) const {
  const ParamRange& r = range_of(param);
  return grad_data_.slice(r.start, r.numel());
}

void ParamAndGradBuffer::zero_grad() {
  if (grad_data_.numel > 0) memory_->zero(grad_data_);
}

void ParamAndGradBuffer::scale_bucket_grad(int bucket, double factor) {
  SW_CHECK(bucket >= 0 && static_cast<std::size_t>(bucket) < buckets_.size(), "bucket ", bucket);
  memory_->scale(buckets_[static_cast<std::size_t>(bucket)].grad_data, factor);
}

void scale_elements(TensorView view, double factor) {
  SW_REQUIRE(!view.on_device(), InvalidArgument, "scale_elements: the view lives on CUDA device ",
             view.device, "; only host memory is scaled here");
  if (factor == 1.0) return;
  const float f = static_cast<float>(factor);
  switch (view.dtype) {
    case DType::kFloat32: {
      float* p = view.as<float>();
      for (std::int64_t i = 0; i < view.numel; ++i) p[i] *= f;
      return;
    }
    case DType::kBFloat16:
    case DType::kFloat16: {
      // Widen a chunk to fp32, scale, narrow back (RNE), through a stack buffer.
      constexpr std::int64_t kChunk = 1024;
      float wide[kChunk];
      for (std::int64_t i = 0; i < view.numel; i += kChunk) {
        const std::int64_t n = std::min(kChunk, view.numel - i);
        const TensorView part = view.slice(i, n);
        convert_floats(part, {wide, n, DType::kFloat32}, "scale_elements");
        for (std::int64_t j = 0; j < n; ++j) wide[j] *= f;
        convert_floats({wide, n, DType::kFloat32}, part, "scale_elements");
      }
      return;
    }
    default:
      throw InvalidArgument(str_cat("cannot scale gradients of dtype ", dtype_name(view.dtype),
                                    " (gradients must be fp32, bf16 or fp16)"));
  }
}

namespace {

class HostBufferMemory final : public BufferMemory {
 public:
  int device() const override { return TensorView::kHostMemory; }
  std::shared_ptr<std::byte> allocate_zeroed(std::size_t nbytes) const override {
    auto storage = std::make_shared<AlignedStorage>(nbytes);
    return {storage, storage->data()};
  }
  void zero(TensorView view) const override {
    SW_REQUIRE(!view.on_device(), InvalidArgument,
               "host buffer memory asked to zero a view on "
               "CUDA device ",
               view.device);
    if (view.numel > 0) std::memset(view.data, 0, view.nbytes());
  }
  void scale(TensorView view, double factor) const override { scale_elements(view, factor); }
};

// Host memory whose allocations are symmetric memory of one group.
class SymmetricHostBufferMemory final : public BufferMemory {
 public:
  explicit SymmetricHostBufferMemory(ProcessGroupPtr group) : group_(std::move(group)) {}
  int device() const override { return TensorView::kHostMemory; }
  std::shared_ptr<std::byte> allocate_zeroed(std::size_t nbytes) const override {
    SymmetricMemoryPtr memory = allocate_symmetric_memory(group_, nbytes);
    std::byte* data = memory->data();
    return {std::move(memory), data};
  }
  void zero(TensorView view) const override { host_buffer_memory()->zero(view); }
  void scale(TensorView view, double factor) const override {
    host_buffer_memory()->scale(view, factor);
  }

 private:
  ProcessGroupPtr group_;
};

}  // namespace

const BufferMemoryPtr& host_buffer_memory() {
  static const BufferMemoryPtr memory = std::make_shared<HostBufferMemory>();
  return memory;
}

BufferMemoryPtr symmetric_host_buffer_memory(ProcessGroupPtr group) {
  SW_REQUIRE(group != nullptr, InvalidArgument, "symmetric_host_buffer_memory: the group is null");
  return std::make_shared<SymmetricHostBufferMemory>(std::move(group));
}

}  // namespace shardwise
