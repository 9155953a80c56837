// What one rank's optimizer holds, in checkpoint terms: a list of shards, each a contiguous run
// [start, end) of one model parameter's flattened elements, with the fp32 main params of that run
// and the optimizer's state fields for it. Element-sharded (DistributedOptimizer), whole-param
// (LayerWiseDistributedOptimizer), chained and plain local optimizers all reduce to this form, so
// a checkpoint written under one data-parallel layout can be read back under another: a loading
// rank asks for the runs it owns now and copies the overlapping parts of the runs that were saved.
//
// On disk (one safetensors file per rank, also what save_state_dict_to_file writes), a shard is
// the tensors "<param>/main_param" and "<param>/<field>" (field = exp_avg, exp_avg_sq,
// momentum_buffer, ...: one value per element of the run; "step": one value per param), and the
// `__metadata__` entry "shards" maps every param to {"start", "end", "shape", "fields"}.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/optim/optimizer.hpp"

namespace shardwise {

// The main (fp32 master) weights travel as a state field of this name.
inline constexpr std::string_view kMainParamField = "main_param";
// `__metadata__` keys of an optimizer shard file.
inline constexpr std::string_view kShardFileFormat = "shardwise.optimizer_shards";
inline constexpr int kShardFileFormatVersion = 1;

struct OptimizerShard {
  std::string param;                // the model parameter's name
  std::vector<std::int64_t> shape;  // the parameter's full shape
  std::int64_t start = 0;           // first element held (within the flattened parameter)
  std::int64_t end = 0;             // one past the last
  float* main_param = nullptr;      // fp32 main values of [start, end)

  std::int64_t count() const { return end - start; }
};

// The shards `optimizer` holds on this rank, in its param-group order (at most one per param).
std::vector<OptimizerShard> optimizer_shards(const optim::Optimizer& optimizer);

// The shards this rank writes: optimizer_shards less the layer-wise params of which this rank
// holds a replica copy (shard groups smaller than dp: the first replica writes them).
std::vector<OptimizerShard> optimizer_shards_to_save(const optim::Optimizer& optimizer);
// How many replicas of its layer-wise shards the optimizer's data-parallel group holds (dp / S;
// 1 without shard groups).
int layer_wise_replicas(const optim::Optimizer& optimizer);

// True when the optimizer is a plain local one (DDP mode): every data-parallel rank holds the same
// full state, so a checkpoint stores it once (rank 0).
bool optimizer_state_is_replicated(const optim::Optimizer& optimizer);

// Fields stored once per parameter rather than once per element ("step").
bool is_per_param_field(std::string_view field);

// "<param>/<field>".
std::string shard_tensor_name(std::string_view param, std::string_view field);

// One saved shard as a reader finds it: which file holds which elements of which param, with
// which fields (main_param included).
struct SavedShard {
  std::filesystem::path file;
  std::string param;
  std::vector<std::int64_t> shape;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::vector<std::string> fields;
};

// One rank's optimizer shard file, ready to write with writer.write_atomic: the shards of
// `optimizer` (or none, when `include_shards` is false: a rank whose replicated state another
// rank saves; or optimizer_shards_to_save with `skip_replica_copies`, what a checkpoint writes)
// with their state. The writer's tensors are views of the optimizer's main params and of
// `state` (no copies), so the optimizer must not change until the file is written.
// `metadata` entries are added to `__metadata__`.
struct OptimizerShardFile {
  optim::OptimizerStateView state;
  SafetensorsWriter writer;
};
OptimizerShardFile optimizer_shard_file(const optim::Optimizer& optimizer,
                                        const std::map<std::string, std::string>& metadata,
                                        bool include_shards = true,
                                        bool skip_replica_copies = false);

// The shards a file written from optimizer_shard_file declares, checked against its tensors
// (each named tensor present, fp32, of the declared size). Throws FormatError naming the file and
// the tensor or param.
std::vector<SavedShard> read_shard_file_index(const std::filesystem::path& path);
std::vector<SavedShard> read_shard_file_index(const SafetensorsFile& file);

// Fills the main params and the state of every shard `optimizer` holds from the saved shards
// (any split: each element is copied from the saved shard that covers it): in place where the
// optimizer gives state_load_targets() (its state in host memory), else into its state_dict(),
// handed over with take_state_dict once every field was read. `what` names the checkpoint in
// errors. Throws FormatError naming the
// file and tensor when a needed tensor is missing or malformed, and naming the param, field and
// element range when no saved shard covers part of what this rank needs. Per-param fields come
// from the first saved shard of the param.
void load_optimizer_shards(optim::Optimizer& optimizer, const std::vector<SavedShard>& saved,
                           const std::string& what);
// The same with `state`, a state dict of `optimizer` taken beforehand (every field it needs, at
// the right sizes), which is filled and handed over: lets a caller build it on another thread.
void load_optimizer_shards(optim::Optimizer& optimizer, const std::vector<SavedShard>& saved,
                           const std::string& what, optim::OptimizerState state);
// The same, read straight into `targets`, the optimizer's state_load_targets().
void load_optimizer_shards(optim::Optimizer& optimizer, const std::vector<SavedShard>& saved,
                           const std::string& what, optim::StateLoadTargets targets);

// One rank's optimizer state (main params + state fields) as a single safetensors file, and back.
// Loading needs the same shards (or ones covering them): the same optimizer on the same layout.
void save_state_dict_to_file(const optim::Optimizer& optimizer, const std::filesystem::path& path);
void load_state_dict_from_file(optim::Optimizer& optimizer, const std::filesystem::path& path);

}  // namespace shardwise
