#include "shardwise/core/closest_name.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

namespace shardwise {
namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // Optimal string alignment: Levenshtein plus swapping two adjacent characters as one edit
  // ("modle" -> "model"), over three rolling rows of the DP table.
  std::vector<std::size_t> before(b.size() + 1), previous(b.size() + 1), row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({previous[j] + 1, row[j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        row[j] = std::min(row[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, row);
  }
  return previous[b.size()];
}

std::optional<std::string> closest_name(std::string_view name,
                                        std::span<const std::string_view> valid) {
  std::string folded(name);
  std::transform(folded.begin(), folded.end(), folded.begin(), lower);
  const std::size_t limit = std::max<std::size_t>(1, name.size() / 3);
  std::optional<std::string> best;
  std::size_t best_distance = limit + 1;
  for (std::string_view candidate : valid) {
    // The distance is at least the difference in length: skip what cannot be close (and a
    // megabyte-long name costs no quadratic table).
    const std::size_t gap = name.size() > candidate.size() ? name.size() - candidate.size()
                                                           : candidate.size() - name.size();
    if (gap >= best_distance) continue;
    std::string other(candidate);
    std::transform(other.begin(), other.end(), other.begin(), lower);
    const std::size_t d = edit_distance(folded, other);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(candidate);
    }
  }
  return best;
}

std::string did_you_mean(std::string_view name, std::span<const std::string_view> valid) {
  const auto best = closest_name(name, valid);
  return best ? " (did you mean " + *best + "?)" : std::string();
}

}  // namespace shardwise
