#include "shardwise/comm/settings_agreement.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shardwise/core/error.hpp"
#include "shardwise/core/fnv1a.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise {
namespace {

using Setting = std::pair<std::string, std::string>;  // "section.key", its value as JSON

void flatten(const nlohmann::ordered_json& value, const std::string& at,
             std::vector<Setting>& out) {
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      flatten(item, at.empty() ? key : at + "." + key, out);
    }
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      flatten(value[i], str_cat(at, "[", i, "]"), out);
    }
  } else if (value.is_string()) {
    // The bytes themselves: dump() throws on text that is not UTF-8 (a --prompt may be any bytes).
    out.emplace_back(at, "'" + value.get_ref<const std::string&>() + "'");
  } else {
    out.emplace_back(at, value.dump());
  }
}

// "disagreeing rank(s) 1,3" out of check_same_on_all_ranks's message, without the hashes.
std::string which_ranks(const std::string& message) {
  const std::string label = "disagreeing rank(s) ";
  const std::size_t at = message.find(label);
  if (at == std::string::npos) return "some ranks disagree";
  return message.substr(at, message.find(" (", at) - at);
}

}  // namespace

void check_settings_agree(ProcessGroup& group, const nlohmann::ordered_json& settings) {
  std::vector<Setting> flat;
  flatten(settings, "", flat);
  Fnv1a all;  // the same value on every rank and every build (std::hash need not be)
  for (const auto& [key, value] : flat) {
    all.text(key);
    all.text(value);
  }
  try {
    group.check_same_on_all_ranks(all.value(), "settings");
    return;
  } catch (const CommError&) {
    // Every rank saw the difference: find the first setting where it lies, together.
  }
  try {
    group.check_same_on_all_ranks(flat.size(), "number of settings");
    for (const auto& [key, value] : flat) {
      try {
        Fnv1a one;
        one.text(key);
        one.text(value);
        group.check_same_on_all_ranks(one.value(), key);
      } catch (const CommError& e) {
        throw ConfigError(str_cat("rank ", group.rank(), " runs with ", key, " = ",
                                  printable(value, 200), ", and not every rank does (",
                                  which_ranks(e.what()),
                                  "); every rank must get the same config, overrides and options"));
      }
    }
  } catch (const CommError& e) {
    throw ConfigError(str_cat("the ranks' settings differ in shape (", e.what(), ")"));
  }
}

}  // namespace shardwise
