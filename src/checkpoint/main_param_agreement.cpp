#include "main_param_agreement.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "shardwise/checkpoint/checkpoint_shards.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace shardwise::checkpoint_detail {
namespace {

constexpr std::int64_t kSampleStride = 1024;  // one float per 4 KiB

}  // namespace

std::vector<MainParamSample> sample_model_values(const optim::Optimizer& optimizer,
                                                 const std::vector<ModelTensor>& model) {
  std::map<std::string, const float*> fp32_values;
  for (const ModelTensor& t : model) {
    if (t.values.dtype == DType::kFloat32) {
      fp32_values.emplace(t.name, static_cast<const float*>(t.values.data));
    }
  }
  std::vector<MainParamSample> samples;
  for (const OptimizerShard& shard : optimizer_shards(optimizer)) {
    const auto it = fp32_values.find(shard.param);
    if (it == fp32_values.end() || shard.main_param == nullptr || shard.count() == 0) continue;
    const auto add = [&](std::int64_t i) {
      samples.push_back(
          {shard.param, shard.start + i, it->second[shard.start + i], shard.main_param + i});
    };
    for (std::int64_t i = 0; i < shard.count(); i += kSampleStride) add(i);
    if ((shard.count() - 1) % kSampleStride != 0) add(shard.count() - 1);
  }
  return samples;
}

void require_main_params_match(const std::vector<MainParamSample>& samples,
                               const std::filesystem::path& directory) {
  for (const MainParamSample& s : samples) {
    // Bits, not values: -0.0 and 0.0 differ in a copy, NaN is refused earlier.
    if (std::memcmp(&s.model_value, s.main, sizeof(float)) == 0) continue;
    throw FormatError(str_cat(
        "checkpoint ", quoted(directory), ": param '", s.param, "' element ", s.element, " is ",
        s.model_value, " in ", kCheckpointModelFile, " but ", *s.main,
        " in the optimizer rank files' main params; the two must be the same fp32 value (files "
        "from different checkpoints, or a damaged one?)"));
  }
}

}  // namespace shardwise::checkpoint_detail
