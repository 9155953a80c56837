// libFuzzer harness: the YAML training-config loader (its public parse-from-text API). Bad input
// must end in a shardwise::Error (ConfigError); anything else escaping is a crash.
#include <cstdint>
#include <string_view>

#include "shardwise/config/training_config.hpp"
#include "shardwise/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const TrainingConfig config = parse_training_config(text, {}, "fuzz.yaml");
    (void)to_yaml(config);
  } catch (const Error&) {
  }
  return 0;
}
