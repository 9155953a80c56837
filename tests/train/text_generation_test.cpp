// Generation from a checkpoint: train a tiny byte-level model for a few steps with --save, read it
// back with load_gpt_checkpoint, and check the weights are the trained ones and that greedy
// generation picks, at every step, the argmax of a forward pass the test runs itself on the last
// seq_len tokens (a model bound to the weights the trainer handed out, not the loaded ones).
#include "shardwise/train/text_generation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "scratch_dir.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/train/checkpoint_gpt.hpp"
#include "shardwise/train/trainer.hpp"

namespace shardwise {
namespace {

constexpr int kSeq = 16;

class TextGeneration : public test::ScratchDirTest {
 protected:
  // Trains 12 steps on a short text, saving under ckpt/; keeps the final weights.
  void train(const std::string& position) {
    std::string text;
    for (int i = 0; i < 40; ++i) text += "the quick brown fox jumps over the lazy dog. ";
    write_all(dir_ / "corpus.txt", text);
    const TrainingConfig config = parse_training_config(
        str_cat("model: {layers: 1, hidden: 32, heads: 2, ffn: 64, seq_len: ", kSeq, ", position: ",
                position, ", init_std: 0.2}\n", "data: {source: text, path: '", path("corpus.txt"),
                "', eval_samples: 8}\n", "optimizer: {kind: layer-wise, lr: 0.01, min_lr: 0.001}\n",
                "training: {steps: 12, micro_batch_size: 4, warmup_steps: 2, eval_interval: 0}\n",
                "logging: {progress: false}\n"));
    TrainerOptions options;
    options.quiet = true;
    options.save_dir = path("ckpt");
    options.on_finish = [&](const TrainedModel& m) {
      for (const auto& v : m.values) {
        trained_.emplace_back(v.as<float>(), v.as<float>() + v.numel);
      }
    };
    run_training(config, init_mpi_world(), options);
  }

  // The argmax the model bound to `trained_` predicts after the last kSeq tokens of `text`.
  int reference_argmax(GptModel<float>& model, const std::vector<std::int32_t>& text) {
    const int seq = std::min<int>(static_cast<int>(text.size()), kSeq);
    const std::vector<std::int32_t> targets(seq, -1);
    model.forward(text.data() + text.size() - seq, targets.data(), 1, seq);
    const auto p = model.probabilities(0, seq - 1);
    return static_cast<int>(std::max_element(p.begin(), p.end()) - p.begin());
  }

  void check_greedy_matches_reference(const CheckpointGpt& loaded) {
    GptModel<float> reference(loaded.config);
    std::vector<float*> values, grads;
    std::vector<std::vector<float>> grad_storage;
    for (auto& v : trained_) {
      values.push_back(v.data());
      grads.push_back(grad_storage.emplace_back(v.size()).data());
    }
    reference.bind(values, grads);
    const std::vector<std::int32_t> prompt = {'t', 'h', 'e', ' '};
    // 40 tokens: the context slides past seq_len (16).
    const auto generated = generate_tokens(*loaded.model, prompt, 40, {0.0, 0, 1});
    ASSERT_EQ(generated.size(), 40u);
    std::vector<std::int32_t> text = prompt;
    for (std::size_t i = 0; i < generated.size(); ++i) {
      EXPECT_EQ(generated[i], reference_argmax(reference, text)) << "token " << i;
      text.push_back(generated[i]);
    }
  }

  std::vector<std::vector<float>> trained_;
};

TEST_F(TextGeneration, LoadsTheTrainedWeightsAndGreedyIsTheArgmax) {
  train("learned");
  const CheckpointGpt loaded = load_gpt_checkpoint(dir_ / "ckpt");  // the root: latest step
  EXPECT_EQ(loaded.step, 12);
  EXPECT_EQ(loaded.config.vocab_size, 256);
  EXPECT_EQ(loaded.config.seq_len, kSeq);
  EXPECT_FALSE(loaded.config.rope);
  ASSERT_EQ(loaded.values.size(), trained_.size());
  for (std::size_t i = 0; i < trained_.size(); ++i) EXPECT_EQ(loaded.values[i], trained_[i]) << i;
  check_greedy_matches_reference(loaded);
  // The step directory itself loads the same model.
  EXPECT_EQ(load_gpt_checkpoint(loaded.directory).values, loaded.values);
}

TEST_F(TextGeneration, RotaryModelTakesItsContextFromTheConfig) {
  train("rope");
  const CheckpointGpt loaded = load_gpt_checkpoint(dir_ / "ckpt", 12);
  EXPECT_TRUE(loaded.config.rope);
  EXPECT_EQ(loaded.config.seq_len, kSeq);
  check_greedy_matches_reference(loaded);
}

TEST_F(TextGeneration, SameSeedSameTextAndBadInputIsRefused) {
  train("learned");
  CheckpointGpt loaded = load_gpt_checkpoint(dir_ / "ckpt");
  const std::vector<std::int32_t> prompt = {'f', 'o', 'x'};
  const auto a = generate_tokens(*loaded.model, prompt, 30, {1.0, 0, 5});
  EXPECT_EQ(a, generate_tokens(*loaded.model, prompt, 30, {1.0, 0, 5}));
  EXPECT_NE(a, generate_tokens(*loaded.model, prompt, 30, {1.0, 0, 6}));
  EXPECT_THROW(generate_tokens(*loaded.model, {}, 5, {}), InvalidArgument);
  const std::string oov = test::error_message_of([&] {
    generate_tokens(*loaded.model, {'a', 256}, 5, {});
  });
  EXPECT_NE(oov.find("prompt token 256 at position 1"), std::string::npos) << oov;
  EXPECT_THROW(load_gpt_checkpoint(dir_ / "missing"), IoError);
  EXPECT_THROW(load_gpt_checkpoint(dir_ / "ckpt", 7), IoError);  // no such step
}

}  // namespace
}  // namespace shardwise
