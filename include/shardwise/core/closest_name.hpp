// "Did you mean ...?" for unknown names: the valid name closest by edit distance.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace shardwise {

// Edit distance: insertions, deletions, substitutions and swaps of adjacent characters cost 1.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The valid name closest to `name`, if one is close enough to be a plausible typo: at most
// max(1, |name| / 3) edits away (ties go to the earlier name). Matching ignores ASCII case.
std::optional<std::string> closest_name(std::string_view name,
                                        std::span<const std::string_view> valid);

// " (did you mean X?)" for the closest valid name, or "" when none is close.
std::string did_you_mean(std::string_view name, std::span<const std::string_view> valid);

}  // namespace shardwise
