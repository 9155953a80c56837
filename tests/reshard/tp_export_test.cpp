// Megatron TP rules and the offline TP export: rules per weight kind, slices with known values,
// stride-3 QKV slices reassembling to the original, the index-arithmetic slicer agreeing with the
// box-based sharding spec, and MXFP8 output equal to quantize_mxfp8 of the slice.
#include "shardwise/reshard/tp_export.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "shardwise/core/float_convert.hpp"

namespace shardwise {
namespace {

using Shape = std::vector<std::int64_t>;

std::int64_t shape_numel(const Shape& s) {
  std::int64_t n = 1;
  for (auto x : s) n *= x;
  return n;
}

std::vector<float> iota_tensor(const Shape& shape) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

std::vector<float> as_floats(const std::vector<std::uint8_t>& bytes) {
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

std::vector<float> slice_of(const std::string& name, const std::vector<float>& full,
                            const Shape& shape, int tp, int rank) {
  return as_floats(
      extract_tp_slice(name, full.data(), shape, 4, megatron_tp_rule(name, shape), tp, rank));
}

TEST(MegatronTpRule, EachWeightKindOfTheGptModel) {
  const TpRule column{TpKind::kColumnParallel, 0, 1};
  const TpRule qkv{TpKind::kColumnParallel, 0, 3};
  const TpRule row{TpKind::kRowParallel, 1, 1};
  const TpRule replicated{};
  EXPECT_EQ(megatron_tp_rule("layers.0.attention.qkv.weight", {12, 4}), qkv);
  EXPECT_EQ(megatron_tp_rule("layers.0.attention.qkv.bias", {12}), qkv);
  EXPECT_EQ(megatron_tp_rule("layers.1.mlp.fc1.weight", {16, 4}), column);
  EXPECT_EQ(megatron_tp_rule("layers.1.mlp.fc1.bias", {16}), column);
  EXPECT_EQ(megatron_tp_rule("embedding.word_embeddings.weight", {32, 4}), column);
  EXPECT_EQ(megatron_tp_rule("output_layer.weight", {32, 4}), column);
  EXPECT_EQ(megatron_tp_rule("layers.0.attention.proj.weight", {4, 4}), row);
  EXPECT_EQ(megatron_tp_rule("layers.0.mlp.fc2.weight", {4, 16}), row);
  // Megatron-Core names.
  EXPECT_EQ(megatron_tp_rule("decoder.layers.0.self_attention.linear_qkv.weight", {12, 4}), qkv);
  EXPECT_EQ(megatron_tp_rule("decoder.layers.0.mlp.linear_fc2.weight", {4, 16}), row);
  EXPECT_EQ(megatron_tp_rule("decoder.layers.0.self_attention.linear_proj.weight", {4, 4}), row);
  EXPECT_EQ(megatron_tp_rule("decoder.layers.0.mlp.linear_fc1.bias", {16}), column);
  // Other naming schemes are matched by whole module names, not name endings: Hugging Face's
  // q_proj / up_proj (column-parallel in Megatron terms) ended in "proj" and were split as rows.
  for (const char* name :
       {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.up_proj.weight",
        "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.xfc1.weight",
        "lm_output_layer.weight", "layers.0.attention.qkv.weight_scale"}) {
    EXPECT_EQ(megatron_tp_rule(name, {4, 4}), replicated) << name;
  }
  for (const char* name :
       {"layers.0.attention.proj.bias", "layers.0.mlp.fc2.bias", "layers.0.input_layernorm.weight",
        "layers.0.post_attention_layernorm.bias", "final_layernorm.weight",
        "embedding.position_embeddings.weight"}) {
    EXPECT_EQ(megatron_tp_rule(name, {4}), replicated) << name;
  }
  EXPECT_THROW(megatron_tp_rule("layers.0.attention.proj.weight", {16}), InvalidArgument);
  EXPECT_THROW(megatron_tp_rule("layers.0.mlp.fc1.bias", {4, 4}), InvalidArgument);
}

TEST(MegatronTpRule, Mxfp8CandidatesAreTheTwoDimensionalNonEmbeddingWeights) {
  EXPECT_TRUE(is_mxfp8_refit_candidate("layers.0.attention.qkv.weight", {12, 4}));
  EXPECT_TRUE(is_mxfp8_refit_candidate("layers.0.mlp.fc2.weight", {4, 16}));
  EXPECT_FALSE(is_mxfp8_refit_candidate("layers.0.mlp.fc1.bias", {16}));
  EXPECT_FALSE(is_mxfp8_refit_candidate("embedding.word_embeddings.weight", {32, 4}));
  EXPECT_FALSE(is_mxfp8_refit_candidate("embedding.position_embeddings.weight", {8, 4}));
  EXPECT_FALSE(is_mxfp8_refit_candidate("output_layer.weight", {32, 4}));
}

TEST(TpSlice, ColumnParallelTakesContiguousRows) {
  const Shape shape{8, 3};
  const auto full = iota_tensor(shape);
  EXPECT_EQ(slice_of("mlp.fc1.weight", full, shape, 2, 0),
            (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(slice_of("mlp.fc1.weight", full, shape, 4, 3),
            (std::vector<float>{18, 19, 20, 21, 22, 23}));
  EXPECT_EQ(slice_of("mlp.fc1.bias", iota_tensor({8}), {8}, 4, 1), (std::vector<float>{2, 3}));
}

TEST(TpSlice, RowParallelTakesColumnsOfEveryRow) {
  const Shape shape{2, 6};
  const auto full = iota_tensor(shape);
  EXPECT_EQ(slice_of("attention.proj.weight", full, shape, 2, 1),
            (std::vector<float>{3, 4, 5, 9, 10, 11}));
  EXPECT_EQ(slice_of("mlp.fc2.weight", full, shape, 3, 0), (std::vector<float>{0, 1, 6, 7}));
  // Row-parallel biases are replicated.
  EXPECT_EQ(slice_of("mlp.fc2.bias", iota_tensor({2}), {2}, 2, 1), (std::vector<float>{0, 1}));
}

TEST(TpSlice, QkvStrideThreeGivesEachRankItsHeadsQkv) {
  // H = 4, qkv rows: q 0..3, k 4..7, v 8..11; one column so the values are the row indices.
  const Shape shape{12, 1};
  const auto full = iota_tensor(shape);
  EXPECT_EQ(slice_of("attention.qkv.weight", full, shape, 2, 0),
            (std::vector<float>{0, 1, 4, 5, 8, 9}));
  EXPECT_EQ(slice_of("attention.qkv.weight", full, shape, 2, 1),
            (std::vector<float>{2, 3, 6, 7, 10, 11}));
  EXPECT_EQ(slice_of("attention.qkv.bias", iota_tensor({12}), {12}, 4, 3),
            (std::vector<float>{3, 7, 11}));
}

TEST(TpSlice, QkvSlicesReassembleToTheOriginal) {
  std::mt19937 rng(7);
  for (int tp : {1, 2, 4}) {
    for (std::int64_t heads_per_rank : {1, 3}) {
      const std::int64_t h = tp * heads_per_rank * 2;  // head dim 2
      const std::int64_t cols = 1 + static_cast<std::int64_t>(rng() % 40);
      const Shape shape{3 * h, cols};
      std::vector<float> full(static_cast<std::size_t>(shape_numel(shape)));
      for (float& x : full) x = std::uniform_real_distribution<float>(-1, 1)(rng);
      // Reassemble: local row j of rank t is part (j / part) of q/k/v, row j % part of the
      // rank's share of that part.
      std::vector<float> rebuilt(full.size(), 0.0f);
      const std::int64_t part = h / tp;
      for (int t = 0; t < tp; ++t) {
        const auto local = slice_of("attention.qkv.weight", full, shape, tp, t);
        ASSERT_EQ(static_cast<std::int64_t>(local.size()), 3 * part * cols);
        for (std::int64_t j = 0; j < 3 * part; ++j) {
          const std::int64_t global_row = (j / part) * h + t * part + j % part;
          std::copy_n(local.begin() + j * cols, cols, rebuilt.begin() + global_row * cols);
        }
      }
      EXPECT_EQ(rebuilt, full) << "tp " << tp << " h " << h;
    }
  }
}

TEST(TpSlice, IndexArithmeticAgreesWithTheShardingSpecBoxes) {
  const std::vector<std::pair<std::string, Shape>> params{
      {"l.attention.qkv.weight", {48, 20}},  {"l.attention.qkv.bias", {48}},
      {"l.attention.proj.weight", {16, 24}}, {"l.mlp.fc1.weight", {32, 16}},
      {"l.mlp.fc2.weight", {16, 32}},        {"embedding.word_embeddings.weight", {64, 16}},
      {"l.input_layernorm.weight", {16}}};
  for (const auto& [name, shape] : params) {
    const TpRule rule = megatron_tp_rule(name, shape);
    const auto full = iota_tensor(shape);
    for (int tp : {1, 2, 4}) {
      const ShardingSpec spec = tp_sharding(name, shape, rule, tp, 3);
      for (int t = 0; t < tp; ++t) {
        // The rank's boxes, concatenated along the split dim, form its local tensor.
        const Shape local_shape = tp_local_shape(shape, rule, tp);
        std::vector<float> expected(static_cast<std::size_t>(shape_numel(local_shape)));
        std::int64_t along = 0;
        for (const Box& b : spec.boxes_of(3 + t)) {
          Box dst = Box::whole(local_shape);
          const auto d =
              static_cast<std::size_t>(rule.kind == TpKind::kReplicated ? 0 : rule.partition_dim);
          const std::int64_t extent = b.ranges[d].stop - b.ranges[d].start;
          dst.ranges[d] = {along, along + extent};
          along += extent;
          copy_box(full.data(), shape, b, expected.data(), local_shape, dst, 4);
        }
        EXPECT_EQ(slice_of(name, full, shape, tp, t), expected)
            << name << " tp " << tp << " rank " << t;
      }
    }
  }
}

TEST(TpSlice, IndivisibleSplitNamesTheParam) {
  const Shape shape{6, 4};
  const auto full = iota_tensor(shape);
  try {
    slice_of("layers.3.mlp.fc1.weight", full, shape, 4, 0);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("layers.3.mlp.fc1.weight"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("not divisible by tp 4"), std::string::npos);
  }
  // QKV needs tp x 3 to divide dim 0: 16 rows do not split into 3 x 4 parts
  // although tp 4 divides 16; 24 rows do.
  const Shape qkv{16, 4};
  EXPECT_THROW(slice_of("attention.qkv.weight", iota_tensor(qkv), qkv, 4, 0), InvalidArgument);
  EXPECT_NO_THROW(slice_of("attention.qkv.weight", iota_tensor({24, 4}), {24, 4}, 4, 0));
  EXPECT_THROW(slice_of("mlp.fc1.weight", full, shape, 2, 2), InvalidArgument);
}

std::vector<SourceTensor> model_tensors(
    const std::map<std::string, std::pair<Shape, std::vector<float>>>& store) {
  std::vector<SourceTensor> out;
  for (const auto& [name, entry] : store) {
    out.push_back({name, DType::kFloat32, entry.first, entry.second.data()});
  }
  return out;
}

std::map<std::string, std::pair<Shape, std::vector<float>>> tiny_model() {
  std::mt19937 rng(11);
  std::map<std::string, std::pair<Shape, std::vector<float>>> store;
  const auto add = [&](const std::string& name, Shape shape) {
    std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
    std::int64_t i = 0;
    for (float& x : v) {
      // Block-dependent magnitudes so MXFP8 scales differ between blocks.
      x = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng),
                     static_cast<int>((i++ / 32) % 9) - 4);
    }
    store[name] = {shape, v};
  };
  add("embedding.word_embeddings.weight", {64, 64});
  add("layers.0.attention.qkv.weight", {192, 64});
  add("layers.0.attention.qkv.bias", {192});
  add("layers.0.attention.proj.weight", {64, 64});
  add("layers.0.mlp.fc1.weight", {128, 64});
  add("layers.0.mlp.fc2.weight", {64, 128});
  add("layers.0.mlp.fc2.bias", {64});
  add("final_layernorm.weight", {64});
  return store;
}

TEST(TpExport, PlainExportIsTheSliceInTheSourceDtype) {
  const auto store = tiny_model();
  const auto tensors = model_tensors(store);
  TpExportOptions options;
  options.tp = 2;
  const auto out = export_tp_rank(tensors, options, 1);
  ASSERT_EQ(out.size(), tensors.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto& [shape, values] = store.at(tensors[i].name);
    EXPECT_EQ(out[i].name, tensors[i].name);
    EXPECT_EQ(out[i].dtype, DType::kFloat32);
    EXPECT_EQ(out[i].shape, tp_local_shape(shape, megatron_tp_rule(out[i].name, shape), 2));
    EXPECT_EQ(as_floats(out[i].bytes), slice_of(out[i].name, values, shape, 2, 1)) << out[i].name;
  }
}

TEST(TpExport, Mxfp8OutputEqualsQuantizeOfTheSlice) {
  const auto store = tiny_model();
  const auto tensors = model_tensors(store);
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    TpExportOptions options;
    options.tp = 2;
    options.mxfp8 = true;
    if (dtype == DType::kBFloat16) options.dtype = dtype;
    const auto out = export_tp_rank(tensors, options, 0);
    std::map<std::string, const ExportedTensor*> by_name;
    for (const auto& t : out) by_name[t.name] = &t;
    for (const auto& [name, entry] : store) {
      const auto& [shape, values] = entry;
      const auto slice = slice_of(name, values, shape, 2, 0);
      const Shape local = tp_local_shape(shape, megatron_tp_rule(name, shape), 2);
      // The values the export quantizes: the slice in the chosen dtype.
      std::vector<std::uint16_t> bf16(slice.size());
      for (std::size_t i = 0; i < slice.size(); ++i) bf16[i] = float_to_bf16(slice[i]);
      const TensorView input =
          dtype == DType::kFloat32
              ? TensorView{const_cast<float*>(slice.data()),
                           static_cast<std::int64_t>(slice.size()), dtype}
              : TensorView{bf16.data(), static_cast<std::int64_t>(bf16.size()), dtype};
      ASSERT_TRUE(by_name.count(name)) << name;
      const ExportedTensor& got = *by_name[name];
      if (!is_mxfp8_refit_candidate(name, shape)) {
        EXPECT_EQ(by_name.count(name + "_scale"), 0u) << name;
        EXPECT_EQ(got.dtype, dtype) << name;
        EXPECT_EQ(got.bytes.size(), input.nbytes());
        EXPECT_EQ(std::memcmp(got.bytes.data(), input.data, input.nbytes()), 0) << name;
        continue;
      }
      const Mxfp8Tensor expected = quantize_mxfp8(input, local[0], local[1]);
      ASSERT_TRUE(by_name.count(name + "_scale")) << name;
      const ExportedTensor& scale = *by_name[name + "_scale"];
      EXPECT_EQ(got.dtype, DType::kFloat8E4M3);
      EXPECT_EQ(got.shape, local);
      EXPECT_EQ(got.bytes, expected.data) << name;
      EXPECT_EQ(scale.dtype, DType::kFloat8E8M0);
      EXPECT_EQ(scale.shape, (Shape{local[0], (local[1] + 31) / 32}));
      EXPECT_EQ(scale.bytes, expected.scale) << name;
    }
  }
}

TEST(TpExport, MetadataDescribesEveryTensor) {
  const auto store = tiny_model();
  const auto tensors = model_tensors(store);
  TpExportOptions options;
  options.tp = 4;
  options.mxfp8 = true;
  const auto meta = tp_export_metadata(tensors, options, 3);
  EXPECT_EQ(meta.at("format"), kTpExportFormat);
  EXPECT_EQ(meta.at("tp_size"), "4");
  EXPECT_EQ(meta.at("tp_rank"), "3");
  EXPECT_EQ(meta.at("mxfp8_scale_rule"), "ceil");
  const auto json = nlohmann::json::parse(meta.at("tensors"));
  EXPECT_EQ(json.size(), tensors.size());
  const auto& qkv = json.at("layers.0.attention.qkv.weight");
  EXPECT_EQ(qkv.at("rule"), "column");
  EXPECT_EQ(qkv.at("stride"), 3);
  EXPECT_EQ(qkv.at("local_shape"), (Shape{48, 64}));
  EXPECT_EQ(qkv.at("format"), "mxfp8");
  EXPECT_EQ(json.at("layers.0.mlp.fc2.weight").at("partition_dim"), 1);
  EXPECT_EQ(json.at("layers.0.mlp.fc2.bias").at("rule"), "replicated");
  EXPECT_EQ(json.at("embedding.word_embeddings.weight").at("format"), "plain");
  EXPECT_EQ(tp_export_file_name(3, 4), "tp-rank-03-of-04.safetensors");
}

TEST(TpExport, RejectsBadInputNamingTheParam) {
  auto store = tiny_model();
  auto tensors = model_tensors(store);
  TpExportOptions options;
  options.tp = 3;  // 64 is not divisible by 3
  try {
    check_tp_export(tensors, options);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("embedding.word_embeddings.weight"), std::string::npos)
        << e.what();
  }
  options.tp = 2;
  options.mxfp8 = true;
  std::vector<float> clash(64 * 2);
  tensors.push_back({"layers.0.mlp.fc2.weight_scale", DType::kFloat32, {64, 2}, clash.data()});
  EXPECT_THROW(check_tp_export(tensors, options), InvalidArgument);
  options.mxfp8 = false;
  EXPECT_NO_THROW(check_tp_export(tensors, options));
  options.dtype = DType::kUInt8;
  EXPECT_THROW(check_tp_export(tensors, options), InvalidArgument);
}

TEST(TpExport, ExportDtypesAreTheThreeFloatsOfSixteenOrThirtyTwoBits) {
  for (DType d : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    EXPECT_TRUE(is_export_dtype(d)) << dtype_name(d);
  }
  for (DType d : {DType::kFloat64, DType::kFloat8E4M3, DType::kFloat8E8M0, DType::kInt32,
                  DType::kUInt8, DType::kBool}) {
    EXPECT_FALSE(is_export_dtype(d)) << dtype_name(d);
  }
}

}  // namespace
}  // namespace shardwise
