// The memory estimate behind the trainer's start-up refusal: its parameter count is the model's
// own (checked against GptModel's parameter list), it grows with every size the config sets, and
// an impossible model is refused with the estimate and the available memory in the message.
#include "shardwise/train/memory_estimate.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "scratch_dir.hpp"
#include "shardwise/model/gpt_model.hpp"

namespace shardwise {
namespace {

std::int64_t model_parameters(const GptConfig& c) {
  GptModel<float> model(c);
  std::int64_t n = 0;
  for (const auto& p : model.params()) n += p.numel();
  return n;
}

TEST(MemoryEstimate, ParameterCountIsTheModelsForEveryVariant) {
  for (bool rope : {false, true}) {
    for (bool tied : {false, true}) {
      GptConfig c;
      c.vocab_size = 37;
      c.seq_len = 12;
      c.num_layers = 3;
      c.hidden = 24;
      c.num_heads = 4;
      c.ffn_hidden = 40;
      c.rope = rope;
      c.tied_embeddings = tied;
      const MemoryEstimate e = estimate_training_memory(c, 4, 0, 1);
      EXPECT_EQ(e.parameter_count, static_cast<double>(model_parameters(c)))
          << "rope " << rope << " tied " << tied;
      EXPECT_EQ(e.parameters, 4 * e.parameter_count);
      EXPECT_EQ(e.gradients, 4 * e.parameter_count);
      EXPECT_EQ(e.optimizer_state, 12 * e.parameter_count);
      // Sharding the optimizer over 4 ranks divides its state, nothing else.
      const MemoryEstimate sharded = estimate_training_memory(c, 4, 0, 4);
      EXPECT_EQ(sharded.optimizer_state, 3 * e.parameter_count);
      EXPECT_EQ(sharded.activations, e.activations);
    }
  }
}

TEST(MemoryEstimate, ActivationsGrowWithBatchAndLayersAndEvaluationBatchCounts) {
  GptConfig c;
  const double base = estimate_training_memory(c, 2, 0, 1).activations;
  EXPECT_GT(base, 0);
  EXPECT_NEAR(estimate_training_memory(c, 4, 0, 1).activations, 2 * base, 1e-9 * base);
  c.num_layers *= 10;
  EXPECT_GT(estimate_training_memory(c, 2, 0, 1).activations, 5 * base);
  // Evaluation runs batches of up to 64 samples, whatever the micro-batch.
  GptConfig d;
  EXPECT_EQ(estimate_training_memory(d, 2, 1000, 1).activations,
            estimate_training_memory(d, 64, 0, 1).activations);
}

TEST(MemoryEstimate, BillionLayersIsRefusedWithTheEstimateAndWhatIsAvailable) {
  GptConfig c;
  c.num_layers = 1'000'000'000;
  const MemoryEstimate e = estimate_training_memory(c, 8, 256, 1);
  EXPECT_GT(e.total(), 1e14);
  const std::string m =
      test::error_message_of([&] { require_memory_fits(e, 2, 64.0 * (1 << 30)); });
  EXPECT_NE(m.find("this run needs an estimated"), std::string::npos) << m;
  EXPECT_NE(m.find("x 2 rank(s) on this host"), std::string::npos) << m;
  EXPECT_NE(m.find("more than the 64.0 GiB available (MemAvailable"), std::string::npos) << m;
  EXPECT_NE(m.find("optimizer state"), std::string::npos) << m;
}

TEST(MemoryEstimate, AnAddressSpaceLimitBelowTheEstimateIsRefused) {
  GptConfig c;
  c.num_layers = 1'000'000;
  const MemoryEstimate e = estimate_training_memory(c, 8, 256, 1);
  const std::string m =
      test::error_message_of([&] { require_address_space_fits(e, 1.0 * (1 << 30)); });
  EXPECT_NE(m.find("more than the 1.0 GiB of address space"), std::string::npos) << m;
  EXPECT_NE(m.find("ulimit -v"), std::string::npos) << m;
  EXPECT_EQ(test::error_message_of([&] { require_address_space_fits(e, std::nullopt); }),
            "(no error)");
  EXPECT_EQ(test::error_message_of([&] { require_address_space_fits(e, e.total() * 2); }),
            "(no error)");
}

// A fake cgroup hierarchy: `files` maps paths under the root to contents.
std::filesystem::path fake_cgroups(const std::string& name, const std::string& self_cgroup,
                                   const std::map<std::string, std::string>& files) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() /
      ("shardwise-cgroup-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  for (const auto& [path, text] : files) {
    std::filesystem::create_directories((root / path).parent_path());
    std::ofstream(root / path) << text;
  }
  std::ofstream(root / "self") << self_cgroup;
  return root;
}

TEST(MemoryEstimate, CgroupLimitsAreReadThroughTheHierarchy) {
  // v2: the pod's limit sits one level above the process's cgroup, which has none of its own.
  auto root = fake_cgroups("v2", "0::/pod/app\n",
                           {{"pod/memory.max", "1073741824\n"},
                            {"pod/memory.current", "268435456\n"},
                            {"pod/app/memory.max", "max\n"},
                            {"pod/app/memory.current", "200000000\n"}});
  EXPECT_EQ(cgroup_memory_left_bytes(root, root / "self"), 805306368.0);
  std::filesystem::remove_all(root);
  // v1 (hybrid, as on this project's VMs): the memory controller's own hierarchy; "no limit" is
  // ~2^63 there. The v2 line finds no memory.max.
  root = fake_cgroups("v1", "4:memory:/job\n0::/\n",
                      {{"memory/memory.limit_in_bytes", "9223372036854771712\n"},
                       {"memory/job/memory.limit_in_bytes", "4294967296\n"},
                       {"memory/job/memory.usage_in_bytes", "1073741824\n"}});
  EXPECT_EQ(cgroup_memory_left_bytes(root, root / "self"), 3221225472.0);
  std::filesystem::remove_all(root);
  // No limit anywhere, and no readable list: nothing to check against.
  root = fake_cgroups("none", "0::/a\n", {{"a/memory.max", "max\n"}, {"memory.max", "max\n"}});
  EXPECT_EQ(cgroup_memory_left_bytes(root, root / "self"), std::nullopt);
  EXPECT_EQ(cgroup_memory_left_bytes(root, root / "missing"), std::nullopt);
  std::filesystem::remove_all(root);

  const MemoryEstimate e = estimate_training_memory(GptConfig{}, 8, 256, 1);
  const std::string m = test::error_message_of(
      [&] { require_memory_fits(e, 2, e.total(), "the memory cgroup's limit less its usage"); });
  EXPECT_NE(m.find("x 2 rank(s) on this host"), std::string::npos) << m;
  EXPECT_NE(m.find("available (the memory cgroup's limit less its usage)"), std::string::npos) << m;
}

TEST(MemoryEstimate, SmallModelFitsAndMemAvailableIsRead) {
  const auto available = available_memory_bytes();
  ASSERT_TRUE(available.has_value()) << "no MemAvailable in /proc/meminfo";
  EXPECT_GT(*available, 1 << 20);
  const MemoryEstimate e = estimate_training_memory(GptConfig{}, 8, 256, 1);
  EXPECT_EQ(test::error_message_of([&] { require_memory_fits(e, 4, available); }), "(no error)");
  EXPECT_EQ(test::error_message_of([&] { require_memory_fits(e, 4, std::nullopt); }), "(no error)");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3.0 * (1ull << 40)), "3.0 TiB");
}

}  // namespace
}  // namespace shardwise
