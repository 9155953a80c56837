// What each optimizer kind of the spec (OptimizerKind, config/optimizer_config.hpp) is made of:
// the layout its buffers get, whether params are synced by the legacy all_gather_v path, and the
// optimizers it builds over one model chunk's DDP. wrap_with_ddp and make_optimizer
// (data_parallel_setup.hpp) read only this table, so a new kind is its spec entry (enum value,
// name, is_distributed_optimizer / shards_optimizer_state) plus one row and builder here.
#pragma once

#include <memory>
#include <vector>

#include "shardwise/config/optimizer_config.hpp"
#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/layout/layout_options.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/muon.hpp"
#include "shardwise/optim/optimizer.hpp"

namespace shardwise::optim {

// The options every kind's builder gets.
struct ChunkOptimizerOptions {
  const MuonOptions& muon;
  const AdamWOptions& adamw;
  bool overlap_param_gather_with_optimizer_step = false;
};

struct OptimizerKindRecipe {
  OptimizerKind kind;
  LayoutAlgorithm layout;
  bool legacy_param_sync;  // params all-gathered whole (all_gather_v) after the step
  // Appends this kind's optimizers over one chunk (ChainedOptimizer chains all of them).
  void (*build)(DistributedDataParallel& ddp, const ChunkOptimizerOptions& options,
                std::vector<std::unique_ptr<Optimizer>>& out);
};

// The recipe of `kind`; InvalidArgument naming the kind when the table has none.
const OptimizerKindRecipe& recipe_of(OptimizerKind kind);

}  // namespace shardwise::optim
