// The ddp section of a training config. It is the DDP layer's own DistributedDataParallelConfig
// (shardwise/ddp/ddp_config.hpp; one type, so the trainer hands config.ddp straight to the DDP
// wrapper); this header adds what the config layer needs on top. The bucket size rule lives with
// the struct: DistributedDataParallelConfig::resolved_bucket_size(dp).
//
// YAML keys of the section: grad_reduce_in_fp32, overlap_grad_reduce, overlap_param_gather,
// align_param_gather, use_distributed_optimizer, bucket_size, average_in_collective,
// pad_buckets_for_high_nccl_busbw, per_token_loss, use_legacy_layer_wise_sync (the member
// use_legacy_param_sync: the all_gather_v comparison path), num_buckets_per_group.
#pragma once

#include "shardwise/ddp/ddp_config.hpp"

namespace shardwise {

// The checks of DistributedDataParallelConfig::validate() as ConfigErrors that name the key
// ("ddp.bucket_size must be >= 1"), so a bad file fails at load time.
void validate_ddp_section(const DistributedDataParallelConfig& config);

// Field-by-field equality over every key of the section.
bool same_ddp_settings(const DistributedDataParallelConfig& a,
                       const DistributedDataParallelConfig& b);

}  // namespace shardwise
