// Duplicate mapping keys. YAML says keys of a mapping are unique, but yaml-cpp keeps every entry
// and answers lookups with the first, so `lr: 0.1` followed later by `lr: 0.01` would silently
// train with 0.1. We walk the loaded tree once and refuse any repeat.
// The walk keeps each node's parent instead of its dotted path: copying a path per node made a
// deep tree (aliases of deep lists) quadratic. The path is spelled out only for the message.
#include <map>
#include <utility>
#include <vector>

#include "shardwise/core/message_text.hpp"
#include "yaml_fields.hpp"

namespace shardwise::config_detail {
namespace {

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

// A node met on the walk: the key or index under which its parent holds it.
struct WalkStep {
  YAML::Node node;
  std::size_t parent;  // index into the visited steps (the root is step 0)
  YAML::Node key;      // for a mapping value (in_map)
  std::size_t index;   // for a list entry
  bool in_map;
};

// "model.layers[2].name": the dotted path of `key` under the step `parent`.
std::string path_of(const std::vector<WalkStep>& steps, std::size_t parent,
                    const std::string& key) {
  std::vector<std::string> parts{key};
  for (std::size_t at = parent; at != 0; at = steps[at].parent) {
    const WalkStep& step = steps[at];
    parts.push_back(step.in_map ? key_text(step.key) : str_cat("[", step.index, "]"));
  }
  std::string out;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (!out.empty() && (*it)[0] != '[') out += '.';
    out += *it;
  }
  return printable(out, 200);
}

}  // namespace

void check_no_duplicate_keys(const YAML::Node& root, std::string_view what) {
  // Iterative walk (an explicit stack), so deep nesting cannot overflow the call stack.
  // load_yaml_document made the tree acyclic and bounded; the count guards other callers.
  std::vector<WalkStep> steps;
  std::vector<std::size_t> pending;
  steps.push_back(WalkStep{root, 0, YAML::Node(), 0, false});
  pending.push_back(0);
  const std::string prefix = what.empty() ? std::string() : str_cat(what, ": ");
  while (!pending.empty()) {
    const std::size_t at = pending.back();
    pending.pop_back();
    const YAML::Node node = steps[at].node;
    if (node.IsMap()) {
      std::map<std::string, YAML::Node> seen;
      for (const auto& entry : node) {
        const std::string key = key_text(entry.first);
        const auto [it, fresh] = seen.emplace(key, entry.first);
        SW_REQUIRE(fresh, ConfigError, prefix, "key '", path_of(steps, at, key),
                   "' is given twice (lines ", line_of(it->second), " and ", line_of(entry.first),
                   "); YAML keys must be unique");
        steps.push_back(WalkStep{entry.second, at, entry.first, 0, true});
        pending.push_back(steps.size() - 1);
      }
    } else if (node.IsSequence()) {
      std::size_t index = 0;
      for (const auto& child : node) {
        steps.push_back(WalkStep{child, at, YAML::Node(), index++, false});
        pending.push_back(steps.size() - 1);
      }
    }
    SW_REQUIRE(steps.size() <= static_cast<std::size_t>(kMaxYamlNodes), ConfigError, prefix,
               "more than ", kMaxYamlNodes,
               " YAML nodes (aliases expanding?); a training config is far smaller");
  }
}

}  // namespace shardwise::config_detail
