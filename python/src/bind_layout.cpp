// Layout bindings: ParamInfo in, one plain dict per buffer out (the Python side turns them into
// Megatron-shaped BufferKey / PerBufferParamLayout objects keyed by the caller's param objects).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "layout_dict.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/layout_algorithms.hpp"
#include "shardwise/layout/model_zoo.hpp"

namespace py = pybind11;

namespace shardwise::python {
namespace {

LayoutAlgorithm parse_algorithm(const std::string& name) {
  if (name == "layer-wise" || name == "layerwise") return LayoutAlgorithm::kLayerWise;
  if (name == "distributed") return LayoutAlgorithm::kDistributed;
  if (name == "ddp" || name == "none" || name == "default") return LayoutAlgorithm::kDefault;
  throw InvalidArgument(
      str_cat("optimizer: unknown layout '", name, "' (valid: layer-wise, distributed, ddp)"));
}

py::list compute_layout(const ParamList& params, const std::string& algorithm, int dp,
                        std::optional<int> expert_dp, std::optional<std::int64_t> bucket_size,
                        bool grad_reduce_in_fp32, bool high_nccl_busbw, bool all_layer_wise) {
  LayoutOptions options;
  options.algorithm = parse_algorithm(algorithm);
  options.data_parallel_size = dp;
  options.expert_data_parallel_size = expert_dp;
  options.bucket_size = bucket_size;
  options.grad_reduce_in_fp32 = grad_reduce_in_fp32;
  options.pad_buckets_for_high_nccl_busbw = high_nccl_busbw;
  options.all_layer_wise = all_layer_wise;
  options.validate();
  FullParamLayout layout;
  {
    py::gil_scoped_release released;  // large models take a while; let other threads run
    layout = compute_full_param_layout(params, options);
    validate_full_layout(params, layout, options);
  }
  py::list out;
  for (const auto& [key, buffer] : layout.layouts) out.append(buffer_to_dict(key, buffer));
  return out;
}

}  // namespace

py::dict buffer_to_dict(const BufferKey& key, const PerBufferParamLayout& layout) {
  py::list index_map, buckets;
  for (const ParamRange& r : layout.param_index_map) {
    index_map.append(py::make_tuple(r.param, r.start, r.end, r.bucket));
  }
  for (const BucketRange& b : layout.bucket_indices) buckets.append(py::make_tuple(b.start, b.end));
  py::dict out;
  out["param_dtype"] = std::string(dtype_name(key.param_dtype));
  out["grad_dtype"] = std::string(dtype_name(key.grad_dtype));
  out["is_expert_parallel"] = key.is_expert_parallel;
  out["is_layer_wise"] = key.is_layer_wise;
  out["param_index_map"] = index_map;
  out["bucket_indices"] = buckets;
  out["per_bucket_numel_unpadded"] = layout.per_bucket_numel_unpadded;
  out["param_indices"] = layout.param_indices;
  out["num_shards"] = layout.num_shards;
  out["shard_aligned"] = layout.shard_aligned;
  return out;
}

void bind_layout(py::module_& m) {
  py::class_<ParamInfo>(m, "ParamInfo", "One parameter as the layout and DDP layers see it")
      .def(py::init([](std::string name, std::vector<std::int64_t> shape, const std::string& dtype,
                       std::optional<std::string> grad_dtype, bool shared_embedding,
                       bool expert_parallel, bool embedding_or_output, std::optional<bool> use_muon,
                       std::vector<std::int64_t> qkv_split) {
             ParamInfo p;
             p.name = std::move(name);
             p.shape = std::move(shape);
             p.dtype = dtype_from_name(dtype, str_cat("dtype of param '", p.name, "'"));
             if (grad_dtype) {
               p.grad_dtype =
                   dtype_from_name(*grad_dtype, str_cat("grad dtype of param '", p.name, "'"));
             }
             p.shared_embedding = shared_embedding;
             p.expert_parallel = expert_parallel;
             p.embedding_or_output = embedding_or_output;
             p.use_muon = use_muon;
             p.qkv_split = std::move(qkv_split);
             if (const std::optional<std::string> problem = qkv_split_problem(p)) {
               throw ShapeError(str_cat("param '", p.name, "': qkv_split ", *problem));
             }
             return p;
           }),
           py::arg("name"), py::arg("shape"), py::arg("dtype") = "fp32",
           py::arg("grad_dtype") = py::none(), py::arg("shared_embedding") = false,
           py::arg("expert_parallel") = false, py::arg("embedding_or_output") = false,
           py::arg("use_muon") = py::none(), py::arg("qkv_split") = std::vector<std::int64_t>{})
      .def_readonly("name", &ParamInfo::name)
      .def_readonly("shape", &ParamInfo::shape)
      .def_property_readonly("dtype",
                             [](const ParamInfo& p) { return std::string(dtype_name(p.dtype)); })
      .def_readonly("shared_embedding", &ParamInfo::shared_embedding)
      .def_readonly("expert_parallel", &ParamInfo::expert_parallel)
      .def_readonly("embedding_or_output", &ParamInfo::embedding_or_output)
      .def_readonly("use_muon", &ParamInfo::use_muon)
      .def_readonly("qkv_split", &ParamInfo::qkv_split)
      .def("numel", &ParamInfo::numel);

  m.def("compute_full_param_layout", &compute_layout, py::arg("params"), py::arg("optimizer"),
        py::arg("dp"), py::arg("expert_dp"), py::arg("bucket_size"), py::arg("grad_reduce_in_fp32"),
        py::arg("high_nccl_busbw"), py::arg("all_layer_wise"),
        "Computes the optimizer's FullParamLayout; one dict per buffer (BufferKey order)");
  m.def("bundled_model_names", &bundled_model_names, "Names of the model-zoo presets");
  m.def(
      "bundled_model_params",
      [](const std::string& name) { return bundled_model_spec(name).params; }, py::arg("name"),
      "Params (forward order) of a model-zoo preset");
}

}  // namespace shardwise::python
