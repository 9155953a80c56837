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

// The fewest and the most settings any rank has.
std::pair<std::int64_t, std::int64_t> setting_counts(ProcessGroup& group, std::size_t count) {
  std::int64_t extremes[2] = {-static_cast<std::int64_t>(count), static_cast<std::int64_t>(count)};
  group.all_reduce({extremes, 2, DType::kInt64}, ReduceOp::kMax)->wait();
  return {-extremes[0], extremes[1]};
}

// Every rank lists its settings in the same order, but some have more (a list longer on one rank)
// or others (a key only some ranks have): the first position where the names part, together.
std::string where_settings_differ_in_shape(ProcessGroup& group, const std::vector<Setting>& flat,
                                           std::int64_t fewest) {
  for (std::int64_t i = 0; i < fewest; ++i) {
    const std::string& key = flat[static_cast<std::size_t>(i)].first;
    Fnv1a name;
    name.text(key);
    try {
      group.check_same_on_all_ranks(name.value(), "setting name");
    } catch (const CommError& e) {
      return str_cat("rank ", group.rank(), " has the setting ", key,
                     " where not every rank has it (", which_ranks(e.what()), ")");
    }
  }
  if (flat.size() > static_cast<std::size_t>(fewest)) {
    return str_cat("rank ", group.rank(), " has settings other ranks lack, from ",
                   flat[static_cast<std::size_t>(fewest)].first, " on");
  }
  return str_cat("rank ", group.rank(), " lacks settings other ranks have, after its last, ",
                 flat.empty() ? std::string("(none)") : flat.back().first);
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
  const auto [fewest, most] = setting_counts(group, flat.size());
  if (fewest != most) {
    throw ConfigError(str_cat(where_settings_differ_in_shape(group, flat, fewest),
                              "; every rank must get the same config, overrides and options"));
  }
  for (const auto& [key, value] : flat) {
    Fnv1a one;
    one.text(key);
    one.text(value);
    try {
      group.check_same_on_all_ranks(one.value(), key);
    } catch (const CommError& e) {
      throw ConfigError(str_cat("rank ", group.rank(), " runs with ", key, " = ",
                                printable(value, 200), ", and not every rank does (",
                                which_ranks(e.what()),
                                "); every rank must get the same config, overrides and options"));
    }
  }
}

}  // namespace shardwise
