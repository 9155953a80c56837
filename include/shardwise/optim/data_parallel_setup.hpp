// Wiring of model chunks, DDP and optimizers (the C++ counterpart of Megatron's
// wrap_model_chunks_with_ddp + get_megatron_optimizer), so an application cannot combine a
// layout, a DDP mode and an optimizer inconsistently:
//   layer-wise:        shard-aligned layout for Muon-managed params, DistOpt layout for the rest,
//                      reduce-scatter forced on; Chained(LayerWise(Muon), Distributed(AdamW)).
//   distributed:       DistOpt layout, reduce-scatter; Distributed(AdamW) (ZeRO-1).
//   ddp:               default layout, all-reduce; AdamW on every rank.
//   legacy-layer-wise: default layout, all-reduce; LayerWise with ping-pong owners and the
//                      all_gather_v param sync (Megatron-LM PR 4509's baseline).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/muon.hpp"
#include "shardwise/optim/optimizer.hpp"

namespace shardwise::optim {

enum class OptimizerMode { kLayerWise, kDistributed, kDdp, kLegacyLayerWise };

OptimizerMode parse_optimizer_mode(std::string_view name);  // InvalidArgument lists valid names
std::string_view optimizer_mode_name(OptimizerMode mode);

// Builds one DDP per model chunk with the layout algorithm the mode needs.
std::vector<std::unique_ptr<DistributedDataParallel>> wrap_with_ddp(
    const std::vector<ParamList>& chunks, OptimizerMode mode, DistributedDataParallelConfig config,
    const DataParallelGroups& groups, bool all_layer_wise = false);

// The optimizer of a mode over the chunks' buffers; global statistics (grad norm, zero count)
// are reduced over `world`, each element counted exactly once. With
// overlap_param_gather_with_optimizer_step the distributed optimizers (modes layer-wise and
// distributed) dispatch each bucket group's all-gather as soon as they have updated it; the other
// modes have no buffer all-gather and ignore it.
std::unique_ptr<Optimizer> make_optimizer(OptimizerMode mode,
                                          const std::vector<DistributedDataParallel*>& chunks,
                                          const MuonOptions& muon, const AdamWOptions& adamw,
                                          const ProcessGroupPtr& world,
                                          bool overlap_param_gather_with_optimizer_step = false);

// Every rank's `local` values (the same count on each), bit-exactly, in rank order.
std::vector<double> all_gather_exact(ProcessGroup& group, const std::vector<double>& local);

// Sums a double over the group, deterministically: values are all-gathered bit-exactly and
// added in rank order, so every rank gets the same bits.
double all_reduce_sum_exact(ProcessGroup& group, double local_value);

}  // namespace shardwise::optim
