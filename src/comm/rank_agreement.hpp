// The verdict of ProcessGroup::check_same_on_all_ranks once every rank's value is gathered
// (private to the MPI backend).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shardwise {

// Returns when `values` (one per group rank) are all equal; otherwise throws CommError naming
// `what`, the ranks that disagree with the most common value (lowest rank on ties) and every
// value with the ranks holding it.
void require_same_values(const std::vector<std::uint64_t>& values, const std::string& group_name,
                         const std::string& what);

}  // namespace shardwise
