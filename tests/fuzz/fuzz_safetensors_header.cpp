// libFuzzer harness: the safetensors header parser. Input: 2 bytes of data-area size (little
// endian), then the header bytes. Any outcome but a FormatError or a header that obeys the
// format's invariants is a crash.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shardwise;
  if (size < 2) return 0;
  const std::uint64_t data_bytes = data[0] | (std::uint64_t{data[1]} << 8);
  const std::string_view header(reinterpret_cast<const char*>(data + 2), size - 2);
  SafetensorsHeader parsed;
  try {
    parsed = parse_safetensors_header(header, data_bytes, "fuzz.safetensors");
  } catch (const FormatError&) {
    return 0;
  }
  // Accepted: the tensors tile the data area exactly, in order, with sizes their shapes imply.
  std::uint64_t position = 0;
  for (const SafetensorsTensorInfo& t : parsed.tensors) {
    if (t.data_begin != position || t.name.size() > kSafetensorsMaxNameBytes) std::abort();
    // In bits: the packed F4 / F6 dtypes fill whole bytes only together.
    if (static_cast<std::uint64_t>(t.numel()) * dtype_bits(t.dtype) != 8 * t.nbytes()) std::abort();
    position = t.data_end;
  }
  if (position != data_bytes) std::abort();
  return 0;
}
