#include "checkpoint_manifest.hpp"

#include <cstdio>
#include <vector>

#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/core/json_text.hpp"

namespace shardwise {

namespace fs = std::filesystem;
using nlohmann::json;

namespace checkpoint_detail {
namespace {

// Bounds no real run reaches; beyond them a value is damage, and would start an endless run or
// overflow the sample index arithmetic.
constexpr std::int64_t kMaxCheckpointStep = 1'000'000'000'000;
constexpr std::int64_t kMaxConsumedSamples = std::int64_t{1} << 53;
constexpr std::int64_t kMaxDataParallelSize = 1 << 20;

// The step directory's own name, when it is one ("DIR/step-0000100/" gives 100).
std::optional<std::int64_t> step_of_directory_name(const fs::path& directory) {
  fs::path dir = directory.lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();
  return parse_step_directory_name(dir.filename().string());
}

// The fields a resume trusts, checked against each other, the directory name and the rank files
// the manifest must list (one per data-parallel rank, named for that rank and size).
void validate_manifest_fields(const json& m, const fs::path& directory, const fs::path& file) {
  const std::int64_t step = manifest_integer(m.at("step"), "step", 0, kMaxCheckpointStep, file);
  if (const auto named = step_of_directory_name(directory)) {
    SW_REQUIRE(*named == step, FormatError, "checkpoint manifest ", quoted(file), ": \"step\" is ",
               step, " but its directory is named for step ", *named);
  }
  const json& trainer = m.at("trainer");
  SW_REQUIRE(trainer.is_object() && trainer.contains("consumed_samples"), FormatError,
             "checkpoint manifest ", quoted(file),
             ": \"trainer\" must be an object with \"consumed_samples\"");
  manifest_integer(trainer.at("consumed_samples"), "trainer.consumed_samples", 0,
                   kMaxConsumedSamples, file);
  if (trainer.contains("next_step")) {
    const std::int64_t next =
        manifest_integer(trainer.at("next_step"), "trainer.next_step", 0, kMaxCheckpointStep, file);
    SW_REQUIRE(next == step, FormatError, "checkpoint manifest ", quoted(file),
               ": \"trainer.next_step\" (", next, ") differs from \"step\" (", step, ")");
  }
  SW_REQUIRE(m.contains("data_parallel_size"), FormatError, "checkpoint manifest ", quoted(file),
             " has no \"data_parallel_size\"");
  const auto size = static_cast<int>(manifest_integer(
      m.at("data_parallel_size"), "data_parallel_size", 1, kMaxDataParallelSize, file));
  const auto files = m.at("optimizer_files").get<std::vector<std::string>>();
  SW_REQUIRE(!files.empty(), FormatError, "checkpoint manifest ", quoted(file),
             ": \"optimizer_files\" is empty (one file per data-parallel rank expected)");
  SW_REQUIRE(static_cast<int>(files.size()) == size, FormatError, "checkpoint manifest ",
             quoted(file), ": \"data_parallel_size\" is ", size, " but \"optimizer_files\" lists ",
             files.size(), " rank file(s)");
  for (int r = 0; r < size; ++r) {
    const std::string expected = optimizer_rank_file_name(r, size);
    SW_REQUIRE(files[static_cast<std::size_t>(r)] == expected, FormatError, "checkpoint manifest ",
               quoted(file), ": \"optimizer_files\"[", r, "] is '",
               printable(files[static_cast<std::size_t>(r)]), "', expected '", expected,
               "' for data_parallel_size ", size);
  }
}

}  // namespace

std::int64_t manifest_integer(const json& value, const std::string& field, std::int64_t low,
                              std::int64_t high, const fs::path& file) {
  const std::optional<std::int64_t> integer = json_integer_within(value, low, high);
  SW_REQUIRE(integer.has_value(), FormatError, "checkpoint manifest ", quoted(file), ": \"", field,
             "\" is ", json_excerpt(value), "; expected an integer in [", low, ", ", high, "]");
  return *integer;
}

std::optional<std::int64_t> parse_step_directory_name(const std::string& name) {
  constexpr std::string_view prefix = "step-";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return {};
  if (name.size() > prefix.size() + 18) return {};  // more digits could overflow int64
  std::int64_t step = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return {};
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

json parse_checkpoint_manifest(std::string_view text, const fs::path& directory,
                               const fs::path& file) {
  const json m = parse_json_text(text, str_cat("checkpoint manifest ", quoted(file)));
  SW_REQUIRE(m.is_object(), FormatError, "checkpoint manifest ", quoted(file),
             " is not a JSON object");
  SW_REQUIRE(manifest_get<std::string>(m, "format", file) == kCheckpointFormat, FormatError,
             "checkpoint manifest ", quoted(file), ": \"format\" is not \"", kCheckpointFormat,
             "\"");
  SW_REQUIRE(m.contains("format_version"), FormatError, "checkpoint manifest ", quoted(file),
             " has no \"format_version\"");
  const std::int64_t version =
      manifest_integer(m.at("format_version"), "format_version", 0, 1 << 30, file);
  SW_REQUIRE(version == kCheckpointFormatVersion, FormatError, "checkpoint manifest ", quoted(file),
             " has format_version ", version, "; this build reads version ",
             kCheckpointFormatVersion);
  // A number's range is manifest_integer's, below: get<int64_t> of 3.5e123 is undefined
  // behaviour (the fuzzer's UBSan found it). Anything else is named malformed here.
  if (!m.contains("step") || !m.at("step").is_number()) manifest_get<std::int64_t>(m, "step", file);
  manifest_get<json>(m, "trainer", file);
  manifest_get<std::string>(m, "optimizer_kind", file);
  manifest_get<std::vector<std::string>>(m, "optimizer_files", file);
  manifest_get<json>(m, "model", file);
  validate_manifest_fields(m, directory, file);
  return m;
}

}  // namespace checkpoint_detail

std::string step_directory_name(std::int64_t step) {
  SW_REQUIRE(step >= 0, InvalidArgument, "checkpoint step must be >= 0 (got ", step, ")");
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%07lld", static_cast<long long>(step));
  return buf;
}

std::string optimizer_rank_file_name(int rank, int size) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "optimizer-rank-%05d-of-%05d.safetensors", rank, size);
  return buf;
}

}  // namespace shardwise
