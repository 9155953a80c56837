#include "rank_agreement.hpp"

#include <map>

#include "shardwise/core/error.hpp"

namespace shardwise {

void require_same_values(const std::vector<std::uint64_t>& values, const std::string& group_name,
                         const std::string& what) {
  const int size = static_cast<int>(values.size());
  // Ranks holding each value; the most common value (lowest rank on ties) is the reference.
  std::map<std::uint64_t, std::vector<int>> holders;
  for (int r = 0; r < size; ++r) holders[values[static_cast<std::size_t>(r)]].push_back(r);
  if (holders.size() <= 1) return;
  std::uint64_t reference = values[0];
  for (const auto& [v, ranks] : holders) {
    const auto& best = holders[reference];
    if (ranks.size() > best.size() || (ranks.size() == best.size() && ranks[0] < best[0])) {
      reference = v;
    }
  }
  std::string disagreeing;
  std::string detail;
  for (int r = 0; r < size; ++r) {
    if (values[static_cast<std::size_t>(r)] != reference) {
      disagreeing += str_cat(disagreeing.empty() ? "" : ",", r);
    }
  }
  for (const auto& [v, ranks] : holders) {
    std::string list;
    for (int r : ranks) list += str_cat(list.empty() ? "" : ",", r);
    detail += str_cat(detail.empty() ? "" : "; ", ranks.size() == 1 ? "rank " : "ranks ", list,
                      ranks.size() == 1 ? " has " : " have ", v);
  }
  throw CommError(str_cat("ranks of group ", group_name, " disagree on ", what,
                          ": disagreeing rank(s) ", disagreeing, " (", detail, ")"));
}

}  // namespace shardwise
