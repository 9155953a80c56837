#include "shardwise/comm/parallel_layout.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

// This rank's index along every dimension.
struct Coords {
  int tp, dp, pp;    // dense
  int etp, ep, edp;  // expert, inside the pipeline stage
  int stage_base;    // world rank of the stage's first rank
};

Coords coords_of(const ParallelSizes& s, int world_rank) {
  Coords c{};
  c.tp = world_rank % s.tp;
  c.dp = (world_rank / s.tp) % s.dp;
  c.pp = world_rank / (s.tp * s.dp);
  c.stage_base = c.pp * s.tp * s.dp;
  const int local = world_rank - c.stage_base;
  c.etp = local % s.etp;
  c.ep = (local / s.etp) % s.ep;
  c.edp = local / (s.etp * s.ep);
  return c;
}

}  // namespace

const char* parallel_dim_name(ParallelDim dim) {
  switch (dim) {
    case ParallelDim::kTensor:
      return "tensor_parallel";
    case ParallelDim::kData:
      return "data_parallel";
    case ParallelDim::kPipeline:
      return "pipeline_parallel";
    case ParallelDim::kExpert:
      return "expert_parallel";
    case ParallelDim::kExpertData:
      return "expert_data_parallel";
    case ParallelDim::kExpertTensor:
      return "expert_tensor_parallel";
  }
  return "unknown";
}

ParallelSizes resolve_parallel_sizes(ParallelSizes s, int world_size) {
  SW_REQUIRE(world_size >= 1, InvalidArgument, "world size ", world_size, " must be >= 1");
  SW_REQUIRE(s.tp >= 1 && s.pp >= 1 && s.ep >= 1 && s.dp >= 0 && s.etp >= 0, InvalidArgument,
             "parallel sizes must be positive (dp and etp may be 0 = derived): tp=", s.tp,
             " pp=", s.pp, " dp=", s.dp, " ep=", s.ep, " etp=", s.etp);
  if (s.dp == 0) {
    SW_REQUIRE(world_size % (s.tp * s.pp) == 0, InvalidArgument, "world size ", world_size,
               " is not divisible by tp (", s.tp, ") * pp (", s.pp, ") = ", s.tp * s.pp);
    s.dp = world_size / (s.tp * s.pp);
  } else {
    SW_REQUIRE(s.tp * s.pp * s.dp == world_size, InvalidArgument, "tp (", s.tp, ") * pp (", s.pp,
               ") * dp (", s.dp, ") = ", s.tp * s.pp * s.dp, " does not equal world size ",
               world_size);
  }
  if (s.etp == 0) s.etp = s.tp;
  const int stage = s.tp * s.dp;
  SW_REQUIRE(stage % (s.etp * s.ep) == 0, InvalidArgument, "etp (", s.etp, ") * ep (", s.ep,
             ") = ", s.etp * s.ep, " does not divide the tp (", s.tp, ") * dp (", s.dp,
             ") = ", stage, " ranks of a pipeline stage");
  return s;
}

int parallel_dim_size(const ParallelSizes& s, ParallelDim dim) {
  switch (dim) {
    case ParallelDim::kTensor:
      return s.tp;
    case ParallelDim::kData:
      return s.dp;
    case ParallelDim::kPipeline:
      return s.pp;
    case ParallelDim::kExpert:
      return s.ep;
    case ParallelDim::kExpertData:
      return s.tp * s.dp / (s.etp * s.ep);
    case ParallelDim::kExpertTensor:
      return s.etp;
  }
  return 0;
}

std::vector<int> parallel_group_members(const ParallelSizes& s, ParallelDim dim, int world_rank) {
  const int world = s.tp * s.dp * s.pp;
  SW_CHECK(s.dp >= 1 && s.etp >= 1, "parallel sizes not resolved (dp=", s.dp, ", etp=", s.etp, ")");
  SW_REQUIRE(world_rank >= 0 && world_rank < world, InvalidArgument, "world rank ", world_rank,
             " outside a world of ", world);
  const Coords c = coords_of(s, world_rank);
  const int n = parallel_dim_size(s, dim);
  std::vector<int> members;
  members.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    int r = 0;
    switch (dim) {
      case ParallelDim::kTensor:
        r = i + s.tp * (c.dp + s.dp * c.pp);
        break;
      case ParallelDim::kData:
        r = c.tp + s.tp * (i + s.dp * c.pp);
        break;
      case ParallelDim::kPipeline:
        r = c.tp + s.tp * (c.dp + s.dp * i);
        break;
      case ParallelDim::kExpert:
        r = c.stage_base + c.etp + s.etp * (i + s.ep * c.edp);
        break;
      case ParallelDim::kExpertData:
        r = c.stage_base + c.etp + s.etp * (c.ep + s.ep * i);
        break;
      case ParallelDim::kExpertTensor:
        r = c.stage_base + i + s.etp * (c.ep + s.ep * c.edp);
        break;
    }
    members.push_back(r);
  }
  return members;
}

}  // namespace shardwise
