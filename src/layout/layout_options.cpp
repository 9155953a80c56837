#include "shardwise/layout/layout_options.hpp"

#include "shardwise/core/error.hpp"

namespace shardwise {

void LayoutOptions::validate() const {
  SW_REQUIRE(data_parallel_size >= 1, InvalidArgument,
             "layout options: data_parallel_size must be >= 1, got ", data_parallel_size);
  SW_REQUIRE(!expert_data_parallel_size || *expert_data_parallel_size >= 1, InvalidArgument,
             "layout options: expert_data_parallel_size must be >= 1, got ",
             expert_data_parallel_size.value_or(0));
  SW_REQUIRE(!bucket_size || *bucket_size >= 1, InvalidArgument,
             "layout options: bucket_size must be >= 1 (or unset for one bucket), got ",
             bucket_size.value_or(0));
}

}  // namespace shardwise
