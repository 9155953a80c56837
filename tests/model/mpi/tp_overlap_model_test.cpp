// The reference GPT at tp = 2 (and tp = 4 where the world allows) with sequence parallelism and
// the TP comm-overlap runtime: every algorithm, and the default mixed plan, against the same TP
// model with overlap off on the same batches: losses and every gradient within the bound of
// docs/tp_overlap.md (differences come only from summation order and the BLAS's row-count
// dependence: a few ulps of each value, far below the 1e-5 relative tolerance used here, while a
// wrong chunk or a missing partial sum would be off by O(1)).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/model/gpt_model.hpp"
#include "shardwise/tp/overlap_plan.hpp"

namespace shardwise {
namespace {

GptConfig small_gpt() {
  GptConfig c;
  c.vocab_size = 50;
  c.seq_len = 8;
  c.num_layers = 2;
  c.hidden = 32;
  c.num_heads = 4;
  c.ffn_hidden = 64;
  c.init_std = 0.2;
  c.make_vocab_size_divisible_by = 4;
  return c;
}

struct ModelRun {
  std::vector<double> losses;
  std::vector<std::vector<float>> grads;
  std::int64_t ring_bytes_sent = 0;  // point-to-point bytes on the TP group: ring exchange only
};

// Two micro-batches forward + backward (gradients accumulate) with the given plan.
ModelRun run_model(const GptConfig& config, ProcessGroup* group, const tp::TpOverlapPlan& plan) {
  TensorParallelOptions options{group, /*sequence_parallel=*/true};
  options.overlap = std::make_shared<const tp::TpOverlapPlan>(plan);
  GptModel<float> model(config, options);
  std::vector<std::vector<float>> values;
  ModelRun run;
  std::vector<float*> v, g;
  for (const auto& p : model.params()) {
    values.emplace_back(p.numel());
    run.grads.emplace_back(p.numel(), 0.0f);
  }
  for (auto& x : values) v.push_back(x.data());
  for (auto& x : run.grads) g.push_back(x.data());
  model.bind(v, g);
  model.init_parameters(7);
  group->barrier()->wait();
  group->reset_traffic();
  std::mt19937 rng(3);  // the same batches on every rank and every run
  std::uniform_int_distribution<int> token(0, config.vocab_size - 1);
  for (int step = 0; step < 2; ++step) {
    std::vector<std::int32_t> tokens, targets;
    for (int i = 0; i < 2 * 8; ++i) {
      tokens.push_back(token(rng));
      targets.push_back(token(rng));
    }
    run.losses.push_back(model.forward(tokens.data(), targets.data(), 2, 8));
    model.backward(1.0, nullptr);
  }
  const auto sent = group->traffic().bytes_sent;
  if (sent.count(CollectiveKind::kSend)) run.ring_bytes_sent = sent.at(CollectiveKind::kSend);
  return run;
}

tp::TpOverlapPlan uniform_plan(tp::OverlapAlgorithm algorithm, int splits) {
  TransformerLayerTPOverlapCfg cfg;
  for (const auto& [name, member] : TransformerLayerTPOverlapCfg::slots()) {
    if (algorithm == tp::OverlapAlgorithm::kBulk) {
      cfg.*member = BulkOverlapCfg{1, 1, false, "bulk"};
    } else if (algorithm == tp::OverlapAlgorithm::kPipeline) {
      cfg.*member = PipelineOverlapCfg{1, 1, splits, false, false, false, "pipeline"};
    } else {
      cfg.*member = RingExchangeOverlapCfg{};
    }
  }
  return tp::tp_overlap_plan(cfg);
}

TEST(TpOverlapModel, EveryAlgorithmMatchesOverlapOff) {
  ProcessGroupPtr world = init_mpi_world();
  for (int tp_size : {2, 4}) {
    if (world->size() % tp_size != 0) continue;
    ProcessGroupPtr group =
        make_parallel_groups(world, ParallelSizes{.tp = tp_size}).tensor_parallel;
    const GptConfig config = small_gpt();
    const ModelRun off = run_model(config, group.get(), tp::TpOverlapPlan{});
    EXPECT_EQ(off.ring_bytes_sent, 0);
    const std::pair<const char*, tp::TpOverlapPlan> plans[] = {
        {"ring_exchange", uniform_plan(tp::OverlapAlgorithm::kRingExchange, 1)},
        {"pipeline", uniform_plan(tp::OverlapAlgorithm::kPipeline, 3)},
        {"bulk", uniform_plan(tp::OverlapAlgorithm::kBulk, 1)},
        {"default mix", tp::tp_overlap_plan(tp::default_tp_overlap_cfg())},
    };
    for (const auto& [name, plan] : plans) {
      SCOPED_TRACE(std::string(name) + " tp=" + std::to_string(tp_size));
      const ModelRun on = run_model(config, group.get(), plan);
      // The slots really ran through the runtime: only ring exchange sends point-to-point.
      EXPECT_EQ(on.ring_bytes_sent > 0,
                std::string(name) != "pipeline" && std::string(name) != "bulk");
      for (std::size_t s = 0; s < off.losses.size(); ++s) {
        EXPECT_NEAR(on.losses[s], off.losses[s], 1e-6 * std::abs(off.losses[s]));
      }
      for (std::size_t i = 0; i < off.grads.size(); ++i) {
        double scale = 0, err = 0;
        for (std::size_t j = 0; j < off.grads[i].size(); ++j) {
          scale = std::max(scale, std::abs(double(off.grads[i][j])));
          err = std::max(err, std::abs(double(on.grads[i][j]) - off.grads[i][j]));
        }
        EXPECT_LE(err, 1e-5 * scale + 1e-12) << "param " << i;
      }
    }
  }
}

}  // namespace
}  // namespace shardwise
