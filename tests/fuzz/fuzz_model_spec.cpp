// libFuzzer harness: the model-spec JSON reader. Bad input must end in a shardwise::Error; an
// accepted spec must survive a write/read round trip unchanged.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "shardwise/core/error.hpp"
#include "shardwise/layout/model_spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ModelSpec spec;
  try {
    spec = parse_model_spec(text, "fuzz.json");
  } catch (const Error&) {
    return 0;
  }
  const std::string json = model_spec_to_json(spec);
  if (model_spec_to_json(parse_model_spec(json, "round-trip")) != json) std::abort();
  return 0;
}
