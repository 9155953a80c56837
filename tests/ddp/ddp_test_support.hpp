// Hand-built layouts and small models for the DDP unit tests (independent of the layout
// algorithms, so these tests pin DDP's behaviour on layouts whose every offset is known).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "shardwise/layout/param_info.hpp"
#include "shardwise/layout/param_layout.hpp"

namespace shardwise::testing_support {

inline ParamInfo make_param(std::string name, std::vector<std::int64_t> shape,
                            DType dtype = DType::kFloat32, bool expert = false) {
  ParamInfo p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.dtype = dtype;
  p.expert_parallel = expert;
  return p;
}

// Packs `buckets` (each a list of params in backprop order) one after another; every param
// starts where the previous ended and each bucket is padded up to a multiple of num_shards.
inline PerBufferParamLayout pack_layout(const ParamList& params,
                                        const std::vector<std::vector<ParamId>>& buckets,
                                        int num_shards) {
  PerBufferParamLayout layout;
  layout.num_shards = num_shards;
  std::int64_t offset = 0;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const std::int64_t start = offset;
    for (ParamId id : buckets[b]) {
      const std::int64_t n = params[id].numel();
      layout.param_index_map.push_back({id, offset, offset + n, static_cast<int>(b)});
      offset += n;
    }
    const std::int64_t unpadded = offset - start;
    offset = start + (unpadded + num_shards - 1) / num_shards * num_shards;
    layout.bucket_indices.push_back({start, offset});
    layout.per_bucket_numel_unpadded.push_back(unpadded);
  }
  return layout;
}

// Expects `fn` to throw ErrorType whose message contains every one of `needles`.
template <typename ErrorType>
void expect_error(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an exception mentioning '" << needles.front() << "'";
  } catch (const ErrorType& e) {
    const std::string what = e.what();
    for (const std::string& n : needles) {
      EXPECT_NE(what.find(n), std::string::npos) << "message '" << what << "' lacks '" << n << "'";
    }
  }
}

}  // namespace shardwise::testing_support
