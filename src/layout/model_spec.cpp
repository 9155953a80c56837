#include "shardwise/layout/model_spec.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "shardwise/core/atomic_file.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/input_file.hpp"
#include "shardwise/core/json_text.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/layout/param_dtype.hpp"

namespace shardwise {
namespace {

using nlohmann::json;

// Where an error happened: "spec.json: params[3] (\"layers.0.attn.qkv.weight\")".
std::string param_context(std::string_view source, std::size_t index, const std::string& name) {
  std::string where = str_cat(source, ": params[", index, "]");
  if (!name.empty()) where += str_cat(" (\"", printable(name, 200), "\")");
  return where;
}

const char* json_kind(const json& value) { return value.type_name(); }

std::int64_t positive_integer(const json& value, const std::string& where,
                              const std::string& what) {
  SW_REQUIRE(value.is_number_integer(), FormatError, where, ": ", what, " must be an integer, got ",
             json_kind(value), " ", json_excerpt(value));
  SW_REQUIRE(value.is_number_unsigned() || value.get<std::int64_t>() > 0, FormatError, where, ": ",
             what, " must be positive, got ", json_excerpt(value));
  SW_REQUIRE(!value.is_number_unsigned() ||
                 value.get<std::uint64_t>() <=
                     static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
             FormatError, where, ": ", what, " is too large: ", json_excerpt(value));
  const auto v = value.get<std::int64_t>();
  SW_REQUIRE(v > 0, FormatError, where, ": ", what, " must be positive, got ", v);
  return v;
}

bool boolean_field(const json& value, const std::string& where, const char* field) {
  SW_REQUIRE(value.is_boolean(), FormatError, where, ": field \"", field,
             "\" must be true or false, got ", json_excerpt(value));
  return value.get<bool>();
}

DType dtype_field(const json& value, const std::string& where, const char* field) {
  SW_REQUIRE(value.is_string(), FormatError, where, ": field \"", field,
             "\" must be a dtype name string, got ", json_excerpt(value));
  const auto name = value.get<std::string>();
  const auto dtype = parse_dtype(name);
  SW_REQUIRE(dtype.has_value() && is_param_dtype(*dtype), FormatError, where, ": field \"", field,
             "\" has dtype \"", printable(name),
             "\", which cannot hold parameters (valid: ", kParamDtypeNames, ")");
  return *dtype;
}

std::vector<std::int64_t> dims_field(const json& value, const std::string& where,
                                     const char* field) {
  SW_REQUIRE(value.is_array(), FormatError, where, ": field \"", field,
             "\" must be an array of positive integers, got ", json_excerpt(value));
  SW_REQUIRE(!value.empty(), FormatError, where, ": field \"", field, "\" must not be empty");
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < value.size(); ++i) {
    dims.push_back(positive_integer(value[i], where, str_cat("field \"", field, "\" entry ", i)));
  }
  return dims;
}

ParamInfo parse_param(const json& entry, std::size_t index, std::string_view source) {
  SW_REQUIRE(entry.is_object(), FormatError, param_context(source, index, ""),
             ": must be an object, got ", json_kind(entry));
  std::string name;
  if (auto it = entry.find("name"); it != entry.end()) {
    SW_REQUIRE(it->is_string(), FormatError, param_context(source, index, ""),
               ": field \"name\" must be a string, got ", json_excerpt(*it));
    name = it->get<std::string>();
  }
  const std::string where = param_context(source, index, name);
  SW_REQUIRE(entry.contains("name"), FormatError, where, ": missing required field \"name\"");
  SW_REQUIRE(!name.empty(), FormatError, where, ": field \"name\" must not be empty");
  SW_REQUIRE(entry.contains("shape"), FormatError, where, ": missing required field \"shape\"");

  ParamInfo param;
  param.name = name;
  for (const auto& [key, value] : entry.items()) {
    if (key == "name") {
      continue;
    } else if (key == "shape") {
      param.shape = dims_field(value, where, "shape");
    } else if (key == "dtype") {
      param.dtype = dtype_field(value, where, "dtype");
    } else if (key == "grad_dtype") {
      if (!value.is_null()) param.grad_dtype = dtype_field(value, where, "grad_dtype");
    } else if (key == "shared_embedding") {
      param.shared_embedding = boolean_field(value, where, "shared_embedding");
    } else if (key == "expert_parallel") {
      param.expert_parallel = boolean_field(value, where, "expert_parallel");
    } else if (key == "embedding_or_output") {
      param.embedding_or_output = boolean_field(value, where, "embedding_or_output");
    } else if (key == "use_muon") {
      if (!value.is_null()) param.use_muon = boolean_field(value, where, "use_muon");
    } else if (key == "qkv_split") {
      param.qkv_split = dims_field(value, where, "qkv_split");
    } else {
      throw FormatError(str_cat(where, ": unknown field \"", printable(key),
                                "\" (valid: name, shape, dtype, grad_dtype, shared_embedding, "
                                "expert_parallel, embedding_or_output, use_muon, qkv_split)"));
    }
  }

  // Element counts are int64 everywhere; refuse shapes whose product would overflow.
  std::int64_t numel = 1;
  for (const auto dim : param.shape) {
    SW_REQUIRE(numel <= std::numeric_limits<std::int64_t>::max() / dim, FormatError, where,
               ": field \"shape\" has more elements than fit in 64 bits");
    numel *= dim;
  }
  if (const std::optional<std::string> problem = qkv_split_problem(param)) {
    throw FormatError(str_cat(where, ": field \"qkv_split\" ", *problem));
  }
  return param;
}

std::string read_file(const std::filesystem::path& path) {
  return read_input_file(path, "model spec", kModelSpecFileMaxBytes);
}

// ordered_json keeps the field order readable: name, shape, dtype, then flags.
nlohmann::ordered_json param_to_json(const ParamInfo& param) {
  nlohmann::ordered_json out;
  out["name"] = param.name;
  out["shape"] = param.shape;
  out["dtype"] = std::string(dtype_name(param.dtype));
  if (param.grad_dtype) out["grad_dtype"] = std::string(dtype_name(*param.grad_dtype));
  if (param.shared_embedding) out["shared_embedding"] = true;
  if (param.expert_parallel) out["expert_parallel"] = true;
  if (param.embedding_or_output) out["embedding_or_output"] = true;
  if (param.use_muon) out["use_muon"] = *param.use_muon;
  if (param.is_qkv()) out["qkv_split"] = param.qkv_split;
  return out;
}

}  // namespace

std::int64_t ModelSpec::total_numel() const {
  std::int64_t total = 0;
  for (const auto& param : params) total += param.numel();
  return total;
}

ModelSpec parse_model_spec(std::string_view json_text, std::string_view source_name) {
  const json root = parse_json_text(json_text, source_name);
  SW_REQUIRE(root.is_object(), FormatError, source_name,
             ": a model spec must be a JSON object with \"name\" and \"params\", got ",
             json_kind(root));
  ModelSpec spec;
  for (const auto& [key, value] : root.items()) {
    if (key == "name") {
      SW_REQUIRE(value.is_string(), FormatError, source_name,
                 ": field \"name\" must be a string, got ", json_excerpt(value));
      spec.name = value.get<std::string>();
    } else if (key != "params") {
      throw FormatError(str_cat(source_name, ": unknown top-level field \"", printable(key),
                                "\" (valid: name, params)"));
    }
  }
  const auto params = root.find("params");
  SW_REQUIRE(params != root.end(), FormatError, source_name, ": missing required field \"params\"");
  SW_REQUIRE(params->is_array(), FormatError, source_name,
             ": field \"params\" must be an array, got ", json_kind(*params));
  SW_REQUIRE(!params->empty(), FormatError, source_name, ": field \"params\" is empty");

  std::set<std::string> seen;
  spec.params.reserve(params->size());
  std::int64_t total = 0;  // total_numel() sums in int64: refuse a spec it would overflow
  for (std::size_t i = 0; i < params->size(); ++i) {
    ParamInfo param = parse_param((*params)[i], i, source_name);
    SW_REQUIRE(seen.insert(param.name).second, FormatError,
               param_context(source_name, i, param.name), ": duplicate param name \"",
               printable(param.name, 200), "\"");
    const auto sum = checked_add(total, param.numel());
    SW_REQUIRE(sum.has_value(), FormatError, param_context(source_name, i, param.name),
               ": the params hold more than 2^63 elements in all");
    total = *sum;
    spec.params.push_back(std::move(param));
  }
  return spec;
}

ModelSpec load_model_spec(const std::filesystem::path& path) {
  return parse_model_spec(read_file(path), path.string());
}

std::string model_spec_to_json(const ModelSpec& spec) {
  std::string out = str_cat("{\n  \"name\": ", json(spec.name).dump(), ",\n  \"params\": [\n");
  for (std::size_t i = 0; i < spec.params.size(); ++i) {
    out += "    ";
    out += param_to_json(spec.params[i]).dump();
    out += i + 1 < spec.params.size() ? ",\n" : "\n";
  }
  out += "  ]\n}\n";
  return out;
}

void save_model_spec(const ModelSpec& spec, const std::filesystem::path& path) {
  write_file_atomically(path, model_spec_to_json(spec));
}

void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
  // The core writer: fsync'ed, and it refuses to rename over a device, FIFO or directory.
  write_file_atomic(path, text);
}

}  // namespace shardwise
