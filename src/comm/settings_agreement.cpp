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

constexpr const char* kAdvice = "; every rank must get the same config, overrides and options";

// The same value on every rank and every build (std::hash need not be).
std::uint64_t setting_hash(const Setting& setting, bool with_value) {
  Fnv1a hash;
  hash.text(setting.first);
  if (with_value) hash.text(setting.second);
  return hash.value();
}

// Every rank lists its settings in the same order: the first position where the names or the
// values part, found together. `fewest` settings are common to all ranks; past them some ranks
// have more (a list longer on one rank) or others (a key only some ranks have).
std::string first_difference(ProcessGroup& group, const std::vector<Setting>& flat,
                             std::int64_t fewest) {
  const std::string rank = str_cat("rank ", group.rank());
  for (std::int64_t i = 0; i < fewest; ++i) {
    const Setting& setting = flat[static_cast<std::size_t>(i)];
    try {
      group.check_same_on_all_ranks(setting_hash(setting, true), setting.first);
      continue;
    } catch (const CommError& e) {
      // Together again: does the name differ, or only the value?
      const std::string ranks = which_ranks(e.what());
      try {
        group.check_same_on_all_ranks(setting_hash(setting, false), "setting name");
      } catch (const CommError&) {
        return str_cat(rank, " has the setting ", setting.first, " where not every rank has it (",
                       ranks, ")");
      }
      return str_cat(rank, " runs with ", setting.first, " = ", printable(setting.second, 200),
                     ", and not every rank does (", ranks, ")");
    }
  }
  if (flat.size() > static_cast<std::size_t>(fewest)) {
    return str_cat(rank, " has settings other ranks lack, from ",
                   flat[static_cast<std::size_t>(fewest)].first, " on");
  }
  return str_cat(rank, " lacks settings other ranks have, after its last, ",
                 flat.empty() ? std::string("(none)") : flat.back().first);
}

}  // namespace

void check_settings_agree(ProcessGroup& group, const nlohmann::ordered_json& settings) {
  std::vector<Setting> flat;
  flatten(settings, "", flat);
  Fnv1a all;
  for (const Setting& setting : flat) {
    all.text(setting.first);
    all.text(setting.second);
  }
  try {
    group.check_same_on_all_ranks(all.value(), "settings");
    return;
  } catch (const CommError&) {
    // Every rank saw the difference: find the first setting where it lies, together.
  }
  const std::int64_t fewest = setting_counts(group, flat.size()).first;
  throw ConfigError(str_cat(first_difference(group, flat, fewest), kAdvice));
}

}  // namespace shardwise
