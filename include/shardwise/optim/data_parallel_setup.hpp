// Wiring of model chunks, DDP and optimizers (the C++ counterpart of Megatron's
// wrap_model_chunks_with_ddp + get_megatron_optimizer), so an application cannot combine a
// layout, a DDP mode and an optimizer inconsistently. The one builder of every front end (the
// trainer and the Python engine): wrap_with_ddp lays the chunks out for the spec's kind, then
// build_optimizer builds the spec's optimizer over the buffers (once the weights are in them).
// Per kind (OptimizerKind, config/optimizer_config.hpp; what each is made of is the table in
// optim/optimizer_kinds.hpp):
//   layer-wise:        shard-aligned layout for Muon-managed params, DistOpt layout for the rest,
//                      reduce-scatter forced on; Chained(LayerWise(Muon), Distributed(AdamW)).
//   distributed:       DistOpt layout, reduce-scatter; Distributed(AdamW) (ZeRO-1).
//   ddp:               default layout, all-reduce; AdamW on every rank.
//   legacy-layer-wise: default layout, all-reduce; LayerWise with ping-pong owners and the
//                      all_gather_v param sync (Megatron-LM PR 4509's baseline).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "shardwise/config/optimizer_config.hpp"
#include "shardwise/ddp/distributed_data_parallel.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/muon.hpp"
#include "shardwise/optim/optimizer.hpp"

namespace shardwise::optim {

// Builds one DDP per model chunk with the layout algorithm and the grad sync the kind needs
// (reduce-scatter for the distributed kinds, all-reduce otherwise; `config`'s choices that the
// kind contradicts are overridden).
std::vector<std::unique_ptr<DistributedDataParallel>> wrap_with_ddp(
    const std::vector<ParamList>& chunks, OptimizerKind kind, DistributedDataParallelConfig config,
    const DataParallelGroups& groups, bool all_layer_wise = false);

// The optim layer's options from the spec (its fields map one to one).
MuonOptions muon_options(const OptimizerConfig& spec);
AdamWOptions adamw_options(const OptimizerConfig& spec);

// The spec's optimizer over the chunks' buffers (laid out by wrap_with_ddp for spec.kind):
// make_optimizer with muon_options / adamw_options, the spec's overlap flag and its clip_grad
// as the step options. `tensor_parallel` names the TP-sharded matrices Muon gathers whole.
std::unique_ptr<Optimizer> build_optimizer(
    const OptimizerConfig& spec, const std::vector<DistributedDataParallel*>& chunks,
    const ProcessGroupPtr& world, std::map<std::string, TensorParallelSplit> tensor_parallel = {});

// The optimizer of a kind over the chunks' buffers; global statistics (grad norm, zero count)
// are reduced over `world`, each element counted exactly once. With
// overlap_param_gather_with_optimizer_step the distributed optimizers (kinds layer-wise and
// distributed) dispatch each bucket group's all-gather as soon as they have updated it; the other
// kinds have no buffer all-gather and ignore it.
std::unique_ptr<Optimizer> make_optimizer(OptimizerKind kind,
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
