// Reshard executor: runs one rank's side of a ReshardPlan over a ProcessGroup.
//
// Collective over the group: every rank calls execute_reshard with a plan from the same requests
// (checked: the plan fingerprint must agree) even when it has no ops. Per batch of tasks it
//  1. prepares everything locally: send tensors (borrowed from the source when the piece is
//     contiguous in its box, a staging buffer otherwise, or the transform's prepare_send) and
//     receive buffers (the destination itself when the piece is contiguous there, a staging
//     buffer otherwise, or the transform's prepare_recv);
//  2. agrees with every rank that preparation succeeded (one small all_gather), so a bad input on
//     one rank becomes an error on every rank instead of a hang;
//  3. posts every non-blocking receive, then packs and posts each send in turn (task order for
//     both), and does same-rank tasks as local copies matched by task id while they fly;
//  4. waits for each receive in turn and unpacks it (N-d boxes) or calls finalize_recv as soon
//     as it is in, so unpacking overlaps the messages still in flight; then waits for the sends.
//
// Tags: tensor `sub_id` of task `task_id` travels with tag
//   reshard_tag(task_id, sub_id) = (task_id mod (kReshardTagModulus / kReshardMaxSubIds))
//                                  * kReshardMaxSubIds + sub_id,
// which stays below 32768, the least MPI_TAG_UB the standard allows. Tags repeat for large plans,
// which is safe: MPI matches messages of one (sender, tag, communicator) in the order they were
// posted, the process group posts point-to-point operations in issue order on one thread, and
// both sides issue their operations in the same (task id, sub id) order - so the k-th message
// with a given tag between two ranks always meets the k-th receive with that tag. The group must
// not carry other point-to-point traffic while a reshard runs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "shardwise/comm/process_group.hpp"
#include "shardwise/core/mxfp8.hpp"
#include "shardwise/reshard/reshard_plan.hpp"
#include "shardwise/reshard/reshard_transform.hpp"

namespace shardwise {

inline constexpr int kReshardMaxSubIds = 4;
inline constexpr int kReshardTagModulus = 32768;
int reshard_tag(std::int64_t task_id, int sub_id);

// One local box of a source: a plain row-major array in the param's dtype, or MXFP8 storage of
// the box viewed as [prod(extents but last), last extent] (dequantized before sending).
struct SourceShard {
  TensorView values;
  std::optional<Mxfp8ConstView> mxfp8;

  static SourceShard plain(TensorView v) { return {v, std::nullopt}; }
  static SourceShard quantized(Mxfp8ConstView q) { return {{}, q}; }
};

// Per param name: one entry per box this rank holds, in spec order.
using ReshardSources = std::map<std::string, std::vector<SourceShard>>;
using ReshardDestinations = std::map<std::string, std::vector<TensorView>>;

// Returns a plain tensor of `numel` elements of `wire_dtype` for a source box: the values
// themselves, or (quantized source) the box dequantized into `scratch`. Throws InvalidArgument
// naming `what` when sizes or dtypes do not fit.
TensorView ensure_sendable(const SourceShard& shard, DType wire_dtype, std::int64_t numel,
                           std::vector<std::uint64_t>& scratch, const std::string& what);

struct ReshardOptions {
  // Upper bound on the bytes one batch moves (summed over all ranks' tasks, so every rank cuts
  // batches at the same task ids); 0 = one batch. A single larger task still forms its own batch.
  std::int64_t max_batch_bytes = 0;
  // Check that every rank's plan fingerprint agrees before moving anything.
  bool check_plan_agreement = true;
  // Staging buffers (pieces not contiguous in their box) come from here and stay for the next
  // call; null: from a workspace of this call alone (reused across its batches).
  ReshardWorkspace* workspace = nullptr;
};

struct ReshardStats {
  std::int64_t bytes_sent = 0;      // over the wire, all sub-tensors
  std::int64_t bytes_received = 0;  // over the wire
  std::int64_t bytes_copied_locally = 0;
  std::int64_t sends = 0;
  std::int64_t recvs = 0;
  std::int64_t local_copies = 0;
  std::int64_t staged_sends = 0;  // packed because not contiguous in the source box
  std::int64_t staged_recvs = 0;  // unpacked because not contiguous in the destination box
  int batches = 0;
};

// Runs `plan` over `group` (whose ranks are the ranks of the specs). `sources` and
// `destinations` hold this rank's local boxes; params handled by `transform` need no destination
// entry. Throws InvalidArgument naming the param for a missing/mis-sized local box.
ReshardStats execute_reshard(ProcessGroup& group, const ReshardPlan& plan,
                             const ReshardSources& sources, const ReshardDestinations& destinations,
                             ReshardTransform* transform = nullptr,
                             const ReshardOptions& options = {});

}  // namespace shardwise
