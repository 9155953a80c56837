#include "shardwise/optim/adamw.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "optim/optim_test_data.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::optim {
namespace {

using testing::overwrite;

struct Hyper {
  double lr, wd, beta1, beta2, eps;
};

// Independent double-precision AdamW (torch.optim.AdamW semantics).
struct ReferenceAdamW {
  std::vector<double> p, m, v;
  int t = 0;
  explicit ReferenceAdamW(const std::vector<float>& init)
      : p(init.begin(), init.end()), m(init.size(), 0.0), v(init.size(), 0.0) {}
  void step(const std::vector<float>& g, const Hyper& h) {
    ++t;
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] -= h.lr * h.wd * p[i];
      m[i] = h.beta1 * m[i] + (1 - h.beta1) * g[i];
      v[i] = h.beta2 * v[i] + (1 - h.beta2) * double(g[i]) * g[i];
      const double m_hat = m[i] / (1 - std::pow(h.beta1, t));
      const double v_hat = v[i] / (1 - std::pow(h.beta2, t));
      p[i] -= h.lr * m_hat / (std::sqrt(v_hat) + h.eps);
    }
  }
};

std::vector<float> normal_floats(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, scale);
  std::vector<float> out(n);
  for (float& x : out) x = static_cast<float>(d(rng));
  return out;
}

struct Fixture {
  std::vector<float> w0, w1, g0, g1;
  Fixture() : w0(normal_floats(37, 1)), w1(normal_floats(12, 2)), g0(37), g1(12) {}
  std::vector<ParamGroup> groups() {
    std::vector<ParamGroup> groups(2);
    groups[0].name = "decay";
    groups[0].params.push_back({"w0", {37}, w0.data(), g0.data(), {}});
    groups[1].name = "no_decay";
    groups[1].params.push_back({"w1", {3, 4}, w1.data(), g1.data(), {}});
    groups[1].overrides.lr = 3e-2;
    groups[1].overrides.weight_decay = 0.0;
    groups[1].overrides.beta1 = 0.8;
    groups[1].overrides.beta2 = 0.95;
    groups[1].overrides.eps = 1e-6;
    return groups;
  }
};

constexpr AdamWOptions kDefaults{1e-2, 0.1, 0.9, 0.999, 1e-8};

TEST(AdamW, MatchesDoubleReferenceWithBiasCorrectionAndDecay) {
  Fixture f;
  ReferenceAdamW r0(f.w0), r1(f.w1);
  AdamW opt(f.groups(), kDefaults);
  const Hyper h0{1e-2, 0.1, 0.9, 0.999, 1e-8};
  const Hyper h1{3e-2, 0.0, 0.8, 0.95, 1e-6};
  for (int step = 0; step < 6; ++step) {
    overwrite(f.g0, normal_floats(37, 100 + step));
    overwrite(f.g1, normal_floats(12, 200 + step, 0.01));
    opt.step_with_ready_grads();
    r0.step(f.g0, h0);
    r1.step(f.g1, h1);
    // fp32 state vs double: a few ulps of O(1) params per step (~1e-7); updates are O(lr).
    for (std::size_t i = 0; i < f.w0.size(); ++i) ASSERT_NEAR(f.w0[i], r0.p[i], 1e-6) << step;
    for (std::size_t i = 0; i < f.w1.size(); ++i) ASSERT_NEAR(f.w1[i], r1.p[i], 1e-6) << step;
  }
  // Bias correction matters at step 1: m_hat = g and v_hat = g^2, so the first update of every
  // element is lr*g/(|g| + eps) = lr*sign(g) up to eps/|g| ~ 1e-6 (without the correction it
  // would be lr*0.2/sqrt(0.05) ~ 0.9*lr).
  Fixture fresh;
  std::vector<float> before = fresh.w1;
  AdamW first(fresh.groups(), kDefaults);
  overwrite(fresh.g1, normal_floats(12, 5));
  first.step_with_ready_grads();
  for (std::size_t i = 0; i < before.size(); ++i)
    EXPECT_NEAR(before[i] - fresh.w1[i], 3e-2 * (fresh.g1[i] > 0 ? 1 : -1), 1e-5);
}

// Per-param overrides (what shardwise.torch sets from torch's param_groups) win over the group's
// and the defaults: w0 given w1's group values by name steps exactly like w1's group would.
TEST(AdamW, PerParamOverridesWinOverGroupAndDefaults) {
  Fixture by_param, by_group;
  std::vector<ParamGroup> groups = by_group.groups();
  groups[0].overrides = groups[1].overrides;
  AdamW expected(std::move(groups), kDefaults);
  AdamW opt(by_param.groups(), kDefaults);
  GroupOverrides w0 = by_param.groups()[1].overrides;
  w0.momentum = 0.5;  // a Muon field: AdamW ignores it
  opt.set_param_overrides({{"w0", w0}});
  ASSERT_NE(opt.param_overrides("w0"), nullptr);
  EXPECT_EQ(opt.param_overrides("w1"), nullptr);
  for (int step = 0; step < 3; ++step) {
    for (Fixture* f : {&by_param, &by_group}) {
      overwrite(f->g0, normal_floats(37, 800 + step));
      overwrite(f->g1, normal_floats(12, 900 + step));
    }
    opt.step_with_ready_grads();
    expected.step_with_ready_grads();
  }
  EXPECT_EQ(by_param.w0, by_group.w0);
  EXPECT_EQ(by_param.w1, by_group.w1);
  // An lr of 0 for one param freezes it (decay included); an empty map restores the groups'.
  GroupOverrides frozen;
  frozen.lr = 0.0;
  opt.set_param_overrides({{"w1", frozen}});
  const std::vector<float> w1_frozen = by_param.w1;
  opt.step_with_ready_grads();
  EXPECT_EQ(by_param.w1, w1_frozen);
  opt.set_param_overrides({});
  opt.step_with_ready_grads();
  EXPECT_NE(by_param.w1, w1_frozen);
}

TEST(AdamW, ParamWithoutGradIsSkipped) {
  Fixture f;
  ReferenceAdamW r0(f.w0);
  std::vector<ParamGroup> groups = f.groups();
  groups[1].params[0].grad = nullptr;
  AdamW opt(std::move(groups), kDefaults);
  const std::vector<float> w1_before = f.w1;
  for (int step = 0; step < 2; ++step) {
    overwrite(f.g0, normal_floats(37, 300 + step));
    opt.step_with_ready_grads();
    r0.step(f.g0, {1e-2, 0.1, 0.9, 0.999, 1e-8});
  }
  EXPECT_EQ(f.w1, w1_before);
  const OptimizerState state = opt.state_dict();
  EXPECT_EQ(state.at("w1").at("step")[0], 0.0f);
  EXPECT_EQ(state.at("w0").at("step")[0], 2.0f);
  for (std::size_t i = 0; i < f.w0.size(); ++i) EXPECT_NEAR(f.w0[i], r0.p[i], 1e-6);
}

// A param named in set_params_without_grad (unused by every rank's backward) is skipped as one
// whose grad is null: value, moments and step count stay, and its next real step is its first.
TEST(AdamW, ParamsWithoutGradThisStepKeepValueStateAndStepCount) {
  Fixture f;
  ReferenceAdamW r0(f.w0), r1(f.w1);
  AdamW opt(f.groups(), kDefaults);
  const Hyper h0{1e-2, 0.1, 0.9, 0.999, 1e-8};
  const Hyper h1{3e-2, 0.0, 0.8, 0.95, 1e-6};  // the fixture's no_decay group
  for (int step = 0; step < 3; ++step) {
    overwrite(f.g0, normal_floats(37, 400 + step));
    overwrite(f.g1, normal_floats(f.w1.size(), 500 + step));
    const bool w1_unused = step < 2;
    opt.set_params_without_grad(w1_unused ? std::set<std::string>{"w1"} : std::set<std::string>{});
    opt.step_with_ready_grads();
    r0.step(f.g0, h0);
    if (!w1_unused) r1.step(f.g1, h1);
    if (w1_unused) {
      EXPECT_EQ(opt.state_dict().at("w1").at("step")[0], 0.0f) << "step " << step;
    }
  }
  EXPECT_EQ(opt.state_dict().at("w1").at("step")[0], 1.0f);
  EXPECT_EQ(opt.state_dict().at("w0").at("step")[0], 3.0f);
  for (std::size_t i = 0; i < f.w0.size(); ++i) EXPECT_NEAR(f.w0[i], r0.p[i], 1e-6);
  for (std::size_t i = 0; i < f.w1.size(); ++i) EXPECT_NEAR(f.w1[i], r1.p[i], 1e-6);
}

TEST(AdamW, StateDictRoundTripContinuesIdentically) {
  Fixture a;
  AdamW opt_a(a.groups(), kDefaults);
  for (int step = 0; step < 3; ++step) {
    overwrite(a.g0, normal_floats(37, 400 + step));
    overwrite(a.g1, normal_floats(12, 500 + step));
    opt_a.step_with_ready_grads();
  }
  Fixture b;
  b.w0 = a.w0;
  b.w1 = a.w1;
  AdamW opt_b(b.groups(), kDefaults);
  opt_b.load_state_dict(opt_a.state_dict());
  EXPECT_EQ(opt_b.state_dict(), opt_a.state_dict());
  for (int step = 0; step < 3; ++step) {
    overwrite(a.g0, normal_floats(37, 600 + step));
    overwrite(b.g0, normal_floats(37, 600 + step));
    overwrite(a.g1, normal_floats(12, 700 + step));
    overwrite(b.g1, normal_floats(12, 700 + step));
    opt_a.step_with_ready_grads();
    opt_b.step_with_ready_grads();
  }
  EXPECT_EQ(a.w0, b.w0);
  EXPECT_EQ(a.w1, b.w1);
  EXPECT_EQ(opt_a.state_dict(), opt_b.state_dict());
}

// take_state_dict (what a checkpoint load calls) moves the vectors in: the same state as
// load_state_dict, and a bad dict is rejected before any param's state changes.
TEST(AdamW, TakeStateDictLoadsLikeLoadStateDictAndRejectsBadInputUntouched) {
  Fixture a;
  AdamW opt_a(a.groups(), kDefaults);
  overwrite(a.g0, normal_floats(37, 900));
  overwrite(a.g1, normal_floats(12, 901));
  opt_a.step_with_ready_grads();
  Fixture b;
  AdamW opt_b(b.groups(), kDefaults);
  opt_b.take_state_dict(opt_a.state_dict());
  EXPECT_EQ(opt_b.state_dict(), opt_a.state_dict());

  Fixture c;
  AdamW opt_c(c.groups(), kDefaults);
  const OptimizerState before = opt_c.state_dict();
  OptimizerState bad = opt_a.state_dict();
  bad["w1"]["exp_avg"].pop_back();  // w0 (first) is fine, w1 is short
  try {
    opt_c.take_state_dict(std::move(bad));
    ADD_FAILURE() << "no error for a short exp_avg";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("w1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(opt_c.state_dict(), before);
}

TEST(AdamW, LoadStateDictRejectsBadInputNamingTheParam) {
  Fixture f;
  AdamW opt(f.groups(), kDefaults);
  const OptimizerState good = opt.state_dict();
  auto expect_error = [&](OptimizerState bad, const std::string& needle) {
    try {
      opt.load_state_dict(bad);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  OptimizerState missing = good;
  missing.erase("w1");
  expect_error(missing, "w1");
  OptimizerState short_field = good;
  short_field["w0"]["exp_avg"].pop_back();
  expect_error(short_field, "w0");
  OptimizerState no_field = good;
  no_field["w1"].erase("exp_avg_sq");
  expect_error(no_field, "exp_avg_sq");
  OptimizerState bad_step = good;
  bad_step["w0"]["step"] = {1.5f};
  expect_error(bad_step, "step");
  OptimizerState unknown = good;
  unknown["w2"] = good.at("w1");
  expect_error(unknown, "w2");
  // Values the next step would spread into every param (NaN moments were accepted).
  OptimizerState nan_moment = good;
  nan_moment["w1"]["exp_avg"][2] = std::nanf("");
  expect_error(nan_moment, "field 'exp_avg' of param w1 holds nan at index 2");
  OptimizerState negative_square = good;
  negative_square["w0"]["exp_avg_sq"][0] = -1.0f;
  expect_error(negative_square, "holds -1 at index 0 (it cannot be negative)");
  OptimizerState negative_mean = good;
  negative_mean["w0"]["exp_avg"][0] = -1.0f;  // a mean of grads may be negative
  opt.load_state_dict(negative_mean);
}

TEST(AdamW, VectorBodyAndScalarTailGiveTheSameBits) {
  // adamw_update runs 4-wide lanes plus a scalar tail; an element must get the same bits in
  // either, so results do not depend on a param's length or offset in its buffer.
  const std::vector<float> g = normal_floats(13, 7), p0 = normal_floats(13, 8);
  const std::vector<float> m0 = normal_floats(13, 9, 0.1), v_raw = normal_floats(13, 10, 0.1);
  std::vector<float> v0(13);
  for (std::size_t i = 0; i < 13; ++i) v0[i] = v_raw[i] * v_raw[i];
  const AdamWStepScalars s = AdamWStepScalars::make(1e-2, 0.1, 0.9, 0.999, 1e-8, 3);
  std::vector<float> p = p0, m = m0, v = v0;
  adamw_update(s, p, g, m, v);  // 12 in vector lanes, 1 in the tail
  for (std::size_t i = 0; i < 13; ++i) {
    float pi = p0[i], mi = m0[i], vi = v0[i];
    adamw_update(s, {&pi, 1}, {&g[i], 1}, {&mi, 1}, {&vi, 1});  // scalar path
    EXPECT_EQ(pi, p[i]) << i;
    EXPECT_EQ(mi, m[i]) << i;
    EXPECT_EQ(vi, v[i]) << i;
  }
}

TEST(AdamW, GroupsCanBeNarrowedAfterConstruction) {
  // What a layer-wise distributed wrapper does: keep only this rank's params. State follows
  // names, so the remaining param continues exactly as in an un-narrowed optimizer.
  Fixture narrowed, full;
  AdamW opt_n(narrowed.groups(), kDefaults), opt_f(full.groups(), kDefaults);
  const std::vector<float> w0_before = narrowed.w0;
  opt_n.param_groups()[0].params.clear();
  for (int step = 0; step < 3; ++step) {
    for (Fixture* f : {&narrowed, &full}) {
      overwrite(f->g0, normal_floats(37, 800 + step));
      overwrite(f->g1, normal_floats(12, 900 + step));
    }
    opt_n.step_with_ready_grads();
    opt_f.step_with_ready_grads();
  }
  EXPECT_EQ(narrowed.w0, w0_before);
  EXPECT_EQ(narrowed.w1, full.w1);
  const OptimizerState s = opt_n.state_dict();
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.at("w1"), opt_f.state_dict().at("w1"));
  // A param of a new size under an old name is a clear error, not a silent overrun.
  std::vector<float> other(5), other_grad(5);
  opt_n.param_groups()[1].params[0] = {"w1", {5}, other.data(), other_grad.data(), {}};
  EXPECT_THROW(opt_n.step_with_ready_grads(), ShapeError);
}

TEST(AdamW, DuplicateNamesRejected) {
  std::vector<float> w(4), g(4);
  std::vector<OptimParam> params = {{"x", {4}, w.data(), g.data(), {}},
                                    {"x", {4}, w.data(), g.data(), {}}};
  EXPECT_THROW(AdamW(single_group(params), {}), InvalidArgument);
}

}  // namespace
}  // namespace shardwise::optim
