#include "shardwise/optim/chained_optimizer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optim/optim_test_data.hpp"
#include "optim/reference_math.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/optim/adamw.hpp"
#include "shardwise/optim/muon.hpp"

namespace shardwise::optim {
namespace {

using testing::overwrite;
using testing::random_vector;

// A small model: one matrix for Muon, a bias and a norm weight for AdamW.
struct MuonAdamwModel {
  std::vector<float> w = random_vector(16 * 24, 1, 0.1), b = random_vector(16, 2),
                     n = random_vector(24, 3);
  std::vector<float> gw = random_vector(16 * 24, 4), gb = random_vector(16, 5),
                     gn = random_vector(24, 6);

  std::unique_ptr<Optimizer> muon() {
    return std::make_unique<Muon>(single_group({{"w", {16, 24}, w.data(), gw.data(), {}}}),
                                  MuonOptions{});
  }
  std::unique_ptr<Optimizer> adamw() {
    return std::make_unique<AdamW>(
        single_group({{"b", {16}, b.data(), gb.data(), {}}, {"n", {24}, n.data(), gn.data(), {}}}),
        AdamWOptions{});
  }
  std::unique_ptr<ChainedOptimizer> chained() {
    std::vector<std::unique_ptr<Optimizer>> children;
    children.push_back(muon());
    children.push_back(adamw());
    return std::make_unique<ChainedOptimizer>(std::move(children));
  }
  double grad_sq_sum() const {
    double s = 0;
    for (const auto* v : {&gw, &gb, &gn})
      for (float x : *v) s += double(x) * x;
    return s;
  }
};

TEST(ChainedOptimizer, ClipsAllChildrenWithTheExactCoefficient) {
  MuonAdamwModel m, manual;
  const double norm = std::sqrt(m.grad_sq_sum());
  auto opt = m.chained();
  StepOptions so;
  so.clip_grad = 0.25 * norm;
  opt->set_step_options(so);
  const StepResult r = opt->step();
  EXPECT_TRUE(r.stepped);
  EXPECT_NEAR(r.grad_norm, norm, 1e-12 * norm);
  const double coeff = so.clip_grad / (r.grad_norm + 1e-6);
  EXPECT_DOUBLE_EQ(r.clip_coeff, coeff);
  EXPECT_NEAR(r.clip_coeff, 0.25, 1e-6);
  EXPECT_FALSE(r.num_zeros.has_value());
  // Grads were scaled in place by exactly float(coeff) ...
  const auto c = static_cast<float>(coeff);
  for (std::size_t i = 0; i < m.gb.size(); ++i) EXPECT_EQ(m.gb[i], manual.gb[i] * c);
  for (std::size_t i = 0; i < m.gw.size(); ++i) EXPECT_EQ(m.gw[i], manual.gw[i] * c);
  // ... and the children stepped on the clipped grads: same result as stepping them by hand.
  for (auto* v : {&manual.gw, &manual.gb, &manual.gn})
    for (float& x : *v) x *= c;
  auto muon = manual.muon();
  auto adamw = manual.adamw();
  muon->step_with_ready_grads();
  adamw->step_with_ready_grads();
  EXPECT_EQ(m.w, manual.w);
  EXPECT_EQ(m.b, manual.b);
  EXPECT_EQ(m.n, manual.n);
}

TEST(ChainedOptimizer, NoClippingBelowTheThreshold) {
  MuonAdamwModel m, untouched;
  auto opt = m.chained();
  StepOptions so;
  so.clip_grad = 2.0 * std::sqrt(m.grad_sq_sum());
  opt->set_step_options(so);
  const StepResult r = opt->step();
  EXPECT_EQ(r.clip_coeff, 1.0);
  EXPECT_EQ(m.gw, untouched.gw);
  EXPECT_EQ(m.gn, untouched.gn);
  EXPECT_NE(m.w, untouched.w);
}

TEST(ChainedOptimizer, CountsZerosAndUsesTheWorldReduction) {
  MuonAdamwModel m;
  m.gw[0] = 0.0f;
  m.gw[100] = -0.0f;
  m.gb[3] = 0.0f;
  m.gn[23] = 0.0f;
  auto opt = m.chained();
  StepOptions so;
  so.count_zeros = true;
  opt->set_step_options(so);
  EXPECT_EQ(opt->count_zeros(), 4);
  const double local = std::sqrt(m.grad_sq_sum());
  // Pretend three identical ranks: every global statistic is three times the local sum.
  int calls = 0;
  opt->set_world_reduce([&calls](double x) {
    ++calls;
    return 3.0 * x;
  });
  const StepResult r = opt->step();
  ASSERT_TRUE(r.num_zeros.has_value());
  EXPECT_EQ(*r.num_zeros, 12);
  EXPECT_NEAR(r.grad_norm, std::sqrt(3.0) * local, 1e-12 * local);
  EXPECT_EQ(calls, 2);  // one reduction for the norm, one for the zero count
}

// A tensor-parallel duplicate is left out on all TP ranks but one: its grad must not enter this
// rank's norm or zero count, through every child.
TEST(ChainedOptimizer, ExcludedParamsLeaveTheGradStatistics) {
  MuonAdamwModel m;
  std::fill(m.gn.begin(), m.gn.end(), 0.0f);
  auto opt = m.chained();
  StepOptions so;
  so.count_zeros = true;
  opt->set_step_options(so);
  opt->exclude_from_grad_stats({"b", "n"});
  double expected = 0;
  for (float x : m.gw) expected += double(x) * x;
  EXPECT_NEAR(opt->local_grad_sq_sum(), expected, 1e-12 * expected);
  EXPECT_EQ(opt->local_grad_zero_count(), 0);  // n's zeros are not counted
  opt->exclude_from_grad_stats({});
  EXPECT_NEAR(opt->local_grad_sq_sum(), m.grad_sq_sum(), 1e-12 * m.grad_sq_sum());
  EXPECT_EQ(opt->local_grad_zero_count(), 24);
}

TEST(ChainedOptimizer, NonFiniteNormSkipsTheStep) {
  MuonAdamwModel m;
  m.gn[5] = std::nanf("");
  const MuonAdamwModel before = m;
  auto opt = m.chained();
  StepOptions so;
  so.clip_grad = 1.0;
  opt->set_step_options(so);
  const OptimizerState state_before = opt->state_dict();
  const StepResult r = opt->step();
  EXPECT_FALSE(r.stepped);
  EXPECT_TRUE(std::isnan(r.grad_norm));
  EXPECT_EQ(m.w, before.w);
  EXPECT_EQ(m.b, before.b);
  EXPECT_EQ(opt->state_dict(), state_before);
}

// The views a checkpoint writes from: the same fields and values as state_dict(), before any
// step (the zero state) and after; the per-element fields are the optimizers' own buffers.
OptimizerState copy_of(const OptimizerStateView& view) {
  OptimizerState out;
  for (const auto& [param, fields] : view.params()) {
    for (const auto& [field, values] : fields) {
      out[param][field].assign(values.begin(), values.end());
    }
  }
  return out;
}

TEST(ChainedOptimizer, StateViewShowsTheStateDictWithoutCopying) {
  MuonAdamwModel m;
  auto opt = m.chained();
  EXPECT_EQ(copy_of(opt->state_view()), opt->state_dict());
  opt->step();
  opt->step();
  const OptimizerStateView view = opt->state_view();
  EXPECT_EQ(copy_of(view), opt->state_dict());
  EXPECT_EQ(view.params().at("b").at("step")[0], 2.0f);
  const OptimizerStateView again = opt->state_view();
  EXPECT_EQ(view.params().at("w").at("momentum_buffer").data(),
            again.params().at("w").at("momentum_buffer").data());
  EXPECT_EQ(view.params().at("b").at("exp_avg_sq").data(),
            again.params().at("b").at("exp_avg_sq").data());
}

// What a checkpoint load reads into in place: every param of both children, each field the state
// dict has, writable into the optimizers' own buffers (a write shows in state_dict()).
TEST(ChainedOptimizer, StateLoadTargetsWriteTheOptimizersOwnState) {
  MuonAdamwModel m;
  auto opt = m.chained();
  opt->step();
  std::optional<StateLoadTargets> targets = opt->state_load_targets();
  ASSERT_TRUE(targets.has_value());
  const OptimizerState before = opt->state_dict();
  ASSERT_EQ(targets->size(), before.size());
  for (const auto& [param, fields] : before) {
    const StateLoadTarget& t = targets->at(param);
    for (const auto& [field, values] : fields) {
      if (field == "step") {
        ASSERT_NE(t.step, nullptr) << param;
        EXPECT_EQ(static_cast<float>(*t.step), values[0]) << param;
      } else {
        EXPECT_TRUE(std::equal(values.begin(), values.end(), t.arrays.at(field).begin(),
                               t.arrays.at(field).end()))
            << param << "/" << field;
      }
    }
  }
  EXPECT_EQ(targets->at("w").step, nullptr);  // Muon keeps no step count
  targets->at("w").arrays.at("momentum_buffer")[5] = 42.0f;
  targets->at("n").arrays.at("exp_avg_sq")[3] = 7.0f;
  *targets->at("b").step = 9;
  const OptimizerState after = opt->state_dict();
  EXPECT_EQ(after.at("w").at("momentum_buffer")[5], 42.0f);
  EXPECT_EQ(after.at("n").at("exp_avg_sq")[3], 7.0f);
  EXPECT_EQ(after.at("b").at("step")[0], 9.0f);
}

TEST(ChainedOptimizer, StateDictRoutesToChildrenAndContinuesIdentically) {
  MuonAdamwModel a;
  auto opt_a = a.chained();
  opt_a->step();
  const OptimizerState state = opt_a->state_dict();
  EXPECT_EQ(state.size(), 3u);
  EXPECT_TRUE(state.at("w").count("momentum_buffer"));
  EXPECT_TRUE(state.at("b").count("exp_avg"));
  MuonAdamwModel b;
  b.w = a.w;
  b.b = a.b;
  b.n = a.n;
  auto opt_b = b.chained();
  opt_b->load_state_dict(state);
  for (int step = 0; step < 2; ++step) {
    for (MuonAdamwModel* x : {&a, &b}) {
      overwrite(x->gw, random_vector(16 * 24, 40 + step));
      overwrite(x->gb, random_vector(16, 50 + step));
      overwrite(x->gn, random_vector(24, 60 + step));
    }
    opt_a->step();
    opt_b->step();
  }
  EXPECT_EQ(a.w, b.w);
  EXPECT_EQ(a.b, b.b);
  EXPECT_EQ(a.n, b.n);
  OptimizerState unknown = state;
  unknown["head"] = state.at("b");
  EXPECT_THROW(opt_b->load_state_dict(unknown), FormatError);
}

// A dict whose last child's entry is bad loaded the first child's part before the error: the
// optimizer was left half-loaded. Every child checks its part first now.
TEST(ChainedOptimizer, BadStateDictLeavesEveryChildAsItWas) {
  MuonAdamwModel m;
  auto opt = m.chained();
  opt->step();
  const OptimizerState before = opt->state_dict();
  OptimizerState bad = before;
  for (auto& [param, fields] : bad) {
    for (auto& [field, values] : fields) std::fill(values.begin(), values.end(), 7.0f);
  }
  bad["n"]["exp_avg"].resize(3);  // AdamW's part (the second child) is bad
  EXPECT_THROW(opt->load_state_dict(bad), ShapeError);
  EXPECT_EQ(opt->state_dict(), before) << "Muon's momentum was loaded before AdamW's error";
}

// take_state_dict hands every child its entries' vectors, not copies of them: the state a load
// hands over becomes the optimizer's own (a chained optimizer used to copy the whole dict into
// per-child parts, and Muon to copy its part again).
TEST(ChainedOptimizer, TakeStateDictMovesTheVectorsIntoTheChildren) {
  MuonAdamwModel m;
  auto opt = m.chained();
  opt->step();
  OptimizerState state = opt->state_dict();
  const OptimizerState expected = state;
  std::map<std::string, const float*> handed_over;
  for (const auto& [param, fields] : state) {
    for (const auto& [field, values] : fields) {
      if (field != "step") handed_over[param + "/" + field] = values.data();
    }
  }
  opt->take_state_dict(std::move(state));
  EXPECT_EQ(opt->state_dict(), expected);
  std::optional<StateLoadTargets> targets = opt->state_load_targets();
  ASSERT_TRUE(targets.has_value());
  for (const auto& [key, data] : handed_over) {
    const std::string param = key.substr(0, key.find('/'));
    const std::string field = key.substr(key.find('/') + 1);
    EXPECT_EQ(targets->at(param).arrays.at(field).data(), data) << key << " was copied";
  }
  EXPECT_EQ(handed_over.size(), 5u);  // w's momentum; b's and n's two moments
}

TEST(ChainedOptimizer, RejectsAParamOwnedTwice) {
  MuonAdamwModel m;
  std::vector<std::unique_ptr<Optimizer>> children;
  children.push_back(m.adamw());
  children.push_back(m.adamw());
  EXPECT_THROW(ChainedOptimizer{std::move(children)}, InvalidArgument);
}

TEST(ClipCoefficient, MegatronRule) {
  EXPECT_DOUBLE_EQ(clip_coefficient(10.0, 1.0), 1.0 / (10.0 + 1e-6));
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0);
  EXPECT_EQ(clip_coefficient(0.0, 1.0), 1.0);
}

}  // namespace
}  // namespace shardwise::optim
