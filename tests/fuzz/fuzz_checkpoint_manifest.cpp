// libFuzzer harness: the checkpoint manifest (checkpoint.json) reader, parse and validation, as
// `train --load`, `generate` and `reshard --checkpoint` run it. Bad input must end in a
// shardwise::Error; anything else escaping (a json exception, a stack overflow on deep nesting,
// a signed overflow) is a crash. An accepted manifest must keep its step and sample count.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "../../src/checkpoint/checkpoint_manifest.hpp"
#include "shardwise/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json m = checkpoint_detail::parse_checkpoint_manifest(
        text, "ckpt/step-0000003", "ckpt/step-0000003/checkpoint.json");
    // Validation promised these: a step matching the directory, a sample count in range.
    if (m.at("step").get<std::int64_t>() != 3) std::abort();
    if (m.at("trainer").at("consumed_samples").get<std::int64_t>() < 0) std::abort();
  } catch (const Error&) {
  }
  return 0;
}
