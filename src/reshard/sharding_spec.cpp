#include "shardwise/reshard/sharding_spec.hpp"

#include <sstream>

#include "shardwise/core/error.hpp"

namespace shardwise {

const std::vector<Box>& ShardingSpec::boxes_of(int rank) const {
  static const std::vector<Box> kNone;
  const auto it = boxes_by_rank.find(rank);
  return it == boxes_by_rank.end() ? kNone : it->second;
}

std::vector<int> ShardingSpec::ranks() const {
  std::vector<int> out;
  for (const auto& [rank, boxes] : boxes_by_rank) out.push_back(rank);
  return out;
}

std::string ShardingSpec::serialize() const {
  std::ostringstream out;
  out << to_string(global_shape);
  for (const auto& [rank, boxes] : boxes_by_rank) {
    out << ' ' << rank << ':';
    for (const Box& b : boxes) out << to_string(b);
  }
  return out.str();
}

void validate_sharding(const std::string& param, const ShardingSpec& spec) {
  for (std::int64_t n : spec.global_shape) {
    SW_REQUIRE(n >= 0, InvalidArgument, "param ", param, ": negative dimension in shape ",
               to_string(spec.global_shape));
  }
  const Box whole = Box::whole(spec.global_shape);
  for (const auto& [rank, boxes] : spec.boxes_by_rank) {
    SW_REQUIRE(rank >= 0, InvalidArgument, "param ", param, ": negative rank ", rank);
    for (std::size_t i = 0; i < boxes.size(); ++i) {
      const Box& b = boxes[i];
      SW_REQUIRE(b.ndim() == spec.global_shape.size(), InvalidArgument, "param ", param, ": rank ",
                 rank, " box ", to_string(b), " has ", b.ndim(), " dims, shape ",
                 to_string(spec.global_shape), " has ", spec.global_shape.size());
      SW_REQUIRE(contains(whole, b) && !b.empty(), InvalidArgument, "param ", param, ": rank ",
                 rank, " box ", to_string(b), " is empty or outside shape ",
                 to_string(spec.global_shape));
      for (std::size_t j = 0; j < i; ++j) {
        SW_REQUIRE(!intersect(boxes[j], b), InvalidArgument, "param ", param, ": rank ", rank,
                   " holds overlapping boxes ", to_string(boxes[j]), " and ", to_string(b));
      }
    }
  }
}

ShardingSpec explicit_sharding(const std::string& param, const std::vector<std::int64_t>& shape,
                               std::map<int, std::vector<Box>> boxes_by_rank) {
  ShardingSpec spec{shape, std::move(boxes_by_rank)};
  validate_sharding(param, spec);
  return spec;
}

ShardingSpec parallel_sharding(const std::string& param, const std::vector<std::int64_t>& shape,
                               const ParallelSharding& p) {
  SW_REQUIRE(p.tp >= 1 && p.ep >= 1 && p.dp >= 1 && p.pp >= 1 && p.stride >= 1 &&
                 p.first_rank >= 0 && p.pp_stage >= 0 && p.pp_stage < p.pp,
             InvalidArgument, "param ", param, ": bad placement tp=", p.tp, " stride=", p.stride,
             " ep=", p.ep, " dp=", p.dp, " pp=", p.pp, " stage=", p.pp_stage,
             " first_rank=", p.first_rank);
  const int ndim = static_cast<int>(shape.size());
  if (p.tp > 1) {
    SW_REQUIRE(p.partition_dim >= 0 && p.partition_dim < ndim, InvalidArgument, "param ", param,
               ": partition_dim ", p.partition_dim, " outside a ", ndim, "-d shape");
    SW_REQUIRE(shape[p.partition_dim] % (p.tp * p.stride) == 0, InvalidArgument, "param ", param,
               ": dim ", p.partition_dim, " of ", to_string(shape), " is not divisible by tp ",
               p.tp, " x stride ", p.stride);
  }
  if (p.ep > 1) {
    SW_REQUIRE(p.expert_dim >= 0 && p.expert_dim < ndim, InvalidArgument, "param ", param,
               ": expert_dim ", p.expert_dim, " outside a ", ndim, "-d shape");
    SW_REQUIRE(shape[p.expert_dim] % p.ep == 0, InvalidArgument, "param ", param, ": dim ",
               p.expert_dim, " of ", to_string(shape), " is not divisible by ep ", p.ep);
    SW_REQUIRE(p.tp == 1 || p.partition_dim != p.expert_dim, InvalidArgument, "param ", param,
               ": tensor and expert parallelism split the same dim ", p.expert_dim);
  }
  ShardingSpec spec;
  spec.global_shape = shape;
  const Box whole = Box::whole(shape);
  for (int e = 0; e < p.ep; ++e) {
    Box expert_box = whole;
    if (p.ep > 1) {
      const std::int64_t n = shape[p.expert_dim] / p.ep;
      expert_box.ranges[p.expert_dim] = {e * n, (e + 1) * n};
    }
    for (int t = 0; t < p.tp; ++t) {
      std::vector<Box> boxes;
      if (p.tp == 1) {
        boxes.push_back(expert_box);
      } else {
        const std::int64_t block = shape[p.partition_dim] / p.stride;
        const std::int64_t part = block / p.tp;
        for (int s = 0; s < p.stride; ++s) {
          Box b = expert_box;
          b.ranges[p.partition_dim] = {s * block + t * part, s * block + (t + 1) * part};
          boxes.push_back(std::move(b));
        }
      }
      for (int d = 0; d < p.dp; ++d) {
        const int rank = p.first_rank + t + p.tp * (e + p.ep * (d + p.dp * p.pp_stage));
        spec.boxes_by_rank[rank] = boxes;
      }
    }
  }
  // Zero-sized dims make empty boxes: such a param has nothing to move.
  if (whole.empty()) spec.boxes_by_rank.clear();
  validate_sharding(param, spec);
  return spec;
}

int pipeline_stage_of_layer(int layer, int num_layers, int pp) {
  SW_REQUIRE(pp >= 1 && num_layers >= 0 && layer >= 0 && layer < num_layers, InvalidArgument,
             "pipeline_stage_of_layer: layer ", layer, " of ", num_layers, " over ", pp, " stages");
  const int base = num_layers / pp;
  const int extra = num_layers % pp;
  // Stages [0, extra) hold base + 1 layers each.
  const int big = extra * (base + 1);
  if (layer < big) return layer / (base + 1);
  return extra + (layer - big) / base;
}

}  // namespace shardwise
