#include "yaml_fields.hpp"

#include <charconv>
#include <cmath>
#include <limits>

#include "shardwise/config/comm_overlap_presets.hpp"
#include "shardwise/core/closest_name.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise::config_detail {
namespace {

std::optional<std::int64_t> parse_integer(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// from_chars over the whole of `text` (a leading '+' allowed): its error code, or
// invalid_argument when the number it read stops before the end ("1e999x" is no number).
std::errc read_real(std::string_view text, double& value) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return end == text.data() + text.size() ? ec : std::errc::invalid_argument;
}

std::optional<double> parse_real(std::string_view text) {
  double value = 0;
  if (read_real(text, value) != std::errc()) return std::nullopt;
  return value;
}

// A well-formed number a double cannot hold: 1e-400 (not 0) or 1e999 (not infinity).
bool real_out_of_range(std::string_view text) {
  double value = 0;
  return read_real(text, value) == std::errc::result_out_of_range;
}

bool looks_like_non_string(const std::string& text) {
  if (text.empty()) return true;
  bool flag = false;
  YAML::Node node(text);
  return YAML::convert<bool>::decode(node, flag) || parse_real(text).has_value() || text == "~" ||
         text == "null" || text == "Null" || text == "NULL";
}

// Shortest round-trip text; plain decimals unless that gets long (1e-12, 1e+20).
std::string format_real(double value) {
  char buffer[400];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::fixed);
  if (result.ec != std::errc() || result.ptr - buffer > 16) {
    result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  }
  SW_CHECK(result.ec == std::errc(), "cannot format ", value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // keep it a real number
  return text;
}

void emit(YAML::Emitter& out, const Json& value) {
  switch (value.type()) {
    case Json::value_t::object:
      if (value.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        break;
      }
      out << YAML::BeginMap;
      for (const auto& [key, child] : value.items()) {
        out << YAML::Key << key << YAML::Value;
        emit(out, child);
      }
      out << YAML::EndMap;
      break;
    case Json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& child : value) emit(out, child);
      out << YAML::EndSeq;
      break;
    case Json::value_t::null:
      out << YAML::Null;
      break;
    case Json::value_t::boolean:
      out << value.get<bool>();
      break;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      out << value.get<std::int64_t>();
      break;
    case Json::value_t::number_float:
      out << format_real(value.get<double>());
      break;
    case Json::value_t::string: {
      const auto& text = value.get_ref<const std::string&>();
      if (looks_like_non_string(text)) out << YAML::DoubleQuoted;
      out << text;
      break;
    }
    default:
      SW_CHECK(false, "unexpected JSON value type in a config");
  }
}

// --- TP-overlap config tables -------------------------------------------------------------

template <typename Cfg>
struct MethodTable {
  std::vector<FieldSpec<Cfg>> fields;
  std::vector<std::string_view> required;
};

const MethodTable<PipelineOverlapCfg>& pipeline_table() {
  using C = PipelineOverlapCfg;
  static const MethodTable<C> table{
      {field("method", &C::method), field("num_sm", &C::num_sm), field("cga_size", &C::cga_size),
       field("num_splits", &C::num_splits), field("set_sm_margin", &C::set_sm_margin),
       field("fp8_buf", &C::fp8_buf), field("atomic_gemm", &C::atomic_gemm)},
      {"num_sm", "cga_size", "num_splits", "set_sm_margin"}};
  return table;
}

const MethodTable<RingExchangeOverlapCfg>& ring_table() {
  using C = RingExchangeOverlapCfg;
  static const MethodTable<C> table{
      {field("method", &C::method), field("aggregate", &C::aggregate), field("num_sm", &C::num_sm),
       field("cga_size", &C::cga_size), field("set_sm_margin", &C::set_sm_margin),
       field("fp8_buf", &C::fp8_buf), field("atomic_gemm", &C::atomic_gemm)},
      {}};
  return table;
}

const MethodTable<BulkOverlapCfg>& bulk_table() {
  using C = BulkOverlapCfg;
  static const MethodTable<C> table{
      {field("method", &C::method), field("num_sm", &C::num_sm), field("cga_size", &C::cga_size),
       field("set_sm_margin", &C::set_sm_margin)},
      {"num_sm", "cga_size", "set_sm_margin"}};
  return table;
}

template <typename Cfg>
TPOverlapCfg read_overlap(const YAML::Node& node, const std::string& path,
                          const MethodTable<Cfg>& table) {
  for (std::string_view key : table.required) {
    SW_REQUIRE(node[std::string(key)], ConfigError, path, ": missing required key '", key,
               "' for method '", printable(node["method"].Scalar()),
               "' (required: ", join_keys(table.required), ")");
  }
  Cfg cfg;
  read_fields<Cfg>(node, path, table.fields, cfg);
  return cfg;
}

}  // namespace

std::string describe(const YAML::Node& node) {
  if (!node || node.IsNull()) return "null";
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  return str_cat("'", printable(node.Scalar()), "'");
}

void type_error(const std::string& path, std::string_view expected, const YAML::Node& node) {
  throw ConfigError(str_cat(path, ": expected ", expected, ", got ", describe(node)));
}

// YAML 1.2's core schema: only a plain (unquoted) true or false is a boolean. yaml-cpp also takes
// yes/no/on/off/y/n and quoted 'true', which a YAML 1.2 reader (PyYAML aside) reads as strings.
void decode(const YAML::Node& node, bool& out, const std::string& path) {
  static constexpr std::string_view kTrue[] = {"true", "True", "TRUE"};
  static constexpr std::string_view kFalse[] = {"false", "False", "FALSE"};
  if (node.IsScalar() && node.Tag() != "!") {  // "!": the scalar was quoted
    const std::string& text = node.Scalar();
    for (std::string_view t : kTrue) {
      if (text == t) {
        out = true;
        return;
      }
    }
    for (std::string_view f : kFalse) {
      if (text == f) {
        out = false;
        return;
      }
    }
  }
  if (node.IsScalar()) {
    throw ConfigError(str_cat(path, ": expected a boolean (true or false), got ",
                              node.Tag() == "!" ? "the quoted string " : "", describe(node),
                              " (only unquoted true and false are booleans)"));
  }
  type_error(path, "a boolean (true or false)", node);
}

// As for booleans: a quoted "1" or a `!!str 1` is a string to every YAML 1.2 reader, so it is
// not taken as a number (a config another tool reads must mean the same there).
void require_untagged_number(const YAML::Node& node, const std::string& path,
                             std::string_view expected) {
  const std::string& tag = node.Tag();
  if (tag == "?" || tag == "tag:yaml.org,2002:int" || tag == "tag:yaml.org,2002:float") return;
  throw ConfigError(
      str_cat(path, ": expected ", expected, ", got ",
              tag == "!" ? "the quoted string " : str_cat("a value tagged ", tag, " "),
              describe(node), " (numbers are written unquoted)"));
}

void decode(const YAML::Node& node, std::int64_t& out, const std::string& path) {
  const auto value = node.IsScalar() ? parse_integer(node.Scalar()) : std::nullopt;
  if (!value) type_error(path, "an integer", node);
  require_untagged_number(node, path, "an integer");
  out = *value;
}

void decode(const YAML::Node& node, int& out, const std::string& path) {
  std::int64_t wide = 0;
  decode(node, wide, path);
  SW_REQUIRE(wide >= std::numeric_limits<int>::min() && wide <= std::numeric_limits<int>::max(),
             ConfigError, path, ": integer ", wide, " is out of range");
  out = static_cast<int>(wide);
}

void decode(const YAML::Node& node, double& out, const std::string& path) {
  const auto value = node.IsScalar() ? parse_real(node.Scalar()) : std::nullopt;
  SW_REQUIRE(value || !node.IsScalar() || !real_out_of_range(node.Scalar()), ConfigError, path,
             ": ", printable(node.Scalar(), 64),
             " is beyond what a double holds (magnitudes 2.3e-308 to 1.7e308, or 0)");
  if (!value || !std::isfinite(*value)) type_error(path, "a finite number", node);
  require_untagged_number(node, path, "a finite number");
  out = *value;
}

void decode(const YAML::Node& node, std::string& out, const std::string& path) {
  if (!node.IsScalar()) type_error(path, "a string", node);
  out = node.Scalar();
  // A path ends at a NUL for the OS: "log\0.jsonl" would write over "log" (YAML's "\0" escape).
  SW_REQUIRE(out.find('\0') == std::string::npos, ConfigError, path, ": '", printable(out),
             "' contains a NUL byte");
}

void decode(const YAML::Node& node, LayerWiseShardGroupSize& out, const std::string& path) {
  if (!node.IsScalar()) type_error(path, "dp, auto or a positive integer", node);
  out = LayerWiseShardGroupSize::parse(node.Scalar());
}

void decode(const YAML::Node& node, DType& out, const std::string& path) {
  if (!node.IsScalar()) type_error(path, "a dtype name (fp32 or bf16)", node);
  const auto dtype = parse_dtype(node.Scalar());
  SW_REQUIRE(dtype.has_value(), ConfigError, path, ": unknown dtype '", printable(node.Scalar()),
             "' (valid: fp32, bf16)");
  out = *dtype;
}

void decode(const YAML::Node& node, TransformerLayerTPOverlapCfg& out, const std::string& path) {
  if (node.IsScalar()) {
    try {
      out = comm_overlap_preset(node.Scalar());
    } catch (const ConfigError& e) {
      throw ConfigError(str_cat(path, ": ", e.what()));
    }
    return;
  }
  if (!node.IsMap()) type_error(path, "a preset name or a mapping of GEMM slots", node);
  std::vector<std::string_view> slot_names;
  for (const auto& [name, slot] : TransformerLayerTPOverlapCfg::slots()) slot_names.push_back(name);
  check_keys(node, path, slot_names, "GEMM slot");
  out = TransformerLayerTPOverlapCfg{};
  for (const auto& [name, slot] : TransformerLayerTPOverlapCfg::slots()) {
    const YAML::Node child = node[std::string(name)];
    if (!child || child.IsNull()) continue;
    const std::string slot_path = str_cat(path, ".", name);
    if (!child.IsMap()) type_error(slot_path, "a mapping with a 'method' key, or null", child);
    const YAML::Node method = child["method"];
    SW_REQUIRE(method && method.IsScalar(), ConfigError, slot_path,
               ": missing required key 'method' (valid methods: pipeline, ring_exchange, bulk)");
    const std::string& name_of_method = method.Scalar();
    if (name_of_method == "pipeline") {
      out.*slot = read_overlap(child, slot_path, pipeline_table());
    } else if (name_of_method == "ring_exchange") {
      out.*slot = read_overlap(child, slot_path, ring_table());
    } else if (name_of_method == "bulk") {
      out.*slot = read_overlap(child, slot_path, bulk_table());
    } else {
      throw ConfigError(str_cat(slot_path, ".method: unknown method '", printable(name_of_method),
                                "' (valid methods: pipeline, ring_exchange, bulk)"));
    }
  }
}

Json encode(const TransformerLayerTPOverlapCfg& value) {
  Json out = Json::object();
  for (const auto& [name, slot] : TransformerLayerTPOverlapCfg::slots()) {
    const auto& entry = value.*slot;
    Json& target = out[std::string(name)];
    if (!entry) {
      target = nullptr;
    } else if (const auto* p = std::get_if<PipelineOverlapCfg>(&*entry)) {
      target = write_fields<PipelineOverlapCfg>(*p, pipeline_table().fields);
    } else if (const auto* r = std::get_if<RingExchangeOverlapCfg>(&*entry)) {
      target = write_fields<RingExchangeOverlapCfg>(*r, ring_table().fields);
    } else {
      target = write_fields<BulkOverlapCfg>(std::get<BulkOverlapCfg>(*entry), bulk_table().fields);
    }
  }
  return out;
}

std::string join_keys(const std::vector<std::string_view>& keys) {
  std::string out;
  for (std::string_view key : keys) {
    if (!out.empty()) out += ", ";
    out += key;
  }
  return out;
}

void check_keys(const YAML::Node& node, const std::string& path,
                const std::vector<std::string_view>& valid, std::string_view what) {
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) {
      throw ConfigError(
          str_cat(path, ": ", what, "s must be plain strings, got ", describe(entry.first)));
    }
    const std::string& key = entry.first.Scalar();
    bool known = false;
    for (std::string_view v : valid) known = known || v == key;
    SW_REQUIRE(known, ConfigError, path, ": unknown ", what, " '", printable(key), "'",
               did_you_mean(key, valid), " (valid ", what, "s: ", join_keys(valid), ")");
  }
}

std::string json_to_yaml(const Json& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  emit(out, value);
  SW_CHECK(out.good(), "YAML emitter failed: ", out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

}  // namespace shardwise::config_detail
