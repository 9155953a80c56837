// Cross-checks the writer against an independent reader: a Python script that parses the file
// with struct/json/numpy only (safetensors_numpy_check.py next to this file).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/float_convert.hpp"

namespace shardwise {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSystemPython = "/usr/bin/python3";

// Runs a command, returning its exit status and combined stdout+stderr.
std::pair<int, std::string> run_command(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) output += buffer.data();
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST(SafetensorsNumpy, IndependentReaderAgreesOnEveryDtype) {
  if (::access(kSystemPython, X_OK) != 0) GTEST_SKIP() << kSystemPython << " not found";
  if (run_command(std::string(kSystemPython) + " -c 'import numpy'").first != 0) {
    GTEST_SKIP() << "numpy is not installed for " << kSystemPython;
  }
  const fs::path script = fs::path(__FILE__).parent_path() / "safetensors_numpy_check.py";
  ASSERT_TRUE(fs::exists(script)) << script;

  std::vector<float> f32(6);
  for (int i = 0; i < 6; ++i) f32[i] = static_cast<float>(i) * 0.5f - 1.0f;
  std::vector<bf16_bits> bf16(8);
  for (int i = 0; i < 8; ++i) bf16[i] = float_to_bf16(static_cast<float>(i) / 8.0f - 2.0f);
  const std::vector<fp16_bits> f16 = {float_to_fp16(0.5f), float_to_fp16(-1.25f),
                                      float_to_fp16(65504.0f)};
  const std::vector<std::uint8_t> e4m3 = {0x00, 0x38, 0x7E, 0xFE};
  const std::vector<std::uint8_t> e8m0 = {127, 128, 1};
  const std::vector<std::uint8_t> u8 = {0, 50, 100, 150, 200};
  const std::vector<std::int32_t> i32 = {-7, 0, 2147483647, -2147483647 - 1};
  const std::vector<std::int64_t> i64 = {-(std::int64_t{1} << 40), (std::int64_t{1} << 62) + 3};
  const float scalar = 3.25f;

  // Added smallest-first so the writer's size ordering is exercised.
  SafetensorsWriter writer;
  writer.add("u8", DType::kUInt8, {5}, u8.data());
  writer.add("e4m3", DType::kFloat8E4M3, {4}, e4m3.data());
  writer.add("bf16", DType::kBFloat16, {2, 4}, bf16.data());
  writer.add("e8m0", DType::kFloat8E8M0, {3}, e8m0.data());
  writer.add("f16", DType::kFloat16, {3}, f16.data());
  writer.add("f32", DType::kFloat32, {2, 3}, f32.data());
  writer.add("empty", DType::kInt32, {0, 5}, nullptr);
  writer.add("i32", DType::kInt32, {2, 2}, i32.data());
  writer.add("scalar", DType::kFloat32, {}, &scalar);
  writer.add("i64", DType::kInt64, {2}, i64.data());
  writer.set_metadata("format", "pt");
  writer.set_metadata("step", "42");
  writer.set_metadata("note", "caf\xc3\xa9 \"quoted\"");

  const fs::path dir =
      fs::path(::testing::TempDir()) / ("safetensors_numpy_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "mixed.safetensors";
  writer.write_atomic(file);

  const auto [status, output] = run_command(std::string(kSystemPython) + " '" + script.string() +
                                            "' '" + file.string() + "'");
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output, "OK\n");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace shardwise
