// Items of each bin of a packing, in increasing item order, kept up to date as the improvement
// passes of shard_packing.cpp move items. With it a pass visits only the items it counts against
// its check budget; rebuilding a bin's list, and scanning every item for swap partners, on every
// step made those passes quadratic in the bucket's params (a 300k-param layout took minutes).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "shardwise/layout/shard_packing.hpp"

namespace shardwise::layout_detail {

class BinMembers {
 public:
  explicit BinMembers(const ShardPacking& packing) : members_(packing.loads.size()) {
    for (std::size_t i = 0; i < packing.bin_of.size(); ++i) {
      members_[static_cast<std::size_t>(packing.bin_of[i])].push_back(i);
    }
  }
  const std::vector<std::size_t>& of(std::size_t bin) const { return members_[bin]; }
  void move(std::size_t item, std::size_t from, std::size_t to) {
    auto& source = members_[from];
    source.erase(std::lower_bound(source.begin(), source.end(), item));
    auto& target = members_[to];
    target.insert(std::upper_bound(target.begin(), target.end(), item), item);
  }

 private:
  std::vector<std::vector<std::size_t>> members_;
};

}  // namespace shardwise::layout_detail
