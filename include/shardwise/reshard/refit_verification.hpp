// Checking a refit independently of the planner and executor that performed it: the reference
// weights travel by plain point-to-point messages, and the expected bytes of every inference
// tensor are rebuilt from tp_export's slicing rules and the MXFP8 codec.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "shardwise/reshard/refit.hpp"

namespace shardwise {

// The whole fp32 value of every param, sent from group rank `source_rank` to every inference rank
// with plain point-to-point messages: an independent path for checking what a refit delivered.
// Collective over the source and the inference ranks (others return at once). The source passes
// the values (fp32 or bf16); inference ranks get the fp32 copies, other ranks an empty map.
std::map<std::string, std::vector<float>> send_reference_weights(
    ProcessGroup& group, const std::vector<RefitParam>& params, const RefitTopology& topology,
    int source_rank, const std::map<std::string, TensorView>& values);

struct RefitVerification {
  int tensors_checked = 0;
  std::string first_mismatch;  // empty when everything matched
  bool ok() const { return first_mismatch.empty(); }
};

// Checks every persistent tensor of an inference rank bit for bit against the expectation built
// without the planner: the rank's TP slice (tp_export's index arithmetic) of the full fp32
// reference rounded to bf16, then quantized with quantize_mxfp8 for MXFP8 params.
RefitVerification verify_refit(const std::vector<InferenceTensor>& weights,
                               const std::map<std::string, std::vector<float>>& reference, int tp,
                               int tp_rank, const Mxfp8Options& mxfp8_options = {});

}  // namespace shardwise
