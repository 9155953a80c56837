// checkpoint.json and `latest` from hostile files: nesting deep enough to overflow the stack in
// the error path, and values too large to echo in a message.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "scratch_dir.hpp"
#include "shardwise/checkpoint/checkpoint.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

class CheckpointManifestText : public test::ScratchDirTest {
 protected:
  // The FormatError of reading the manifest `text` of step directory step-0000001.
  std::string manifest_error(const std::string& text) {
    const std::filesystem::path step = dir_ / "step-0000001";
    std::filesystem::create_directories(step);
    write_all(step / kCheckpointManifestFile, text);
    try {
      read_checkpoint_manifest(step);
    } catch (const FormatError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(CheckpointManifestText, DeepNestingIsRefusedBeforeParsing) {
  const std::string message = manifest_error(
      str_cat("{\"format\": ", std::string(500000, '['), std::string(500000, ']'), "}"));
  EXPECT_NE(message.find("checkpoint.json': JSON nests deeper than 64 levels"), std::string::npos)
      << message;
}

TEST_F(CheckpointManifestText, MalformedValuesAreCut) {
  const std::string huge(1 << 20, 'z');
  const std::string step_message = manifest_error(str_cat(
      "{\"format\": \"shardwise.checkpoint\", \"format_version\": 1, \"step\": \"", huge,
      "\", \"trainer\": {}, \"optimizer_kind\": \"ddp\", \"optimizer_files\": [], \"model\": {}}"));
  EXPECT_NE(step_message.find("\"step\" is malformed"), std::string::npos) << step_message;
  EXPECT_LT(step_message.size(), 800u);
  const std::string syntax_message = manifest_error(str_cat("[\"", huge));
  EXPECT_NE(syntax_message.find("malformed JSON"), std::string::npos);
  EXPECT_LT(syntax_message.size(), 800u);
}

// A step too large for an integer was converted to int64 (undefined behaviour, found by the
// manifest fuzzer under UBSan) before its range was checked.
TEST_F(CheckpointManifestText, HugeStepIsOutOfRangeNotConverted) {
  const std::string message = manifest_error(
      "{\"format\": \"shardwise.checkpoint\", \"format_version\": 1, \"step\": 3.5e123, "
      "\"trainer\": {\"consumed_samples\": 0}, \"data_parallel_size\": 1, \"optimizer_kind\": "
      "\"ddp\", \"optimizer_files\": [\"optimizer-rank-00000-of-00001.safetensors\"], "
      "\"model\": {}}");
  EXPECT_NE(message.find("\"step\" is 3.5e+123; expected an integer in [0, "), std::string::npos)
      << message;
}

TEST_F(CheckpointManifestText, LatestPointerIsCutInMessages) {
  write_all(dir_ / kCheckpointLatestFile, std::string(10 << 20, 'y'));
  try {
    resolve_checkpoint_directory(dir_);
    FAIL() << "no error";
  } catch (const Error& e) {
    // Refused by size before its text is quoted at all.
    const std::string message = e.what();
    EXPECT_NE(message.find("is 10485760 bytes, more than any pointer file"), std::string::npos)
        << message.substr(0, 300);
    EXPECT_LT(message.size(), 800u);
  }
}

}  // namespace
}  // namespace shardwise
