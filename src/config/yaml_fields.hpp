// Internal: typed reading of YAML nodes with errors that name the key, and a small field-table
// mechanism so one table per config section drives loading, key validation and printing.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/config/ddp_config.hpp"
#include "shardwise/config/enum_names.hpp"
#include "shardwise/config/tp_overlap_config.hpp"
#include "shardwise/core/dtype.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::config_detail {

using Json = nlohmann::ordered_json;

// "'abc'", "a mapping", "a list" or "null": what the file has, for error messages.
std::string describe(const YAML::Node& node);
[[noreturn]] void type_error(const std::string& path, std::string_view expected,
                             const YAML::Node& node);

void decode(const YAML::Node& node, bool& out, const std::string& path);
void decode(const YAML::Node& node, int& out, const std::string& path);
void decode(const YAML::Node& node, std::int64_t& out, const std::string& path);
void decode(const YAML::Node& node, double& out, const std::string& path);
void decode(const YAML::Node& node, std::string& out, const std::string& path);
void decode(const YAML::Node& node, DType& out, const std::string& path);
void decode(const YAML::Node& node, LayerWiseShardGroupSize& out, const std::string& path);
// A preset name or a mapping of GEMM slots.
void decode(const YAML::Node& node, TransformerLayerTPOverlapCfg& out, const std::string& path);

template <NamedEnum E>
void decode(const YAML::Node& node, E& out, const std::string& path) {
  if (!node.IsScalar()) type_error(path, str_cat("one of: ", enum_choices<E>()), node);
  out = enum_from_name<E>(node.Scalar(), path);
}

template <typename T>
void decode(const YAML::Node& node, std::optional<T>& out, const std::string& path) {
  if (node.IsNull()) {
    out.reset();
    return;
  }
  T value{};
  decode(node, value, path);
  out = std::move(value);
}

inline Json encode(bool value) { return value; }
inline Json encode(int value) { return value; }
inline Json encode(std::int64_t value) { return value; }
inline Json encode(double value) { return value; }
inline Json encode(const std::string& value) { return value; }
inline Json encode(DType value) { return std::string(dtype_name(value)); }
inline Json encode(const LayerWiseShardGroupSize& value) { return value.name(); }
Json encode(const TransformerLayerTPOverlapCfg& value);
template <NamedEnum E>
Json encode(E value) {
  return std::string(to_string(value));
}
template <typename T>
Json encode(const std::optional<T>& value) {
  return value ? encode(*value) : Json(nullptr);
}

// One key of a section: how to read it into S and how to print it.
template <typename S>
struct FieldSpec {
  std::string_view key;
  std::function<void(const YAML::Node&, S&, const std::string&)> read;
  std::function<Json(const S&)> write;
};

template <typename S, typename T>
FieldSpec<S> field(std::string_view key, T S::*member) {
  return {key,
          [member](const YAML::Node& node, S& out, const std::string& path) {
            decode(node, out.*member, path);
          },
          [member](const S& in) { return encode(in.*member); }};
}

// "a, b, c".
std::string join_keys(const std::vector<std::string_view>& keys);

template <typename S>
std::vector<std::string_view> keys_of(std::span<const FieldSpec<S>> fields) {
  std::vector<std::string_view> keys;
  for (const auto& f : fields) keys.push_back(f.key);
  return keys;
}

// Rejects unknown keys (listing the valid ones) and keys that are not plain strings.
void check_keys(const YAML::Node& node, const std::string& path,
                const std::vector<std::string_view>& valid, std::string_view what = "key");

// Most nodes a YAML document may expand to, aliases expanded (a training config has hundreds).
inline constexpr std::int64_t kMaxYamlNodes = 1'000'000;

// Parses `text` as exactly one YAML document and loads it. Refuses (ConfigError, `what` in
// front when not empty) invalid YAML, a second document, an alias inside the node it names (a
// cycle every walk would follow for ever) and aliases expanding to more than kMaxYamlNodes
// nodes, all in one pass linear in the text. The tree it returns is acyclic and bounded.
// `invalid` names a parse error ("invalid YAML", "value is not valid YAML").
YAML::Node load_yaml_document(const std::string& text, std::string_view what,
                              std::string_view invalid = "invalid YAML");

// Rejects a mapping anywhere in `root` that has the same key twice (yaml-cpp keeps both and
// lookups silently take the first). Bounded: refuses trees of more than a million nodes (aliases
// can make a small file expand into a huge tree). `what` (may be empty) prefixes the message.
void check_no_duplicate_keys(const YAML::Node& root, std::string_view what);

// Reads the keys present in `node` (a mapping, or null for "all defaults") into `out`.
template <typename S>
void read_fields(const YAML::Node& node, const std::string& path,
                 std::span<const FieldSpec<S>> fields, S& out) {
  if (!node || node.IsNull()) return;
  if (!node.IsMap()) type_error(path, "a mapping", node);
  check_keys(node, path, keys_of(fields));
  for (const auto& f : fields) {
    const YAML::Node child = node[std::string(f.key)];
    if (child) f.read(child, out, str_cat(path, ".", f.key));
  }
}

template <typename S>
Json write_fields(const S& in, std::span<const FieldSpec<S>> fields) {
  Json out = Json::object();
  for (const auto& f : fields) out[std::string(f.key)] = f.write(in);
  return out;
}

// Block-style YAML of a JSON tree; doubles keep a decimal point or exponent so they read back as
// numbers, and print in their shortest round-trip form.
std::string json_to_yaml(const Json& value);

}  // namespace shardwise::config_detail
