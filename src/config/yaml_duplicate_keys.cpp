// Duplicate mapping keys. YAML says keys of a mapping are unique, but yaml-cpp keeps every entry
// and answers lookups with the first, so `lr: 0.1` followed later by `lr: 0.01` would silently
// train with 0.1. We walk the loaded tree once and refuse any repeat.
#include <map>
#include <utility>
#include <vector>

#include "yaml_fields.hpp"

namespace shardwise::config_detail {
namespace {

constexpr std::size_t kMaxNodes = 1'000'000;

// The key as text: the scalar itself, or the flow form of a complex key.
std::string key_text(const YAML::Node& key) {
  if (key.IsScalar()) return key.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << key;
  return out.c_str();
}

std::string line_of(const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  return mark.line >= 0 ? std::to_string(mark.line + 1) : std::string("?");
}

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : str_cat(parent, ".", key);
}

}  // namespace

void check_no_duplicate_keys(const YAML::Node& root, std::string_view what) {
  // Iterative walk (an explicit stack), so deep nesting cannot overflow the call stack.
  std::vector<std::pair<YAML::Node, std::string>> pending{{root, ""}};
  std::size_t visited = 0;
  const std::string prefix = what.empty() ? std::string() : str_cat(what, ": ");
  while (!pending.empty()) {
    auto [node, path] = std::move(pending.back());
    pending.pop_back();
    SW_REQUIRE(++visited <= kMaxNodes, ConfigError, prefix, "more than ", kMaxNodes,
               " YAML nodes (aliases expanding?); a training config is far smaller");
    if (node.IsMap()) {
      std::map<std::string, YAML::Node> seen;
      for (const auto& entry : node) {
        const std::string key = key_text(entry.first);
        const auto [it, fresh] = seen.emplace(key, entry.first);
        SW_REQUIRE(fresh, ConfigError, prefix, "key '", child_path(path, key),
                   "' is given twice (lines ", line_of(it->second), " and ", line_of(entry.first),
                   "); YAML keys must be unique");
        pending.emplace_back(entry.second, child_path(path, key));
      }
    } else if (node.IsSequence()) {
      std::size_t index = 0;
      for (const auto& child : node) {
        pending.emplace_back(child, str_cat(path, "[", index++, "]"));
      }
    }
  }
}

}  // namespace shardwise::config_detail
