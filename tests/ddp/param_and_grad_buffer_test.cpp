#include "shardwise/ddp/param_and_grad_buffer.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "ddp_test_support.hpp"
#include "shardwise/core/float_convert.hpp"

namespace shardwise {
namespace {

using testing_support::expect_error;
using testing_support::make_param;
using testing_support::pack_layout;

ParamList three_params(DType dtype = DType::kFloat32) {
  return {make_param("embed", {4, 3}, dtype), make_param("w1", {5}, dtype),
          make_param("w2", {2, 2}, dtype)};
}

BufferKey fp32_key() { return {DType::kFloat32, DType::kFloat32, false, false}; }

TEST(ParamAndGradBuffer, ViewsAliasStorageAtLayoutOffsets) {
  const ParamList params = three_params(DType::kBFloat16);
  // Backprop order: w2, w1 | embed; 2 shards.
  const PerBufferParamLayout layout = pack_layout(params, {{2, 1}, {0}}, 2);
  const BufferKey key{DType::kBFloat16, DType::kFloat32, false, false};
  ParamAndGradBuffer buffer(params, key, layout, 0.5);

  ASSERT_EQ(buffer.numel(), 10 + 12);  // bucket 0: 4+5 -> padded to 10; bucket 1: 12
  EXPECT_EQ(buffer.numel_unpadded(), 21);
  EXPECT_EQ(buffer.param_data().dtype, DType::kBFloat16);
  EXPECT_EQ(buffer.grad_data().dtype, DType::kFloat32);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.param_data().data) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.grad_data().data) % 64, 0u);

  const std::int64_t expected_start[] = {10, 4, 0};  // embed, w1, w2
  for (ParamId id = 0; id < 3; ++id) {
    const TensorView p = buffer.param_view(id);
    const TensorView g = buffer.grad_view(id);
    EXPECT_EQ(p.data, static_cast<std::byte*>(buffer.param_data().data) + expected_start[id] * 2);
    EXPECT_EQ(g.data, static_cast<std::byte*>(buffer.grad_data().data) + expected_start[id] * 4);
    EXPECT_EQ(p.numel, params[id].numel());
    EXPECT_EQ(g.numel, params[id].numel());
    EXPECT_EQ(p.dtype, DType::kBFloat16);
    EXPECT_EQ(g.dtype, DType::kFloat32);
  }
  // Writes through a view land in the buffer (and storage starts zeroed).
  float* grads = buffer.grad_data().as<float>();
  for (std::int64_t i = 0; i < buffer.numel(); ++i) EXPECT_EQ(grads[i], 0.0f);
  buffer.grad_view(1).as<float>()[2] = 7.0f;
  EXPECT_EQ(grads[4 + 2], 7.0f);
  buffer.param_view(0).as<bf16_bits>()[0] = float_to_bf16(1.5f);
  EXPECT_EQ(bf16_to_float(buffer.param_data().as<bf16_bits>()[10]), 1.5f);

  ASSERT_EQ(buffer.buckets().size(), 2u);
  const Bucket& b0 = buffer.buckets()[0];
  EXPECT_EQ(b0.range, (BucketRange{0, 10}));
  EXPECT_EQ(b0.numel_unpadded, 9);
  EXPECT_EQ(b0.params, (std::vector<ParamId>{2, 1}));
  EXPECT_EQ(b0.gradient_scaling_factor, 0.5);
  EXPECT_EQ(b0.shard_size(), 5);
  EXPECT_EQ(b0.shard_range(1), (BucketRange{5, 10}));
  EXPECT_EQ(b0.grad_shard(1).data, static_cast<std::byte*>(buffer.grad_data().data) + 5 * 4);
  const Bucket& b1 = buffer.buckets()[1];
  EXPECT_EQ(b1.range, (BucketRange{10, 22}));
  EXPECT_EQ(b1.param_data.data, static_cast<std::byte*>(buffer.param_data().data) + 10 * 2);
  EXPECT_EQ(b1.shard_range(0), (BucketRange{10, 16}));
  EXPECT_EQ(b1.param_shard(1).data, static_cast<std::byte*>(buffer.param_data().data) + 16 * 2);
  EXPECT_EQ(buffer.bucket_of(0), 1);
  EXPECT_EQ(buffer.bucket_of(2), 0);

  buffer.zero_grad();
  EXPECT_EQ(grads[6], 0.0f);
}

TEST(ParamAndGradBuffer, ScalesBucketGradsInTheirDtype) {
  const ParamList params = three_params(DType::kBFloat16);
  const PerBufferParamLayout layout = pack_layout(params, {{2, 1}, {0}}, 1);
  ParamAndGradBuffer buffer(params, {DType::kBFloat16, DType::kBFloat16, false, false}, layout,
                            0.25);
  bf16_bits* g = buffer.grad_data().as<bf16_bits>();
  g[0] = float_to_bf16(3.0f);
  g[9] = float_to_bf16(1.0f / 3.0f);  // bucket 1
  buffer.scale_bucket_grad(0, 1.0 / 3.0);
  EXPECT_EQ(g[0],
            float_to_bf16(bf16_to_float(float_to_bf16(3.0f)) * static_cast<float>(1.0 / 3.0)));
  EXPECT_EQ(g[9], float_to_bf16(1.0f / 3.0f));  // other bucket untouched
}

TEST(ParamAndGradBuffer, UnknownParamIsNamed) {
  const ParamList params = three_params();
  ParamAndGradBuffer buffer(params, fp32_key(), pack_layout(params, {{2, 1}}, 1), 1.0);
  expect_error<InvalidArgument>([&] { buffer.param_view(0); }, {"'embed'", "not in buffer"});
}

TEST(ValidateBufferLayout, RejectsEachKindOfMismatch) {
  const ParamList params = three_params();
  const BufferKey key = fp32_key();
  const PerBufferParamLayout good = pack_layout(params, {{2, 1}, {0}}, 2);
  EXPECT_NO_THROW(validate_buffer_layout(params, key, good));

  {
    PerBufferParamLayout bad = good;
    bad.param_index_map[0].param = 9;
    expect_error<InvalidArgument>([&] { validate_buffer_layout(params, key, bad); },
                                  {"param id 9", "out of range"});
  }
  {
    PerBufferParamLayout bad = good;
    bad.param_index_map[1].param = 2;
    bad.param_index_map[1].end = bad.param_index_map[1].start + 4;
    expect_error<InvalidArgument>([&] { validate_buffer_layout(params, key, bad); },
                                  {"'w2'", "listed twice"});
  }
  {
    PerBufferParamLayout bad = good;
    bad.param_index_map[1].end += 1;  // w1 claims 6 elements
    expect_error<ShapeError>([&] { validate_buffer_layout(params, key, bad); },
                             {"'w1'", "5 elements"});
  }
  {
    PerBufferParamLayout bad = good;
    bad.param_index_map[1].start -= 1;  // w1 [3, 8) overlaps w2 [0, 4)
    bad.param_index_map[1].end -= 1;
    expect_error<InvalidArgument>([&] { validate_buffer_layout(params, key, bad); },
                                  {"'w2'", "overlaps", "'w1'"});
  }
  {
    PerBufferParamLayout bad = good;
    bad.param_index_map[2].bucket = 0;  // embed [10, 22) is outside bucket 0 [0, 10)
    expect_error<InvalidArgument>([&] { validate_buffer_layout(params, key, bad); },
                                  {"'embed'", "outside its bucket 0"});
  }
  {
    PerBufferParamLayout bad = good;
    bad.param_index_map[2].bucket = 5;
    expect_error<InvalidArgument>([&] { validate_buffer_layout(params, key, bad); },
                                  {"'embed'", "bucket 5"});
  }
  {
    PerBufferParamLayout bad = good;
    bad.bucket_indices[1].start = 11;
    expect_error<InvalidArgument>([&] { validate_buffer_layout(params, key, bad); },
                                  {"bucket 1", "contiguous"});
  }
  {
    PerBufferParamLayout bad = good;
    bad.num_shards = 4;  // bucket 0 has 10 elements
    expect_error<ShapeError>([&] { validate_buffer_layout(params, key, bad); },
                             {"bucket 0", "num_shards 4"});
  }
  {
    PerBufferParamLayout bad = good;
    bad.per_bucket_numel_unpadded.pop_back();
    expect_error<ShapeError>([&] { validate_buffer_layout(params, key, bad); },
                             {"per_bucket_numel_unpadded"});
  }
  {
    const BufferKey bf16_key{DType::kBFloat16, DType::kFloat32, false, false};
    expect_error<ShapeError>([&] { validate_buffer_layout(params, bf16_key, good); },
                             {"'w2'", "fp32", "bf16"});
  }
  {
    const BufferKey expert_key{DType::kFloat32, DType::kFloat32, true, false};
    expect_error<InvalidArgument>([&] { validate_buffer_layout(params, expert_key, good); },
                                  {"'w2'", "expert-parallel"});
  }
  {
    ParamList with_grad = params;
    with_grad[1].grad_dtype = DType::kBFloat16;
    expect_error<ShapeError>([&] { validate_buffer_layout(with_grad, key, good); },
                             {"'w1'", "grad dtype bf16"});
  }
  {
    const BufferKey int_grads{DType::kFloat32, DType::kInt32, false, false};
    expect_error<InvalidArgument>([&] { validate_buffer_layout(params, int_grads, good); },
                                  {"gradients must be"});
  }
}

TEST(ValidateBufferLayout, Fp8ParamsAreStoredAsBytes) {
  const ParamList params = {make_param("w", {8}, DType::kFloat8E4M3)};
  const PerBufferParamLayout layout = pack_layout(params, {{0}}, 1);
  EXPECT_NO_THROW(
      validate_buffer_layout(params, {DType::kUInt8, DType::kFloat32, false, false}, layout));
}

}  // namespace
}  // namespace shardwise
