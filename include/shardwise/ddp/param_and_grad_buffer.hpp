// ParamAndGradBuffer: one contiguous param buffer and one contiguous grad buffer per BufferKey,
// sized and laid out by the optimizer's PerBufferParamLayout. Every param's value and gradient
// (main_grad) is a view into them, and a Bucket is a contiguous slice of both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "shardwise/core/tensor_view.hpp"
#include "shardwise/ddp/buffer_memory.hpp"
#include "shardwise/layout/param_info.hpp"
#include "shardwise/layout/param_layout.hpp"

namespace shardwise {

// Zero-initialised, 64-byte aligned bytes that never move (views into them stay valid).
class AlignedStorage {
 public:
  AlignedStorage() = default;
  explicit AlignedStorage(std::size_t nbytes);
  std::byte* data() const { return data_.get(); }
  std::size_t nbytes() const { return nbytes_; }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte[], Free> data_;
  std::size_t nbytes_ = 0;
};

// A contiguous run of a buffer's params, reduced (and gathered) by one collective.
struct Bucket {
  int index = 0;                         // index within its buffer (backprop order)
  BucketRange range;                     // [start, end) in buffer elements
  std::int64_t numel_unpadded = 0;       // elements belonging to params (the rest is padding)
  TensorView param_data;                 // this bucket's slice of the param buffer
  TensorView grad_data;                  // this bucket's slice of the grad buffer
  std::vector<ParamId> params;           // backprop order
  double gradient_scaling_factor = 1.0;  // applied to grad_data before the collective
  int num_shards = 1;

  std::int64_t numel() const { return range.numel(); }
  std::int64_t shard_size() const { return range.numel() / num_shards; }
  // Shard `shard` of this bucket in buffer coordinates.
  BucketRange shard_range(int shard) const;
  // Shard `shard` of param_data / grad_data (what a reduce-scatter writes / all-gather reads).
  TensorView param_shard(int shard) const;
  TensorView grad_shard(int shard) const;
};

class ParamAndGradBuffer {
 public:
  // Validates `layout` against `params` (see validate_buffer_layout) and allocates zeroed
  // storage from `memory`: param_data in key.param_dtype, grad_data in key.grad_dtype.
  ParamAndGradBuffer(const ParamList& params, const BufferKey& key, PerBufferParamLayout layout,
                     double gradient_scaling_factor, BufferMemoryPtr memory = host_buffer_memory());

  ParamAndGradBuffer(const ParamAndGradBuffer&) = delete;
  ParamAndGradBuffer& operator=(const ParamAndGradBuffer&) = delete;

  const BufferKey& key() const { return key_; }
  const PerBufferParamLayout& layout() const { return layout_; }
  std::int64_t numel() const { return layout_.numel(); }
  std::int64_t numel_unpadded() const { return layout_.numel_unpadded(); }

  const BufferMemory& memory() const { return *memory_; }
  TensorView param_data() const { return param_data_; }
  TensorView grad_data() const { return grad_data_; }

  bool contains(ParamId param) const { return index_of_.count(param) != 0; }
  // Range of a param in this buffer; throws InvalidArgument naming the param when absent.
  const ParamRange& range_of(ParamId param) const;
  // The param's value / gradient (main_grad): views at the layout's offsets.
  TensorView param_view(ParamId param) const;
  TensorView grad_view(ParamId param) const;

  const std::vector<Bucket>& buckets() const { return buckets_; }
  std::vector<Bucket>& buckets() { return buckets_; }
  int bucket_of(ParamId param) const { return range_of(param).bucket; }

  // Params in backprop order (the layout's order).
  const std::vector<ParamRange>& params() const { return layout_.param_index_map; }

  void zero_grad();
  // Multiplies the gradients of one bucket by `factor` (in the grad dtype's precision).
  void scale_bucket_grad(int bucket, double factor);

 private:
  BufferKey key_;
  PerBufferParamLayout layout_;
  std::vector<std::string> names_;  // per param of the model, for messages
  BufferMemoryPtr memory_;
  std::shared_ptr<std::byte> param_storage_;
  std::shared_ptr<std::byte> grad_storage_;
  TensorView param_data_;
  TensorView grad_data_;
  std::map<ParamId, std::size_t> index_of_;  // param -> position in layout_.param_index_map
  std::vector<Bucket> buckets_;
};

// Checks that `layout` can back a buffer of `key` for `params`: every param id in range and
// listed once, its numel and dtypes match the key (ShapeError), its range inside its bucket,
// buckets contiguous from 0 and divisible by num_shards, unpadded counts consistent, and no two
// params overlap. Throws InvalidArgument / ShapeError naming the buffer and the param.
void validate_buffer_layout(const ParamList& params, const BufferKey& key,
                            const PerBufferParamLayout& layout);

// Scales the elements of a host view by `factor` (fp32, bf16, fp16); InvalidArgument for a
// device view.
void scale_elements(TensorView view, double factor);

}  // namespace shardwise
