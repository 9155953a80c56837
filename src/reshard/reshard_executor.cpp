#include "shardwise/reshard/reshard_executor.hpp"

#include <cstring>
#include <deque>
#include <exception>

#include "shardwise/comm/rank_flags.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {

int reshard_tag(std::int64_t task_id, int sub_id) {
  SW_CHECK(task_id >= 0 && sub_id >= 0 && sub_id < kReshardMaxSubIds, "reshard_tag(", task_id, ", ",
           sub_id, ")");
  constexpr std::int64_t kTasksPerCycle = kReshardTagModulus / kReshardMaxSubIds;
  return static_cast<int>((task_id % kTasksPerCycle) * kReshardMaxSubIds + sub_id);
}

TensorView ensure_sendable(const SourceShard& shard, DType wire_dtype, std::int64_t numel,
                           std::vector<std::uint64_t>& scratch, const std::string& what) {
  if (!shard.mxfp8) {
    require_host_view(shard.values, what.c_str());
    SW_REQUIRE(shard.values.dtype == wire_dtype && shard.values.numel == numel &&
                   (numel == 0 || shard.values.data != nullptr),
               InvalidArgument, what, ": source is ", shard.values.numel, " ",
               dtype_name(shard.values.dtype), " elements, the plan needs ", numel, " ",
               dtype_name(wire_dtype));
    return shard.values;
  }
  const Mxfp8ConstView& q = *shard.mxfp8;
  SW_REQUIRE(q.rows * q.cols == numel, InvalidArgument, what, ": quantized source is [", q.rows,
             ", ", q.cols, "], the plan needs ", numel, " elements");
  SW_REQUIRE(wire_dtype == DType::kBFloat16 || wire_dtype == DType::kFloat16 ||
                 wire_dtype == DType::kFloat32,
             InvalidArgument, what, ": cannot dequantize an MXFP8 source to ",
             dtype_name(wire_dtype));
  scratch.assign((static_cast<std::size_t>(numel) * dtype_size(wire_dtype) + 7) / 8, 0);
  TensorView out{scratch.data(), numel, wire_dtype};
  dequantize_mxfp8_into(q, out);
  return out;
}

namespace {

struct PendingSend {
  const TransferOp* op = nullptr;
  std::vector<WireTensor> tensors;
  bool packs = false;  // default path: pack tensors[0] (a staging buffer) right before posting
};

struct PendingRecv {
  const TransferOp* op = nullptr;
  std::vector<WireTensor> buffers;
  bool transformed = false;
  bool staged = false;  // default path: unpack buffers[0] into dst_box once it arrived
  TensorView dst_box;
  std::vector<WorkPtr> works;  // its posted receives
};

class Execution {
 public:
  Execution(ProcessGroup& group, const ReshardPlan& plan, const ReshardSources& sources,
            const ReshardDestinations& destinations, ReshardTransform* transform)
      : group_(group),
        plan_(plan),
        sources_(sources),
        destinations_(destinations),
        transform_(transform) {}

  ReshardStats run(const ReshardOptions& options) {
    ReshardWorkspace this_call;
    workspace_ = options.workspace != nullptr ? options.workspace : &this_call;
    SW_REQUIRE(plan_.my_rank == group_.rank(), InvalidArgument, "reshard: plan is for rank ",
               plan_.my_rank, " but this is rank ", group_.rank(), " of group ", group_.name());
    if (options.check_plan_agreement) {
      group_.check_same_on_all_ranks(plan_.global->fingerprint, "reshard plan fingerprint");
    }
    for (const ParamReshardRequest& req : plan_.params()) check_ranks(req);
    const std::vector<std::int64_t> cuts = batch_cuts(options.max_batch_bytes);
    std::size_t next_op = 0;
    for (std::size_t b = 0; b + 1 < cuts.size(); ++b) {
      std::size_t end = next_op;
      while (end < plan_.ops.size() && plan_.ops[end].task_id < cuts[b + 1]) ++end;
      run_batch(next_op, end);
      next_op = end;
      ++stats_.batches;
    }
    return stats_;
  }

 private:
  void check_ranks(const ParamReshardRequest& req) const {
    for (const ShardingSpec* spec : {&req.source, &req.destination}) {
      for (const auto& [rank, boxes] : spec->boxes_by_rank) {
        SW_REQUIRE(rank < group_.size(), InvalidArgument, "reshard: param ", req.name,
                   " is placed on rank ", rank, " but group ", group_.name(), " has ",
                   group_.size(), " ranks");
      }
    }
  }

  // Task ids where batches start (and the end), the same on every rank.
  std::vector<std::int64_t> batch_cuts(std::int64_t max_bytes) const {
    std::vector<std::int64_t> cuts{0};
    std::int64_t in_batch = 0;
    for (const ReshardTask& t : plan_.global->tasks) {
      const std::int64_t bytes =
          t.global.numel() *
          static_cast<std::int64_t>(dtype_size(plan_.params()[t.param_index].dtype));
      if (max_bytes > 0 && in_batch > 0 && in_batch + bytes > max_bytes) {
        cuts.push_back(t.task_id);
        in_batch = 0;
      }
      in_batch += bytes;
    }
    cuts.push_back(plan_.num_tasks());
    return cuts;
  }

  const ParamReshardRequest& request(const TransferOp& op) const {
    return plan_.params()[static_cast<std::size_t>(op.param_index)];
  }

  ReshardSlice slice_of(const TransferOp& op) const {
    const ParamReshardRequest& req = request(op);
    const ShardingSpec& mine = op.is_send ? req.source : req.destination;
    const ShardingSpec& peers = op.is_send ? req.destination : req.source;
    ReshardSlice s;
    s.dtype = req.dtype;
    s.global_shape = req.source.global_shape;
    s.global = op.global_slice;
    s.box = mine.boxes_of(plan_.my_rank)[static_cast<std::size_t>(op.my_box)];
    s.box_index = op.my_box;
    s.local = op.my_slice;
    s.peer_box = peers.boxes_of(op.peer_rank)[static_cast<std::size_t>(op.peer_box)];
    s.task_id = op.task_id;
    return s;
  }

  bool transformed(const TransferOp& op) const {
    return transform_ != nullptr && transform_->should_transform(op.param);
  }

  // The local source box of `op` in the wire dtype (dequantized once per execution if needed).
  TensorView source_box(const TransferOp& op) {
    const auto key = std::make_pair(op.param_index, op.my_box);
    const auto cached = sendable_.find(key);
    if (cached != sendable_.end()) return cached->second;
    const ParamReshardRequest& req = request(op);
    const std::string what =
        str_cat("reshard: param ", op.param, " source box ", op.my_box, " on rank ", plan_.my_rank);
    const auto it = sources_.find(op.param);
    SW_REQUIRE(it != sources_.end() && static_cast<std::size_t>(op.my_box) < it->second.size(),
               InvalidArgument, what, ": no local source given (rank holds ",
               req.source.boxes_of(plan_.my_rank).size(), " boxes)");
    const Box& box = req.source.boxes_of(plan_.my_rank)[static_cast<std::size_t>(op.my_box)];
    TensorView view = ensure_sendable(it->second[static_cast<std::size_t>(op.my_box)], req.dtype,
                                      box.numel(), scratch_.emplace_back(), what);
    sendable_[key] = view;
    return view;
  }

  TensorView destination_box(const TransferOp& op) const {
    const ParamReshardRequest& req = request(op);
    const Box& box = req.destination.boxes_of(plan_.my_rank)[static_cast<std::size_t>(op.my_box)];
    const auto it = destinations_.find(op.param);
    SW_REQUIRE(it != destinations_.end() && static_cast<std::size_t>(op.my_box) < it->second.size(),
               InvalidArgument, "reshard: param ", op.param, " destination box ", op.my_box, " ",
               to_string(box), " on rank ", plan_.my_rank, ": no local destination given");
    const TensorView v = it->second[static_cast<std::size_t>(op.my_box)];
    SW_REQUIRE(!v.on_device(), InvalidArgument, "reshard: param ", op.param, " destination box ",
               op.my_box, " on rank ", plan_.my_rank, " is in the memory of CUDA device ", v.device,
               "; the executor copies host memory");
    SW_REQUIRE(v.dtype == req.dtype && v.numel == box.numel() && v.data != nullptr, InvalidArgument,
               "reshard: param ", op.param, " destination box ", op.my_box, " ", to_string(box),
               " on rank ", plan_.my_rank, " is ", v.numel, " ", dtype_name(v.dtype),
               " elements, needs ", box.numel(), " ", dtype_name(req.dtype));
    return v;
  }

  void check_count(const TransferOp& op, std::size_t n) const {
    SW_REQUIRE(n >= 1 && n <= static_cast<std::size_t>(kReshardMaxSubIds), InvalidArgument,
               "reshard: param ", op.param, " task ", op.task_id, ": transform produced ", n,
               " tensors (1 to ", kReshardMaxSubIds, " allowed)");
  }

  void prepare(std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const TransferOp& op = plan_.ops[i];
      const bool local = op.peer_rank == plan_.my_rank;
      if (op.is_send) {
        if (local && !transformed(op)) {
          source_box(op);  // validated now; copied directly later
          continue;
        }
        PendingSend send{&op, {}, false};
        const ReshardSlice slice = slice_of(op);
        const TensorView box = source_box(op);
        if (transformed(op)) {
          send.tensors = transform_->prepare_send(op.param, slice, box);
        } else {
          send.tensors.push_back(wire_buffer_for(slice, box, *workspace_));
          send.packs = send.tensors[0].staged();
          if (send.packs) ++stats_.staged_sends;
        }
        check_count(op, send.tensors.size());
        sends_.push_back(std::move(send));
      } else {
        PendingRecv recv{&op, {}, transformed(op), false, {}, {}};
        if (recv.transformed) {
          recv.buffers = transform_->prepare_recv(op.param, slice_of(op));
          check_count(op, recv.buffers.size());
        } else {
          recv.dst_box = destination_box(op);
          if (!local) {
            const ReshardSlice slice = slice_of(op);
            recv.buffers.push_back(wire_buffer_for(slice, recv.dst_box, *workspace_));
            recv.staged = recv.buffers[0].staged();
            if (recv.staged) ++stats_.staged_recvs;
          }
        }
        recvs_.push_back(std::move(recv));
      }
    }
  }

  void run_batch(std::size_t begin, std::size_t end) {
    sends_.clear();
    recvs_.clear();
    workspace_->reset();  // the previous batch's staging buffers are done with
    // Every rank learns whether every rank prepared its batch; all throw if one did not.
    const std::vector<int> failed = run_on_every_rank(group_, [&] { prepare(begin, end); });
    if (!failed.empty()) {
      throw CommError(str_cat("reshard on group ", group_.name(), ": rank(s) ", rank_list(failed),
                              " failed to prepare their transfers (see their error); nothing of "
                              "this batch was moved"));
    }

    // Every receive is posted first, then each send right after it is packed, so a peer's
    // messages can land while this rank packs; both in task order (see the tag note in the
    // header).
    for (PendingRecv& recv : recvs_) post_recv(recv);
    std::vector<WorkPtr> send_works;
    for (PendingSend& send : sends_) post_send(send, send_works);

    // Same-rank tasks while the messages fly; then each receive is unpacked as soon as it is in.
    std::exception_ptr failure;
    try {
      copy_local();
    } catch (...) {
      failure = std::current_exception();
    }
    for (PendingRecv& recv : recvs_) {
      const bool arrived = wait_all(recv.works, failure);
      if (arrived && !failure) finish_recv(recv);
    }
    wait_all(send_works, failure);
    if (failure) std::rethrow_exception(failure);
  }

  void post_recv(PendingRecv& recv) {
    const TransferOp& op = *recv.op;
    if (op.peer_rank == plan_.my_rank) return;  // done in copy_local
    for (std::size_t k = 0; k < recv.buffers.size(); ++k) {
      recv.works.push_back(group_.recv(recv.buffers[k].view(), op.peer_rank,
                                       reshard_tag(op.task_id, static_cast<int>(k))));
      stats_.bytes_received += static_cast<std::int64_t>(recv.buffers[k].view().nbytes());
      ++stats_.recvs;
    }
  }

  void post_send(PendingSend& send, std::vector<WorkPtr>& works) {
    const TransferOp& op = *send.op;
    if (op.peer_rank == plan_.my_rank) return;  // done in copy_local
    if (send.packs) pack_for_wire(slice_of(op), source_box(op), send.tensors[0]);
    for (std::size_t k = 0; k < send.tensors.size(); ++k) {
      works.push_back(group_.send(send.tensors[k].view(), op.peer_rank,
                                  reshard_tag(op.task_id, static_cast<int>(k))));
      stats_.bytes_sent += static_cast<std::int64_t>(send.tensors[k].view().nbytes());
      ++stats_.sends;
    }
  }

  // Waits for every one of `works` (none is left in flight, also after an error); the first
  // error goes to `failure`. Whether all of them completed.
  static bool wait_all(const std::vector<WorkPtr>& works, std::exception_ptr& failure) {
    bool ok = true;
    for (const WorkPtr& w : works) {
      try {
        w->wait();
      } catch (...) {
        ok = false;
        if (!failure) failure = std::current_exception();
      }
    }
    return ok;
  }

  void finish_recv(PendingRecv& recv) {
    const TransferOp& op = *recv.op;
    if (op.peer_rank == plan_.my_rank) return;  // done in copy_local
    if (recv.transformed) {
      transform_->finalize_recv(op.param, slice_of(op), recv.buffers);
    } else if (recv.staged) {
      copy_box(recv.buffers[0].view().data, op.my_slice.extents(),
               Box::whole(op.my_slice.extents()), recv.dst_box.data, slice_of(op).box.extents(),
               op.my_slice, dtype_size(recv.dst_box.dtype));
    }
  }

  void copy_local() {
    std::map<std::int64_t, PendingSend*> local_sends;
    for (PendingSend& send : sends_) {
      if (send.op->peer_rank == plan_.my_rank) local_sends[send.op->task_id] = &send;
    }
    for (PendingRecv& recv : recvs_) {
      const TransferOp& op = *recv.op;
      if (op.peer_rank != plan_.my_rank) continue;
      ++stats_.local_copies;
      if (recv.transformed) {
        const auto it = local_sends.find(op.task_id);
        SW_REQUIRE(it != local_sends.end(), InvalidArgument, "reshard: param ", op.param, " task ",
                   op.task_id,
                   ": the receiving side uses the transform but the sending "
                   "side does not (same rank ",
                   plan_.my_rank, ")");
        std::vector<WireTensor>& sent = it->second->tensors;
        SW_REQUIRE(sent.size() == recv.buffers.size(), InvalidArgument, "reshard: param ", op.param,
                   " task ", op.task_id, ": prepare_send gave ", sent.size(),
                   " tensors, prepare_recv ", recv.buffers.size());
        for (std::size_t k = 0; k < sent.size(); ++k) {
          const TensorView from = sent[k].view();
          const TensorView to = recv.buffers[k].view();
          SW_REQUIRE(from.nbytes() == to.nbytes(), InvalidArgument, "reshard: param ", op.param,
                     " task ", op.task_id, " sub-id ", k, ": sent ", from.nbytes(),
                     " bytes into a buffer of ", to.nbytes());
          if (from.data != to.data) std::memcpy(to.data, from.data, from.nbytes());
          stats_.bytes_copied_locally += static_cast<std::int64_t>(from.nbytes());
        }
        transform_->finalize_recv(op.param, slice_of(op), recv.buffers);
      } else {
        // Direct box-to-box copy: the send op of this task carries the source side.
        const ParamReshardRequest& req = request(op);
        TransferOp send_side = op;
        send_side.is_send = true;
        send_side.my_box = op.peer_box;
        send_side.peer_box = op.my_box;
        send_side.my_slice = op.peer_slice;
        send_side.peer_slice = op.my_slice;
        const TensorView src = source_box(send_side);
        const Box& src_box =
            req.source.boxes_of(plan_.my_rank)[static_cast<std::size_t>(op.peer_box)];
        const Box& dst_box =
            req.destination.boxes_of(plan_.my_rank)[static_cast<std::size_t>(op.my_box)];
        copy_box(src.data, src_box.extents(), op.peer_slice, recv.dst_box.data, dst_box.extents(),
                 op.my_slice, dtype_size(req.dtype));
        stats_.bytes_copied_locally +=
            op.my_slice.numel() * static_cast<std::int64_t>(dtype_size(req.dtype));
      }
    }
  }

  ProcessGroup& group_;
  const ReshardPlan& plan_;
  const ReshardSources& sources_;
  const ReshardDestinations& destinations_;
  ReshardTransform* transform_;
  ReshardStats stats_;
  std::map<std::pair<int, int>, TensorView> sendable_;
  std::deque<std::vector<std::uint64_t>> scratch_;  // dequantized sources (stable addresses)
  std::vector<PendingSend> sends_;
  std::vector<PendingRecv> recvs_;
  ReshardWorkspace* workspace_ = nullptr;  // staging buffers
};

}  // namespace

ReshardStats execute_reshard(ProcessGroup& group, const ReshardPlan& plan,
                             const ReshardSources& sources, const ReshardDestinations& destinations,
                             ReshardTransform* transform, const ReshardOptions& options) {
  SW_REQUIRE(plan.global != nullptr, InvalidArgument, "reshard: empty plan");
  Execution execution(group, plan, sources, destinations, transform);
  return execution.run(options);
}

}  // namespace shardwise
