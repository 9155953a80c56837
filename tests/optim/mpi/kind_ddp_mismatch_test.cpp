// An optimizer kind over a DDP wrapped for another kind: the grad sync the DDP runs must be the
// one the optimizer reads. The ddp kind over reduce-scattered grads stepped whole params from
// each rank's own shard sums, so the ranks drifted apart without a word; now both pairings throw.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/model_zoo.hpp"
#include "shardwise/optim/data_parallel_setup.hpp"

namespace shardwise::optim {
namespace {

ParamList kind_mismatch_model() {
  TransformerConfig c;
  c.name = "kind-mismatch";
  c.num_layers = 1;
  c.hidden_size = 16;
  c.ffn_hidden_size = 32;
  c.num_attention_heads = 2;
  c.vocab_size = 32;
  return generate_transformer_params(c);
}

std::string mismatch_error(OptimizerKind wrapped_for, OptimizerKind optimizer) {
  const ProcessGroupPtr world = init_mpi_world();
  auto ddps = wrap_with_ddp({kind_mismatch_model()}, wrapped_for, DistributedDataParallelConfig{},
                            DataParallelGroups{world, nullptr});
  try {
    make_optimizer(optimizer, {ddps.front().get()}, {}, {}, world);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(KindDdpMismatch, DdpKindOverReduceScatteredGradsIsRefused) {
  for (OptimizerKind wrapped : {OptimizerKind::kDistributed, OptimizerKind::kLayerWise}) {
    const std::string m = mismatch_error(wrapped, OptimizerKind::kDdp);
    EXPECT_NE(m.find("optimizer 'ddp'"), std::string::npos) << m;
    EXPECT_NE(m.find("reduce-scatters"), std::string::npos) << m;
  }
}

TEST(KindDdpMismatch, DistributedKindOverAllReducedGradsIsRefused) {
  EXPECT_NE(mismatch_error(OptimizerKind::kDdp, OptimizerKind::kDistributed), "");
}

}  // namespace
}  // namespace shardwise::optim
