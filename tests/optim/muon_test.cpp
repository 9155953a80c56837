#include "shardwise/optim/muon.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "optim/optim_test_data.hpp"
#include "optim/reference_math.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise::optim {
namespace {

using testing::overwrite;
using testing::random_vector;

using testing::Mat;

TEST(MuonScale, KnownFactors) {
  EXPECT_DOUBLE_EQ(muon_scale_factor(MuonScaleMode::kSpectral, 64, 256), 16.0);
  EXPECT_DOUBLE_EQ(muon_scale_factor(MuonScaleMode::kSpectral, 256, 64), 16.0);
  EXPECT_DOUBLE_EQ(muon_scale_factor(MuonScaleMode::kUnitRmsNorm, 64, 256), 0.5);
  EXPECT_DOUBLE_EQ(muon_scale_factor(MuonScaleMode::kUnitRmsNorm, 256, 64), 2.0);
  EXPECT_DOUBLE_EQ(muon_scale_factor(MuonScaleMode::kShapeScaling, 64, 256), 1.0);
  EXPECT_DOUBLE_EQ(muon_scale_factor(MuonScaleMode::kShapeScaling, 256, 64), 2.0);
  EXPECT_DOUBLE_EQ(muon_scale_factor(MuonScaleMode::kAdamwMatchedRms, 64, 256), 3.2);
  EXPECT_EQ(parse_muon_scale_mode("unit_rms_norm", "x"), MuonScaleMode::kUnitRmsNorm);
  EXPECT_THROW(parse_muon_scale_mode("rms", "muon.scale_mode"), InvalidArgument);
}

struct Config {
  bool nesterov;
  MuonScaleMode mode;
  bool split_qkv;
};

// Independent double Muon over: W (24 x 40, wide), V (40 x 24, tall) and a fused QKV weight
// (48 x 16 split 16/16/16), the last in a group with its own lr/wd/momentum.
struct Model {
  std::vector<float> w, v, qkv, gw, gv, gq;
  Model()
      : w(random_vector(24 * 40, 1, 0.1)),
        v(random_vector(40 * 24, 2, 0.1)),
        qkv(random_vector(48 * 16, 3, 0.1)),
        gw(960),
        gv(960),
        gq(768) {}
  std::vector<ParamGroup> groups() {
    std::vector<ParamGroup> g(2);
    g[0].name = "matrices";
    g[0].params.push_back({"w", {24, 40}, w.data(), gw.data(), {}});
    g[0].params.push_back({"v", {40, 24}, v.data(), gv.data(), {}});
    g[1].name = "attention";
    g[1].params.push_back({"qkv", {48, 16}, qkv.data(), gq.data(), {16, 16, 16}});
    g[1].overrides.lr = 0.05;
    g[1].overrides.weight_decay = 0.2;
    g[1].overrides.momentum = 0.8;
    return g;
  }
  void new_grads(int step) {
    overwrite(gw, random_vector(960, 10 + step));
    overwrite(gv, random_vector(960, 20 + step));
    overwrite(gq, random_vector(768, 30 + step));
  }
};

struct ReferenceParam {
  Mat p, buf;
  std::vector<std::int64_t> parts;
  double lr, wd, mu;
};

void reference_step(ReferenceParam& r, const std::vector<float>& g, const Config& c, double extra) {
  std::vector<std::array<double, 3>> coeffs;
  for (int i = 0; i < 5; ++i) coeffs.push_back(ns_coefficients(NsCoefficients::kQuintic, i));
  const std::int64_t cols = r.p.cols;
  for (double& e : r.p.v) e -= r.lr * r.wd * e;
  Mat u(r.p.rows, cols);
  for (std::size_t i = 0; i < u.v.size(); ++i) {
    r.buf.v[i] = r.mu * r.buf.v[i] + (1 - r.mu) * g[i];
    u.v[i] = c.nesterov ? (1 - r.mu) * g[i] + r.mu * r.buf.v[i] : r.buf.v[i];
  }
  std::int64_t first = 0;
  for (std::int64_t rows : r.parts) {
    Mat part(rows, cols);
    for (std::int64_t i = 0; i < rows * cols; ++i)
      part.v[std::size_t(i)] = u.v[std::size_t(first * cols + i)];
    const Mat o = testing::newton_schulz_reference(part, coeffs);
    const double scale = muon_scale_factor(c.mode, rows, cols) * extra;
    for (std::int64_t i = 0; i < rows * cols; ++i)
      r.p.v[std::size_t(first * cols + i)] -= r.lr * scale * o.v[std::size_t(i)];
    first += rows;
  }
}

Model run_against_reference(const Config& c, int steps) {
  const double extra = 1.5;
  Model m;
  ReferenceParam rw{testing::from_floats(m.w, 24, 40), Mat(24, 40), {24}, 0.02, 0.01, 0.95};
  ReferenceParam rv{testing::from_floats(m.v, 40, 24), Mat(40, 24), {40}, 0.02, 0.01, 0.95};
  ReferenceParam rq{
      testing::from_floats(m.qkv, 48, 16),
      Mat(48, 16),
      c.split_qkv ? std::vector<std::int64_t>{16, 16, 16} : std::vector<std::int64_t>{48},
      0.05,
      0.2,
      0.8};
  MuonOptions o;
  o.lr = 0.02;
  o.weight_decay = 0.01;
  o.momentum = 0.95;
  o.nesterov = c.nesterov;
  o.scale_mode = c.mode;
  o.extra_scale_factor = extra;
  o.split_qkv = c.split_qkv;
  Muon muon(m.groups(), o);
  for (int step = 0; step < steps; ++step) {
    m.new_grads(step);
    muon.step_with_ready_grads();
    reference_step(rw, m.gw, c, extra);
    reference_step(rv, m.gv, c, extra);
    reference_step(rq, m.gq, c, extra);
    // NS in fp32 is within ~5e-7 of double (newton_schulz_test); times lr*scale <= 0.05*1.5*7
    // and a few steps of fp32 momentum/param rounding: 2e-6 is ~10x the measured error.
    EXPECT_LT(testing::max_abs_diff(testing::from_floats(m.w, 24, 40), rw.p), 2e-6) << step;
    EXPECT_LT(testing::max_abs_diff(testing::from_floats(m.v, 40, 24), rv.p), 2e-6) << step;
    EXPECT_LT(testing::max_abs_diff(testing::from_floats(m.qkv, 48, 16), rq.p), 2e-6) << step;
  }
  return m;
}

TEST(Muon, FullStepMatchesDoubleReference) {
  for (MuonScaleMode mode : {MuonScaleMode::kSpectral, MuonScaleMode::kUnitRmsNorm,
                             MuonScaleMode::kShapeScaling, MuonScaleMode::kAdamwMatchedRms}) {
    SCOPED_TRACE(std::string(muon_scale_mode_name(mode)));
    run_against_reference({false, mode, true}, 3);
  }
}

TEST(Muon, NesterovOnAndOffBothMatchAndDiffer) {
  const Model plain = run_against_reference({false, MuonScaleMode::kSpectral, true}, 3);
  const Model nesterov = run_against_reference({true, MuonScaleMode::kSpectral, true}, 3);
  double diff = 0;
  for (std::size_t i = 0; i < plain.w.size(); ++i)
    diff = std::max(diff, double(std::fabs(plain.w[i] - nesterov.w[i])));
  EXPECT_GT(diff, 1e-3);
}

TEST(Muon, SplitQkvOnAndOffBothMatchAndDiffer) {
  const Model split = run_against_reference({true, MuonScaleMode::kSpectral, true}, 2);
  const Model whole = run_against_reference({true, MuonScaleMode::kSpectral, false}, 2);
  double diff = 0;
  for (std::size_t i = 0; i < split.qkv.size(); ++i)
    diff = std::max(diff, double(std::fabs(split.qkv[i] - whole.qkv[i])));
  EXPECT_GT(diff, 1e-3);
  EXPECT_EQ(split.w, whole.w);  // params without a split are unaffected
}

// A param with no grad this step (set_params_without_grad) keeps its value and momentum while
// the others step as usual.
TEST(Muon, ParamsWithoutGradThisStepKeepValueAndMomentum) {
  MuonOptions o;
  Model with_skip, plain;
  Muon skipping(with_skip.groups(), o), reference(plain.groups(), o);
  for (int step = 0; step < 2; ++step) {
    with_skip.new_grads(step);
    plain.new_grads(step);
    reference.step_with_ready_grads();
    skipping.step_with_ready_grads();
  }
  const std::vector<float> v_before = with_skip.v;
  const OptimizerState state_before = skipping.state_dict();
  with_skip.new_grads(2);
  plain.new_grads(2);
  skipping.set_params_without_grad({"v"});
  skipping.step_with_ready_grads();
  reference.step_with_ready_grads();
  EXPECT_EQ(with_skip.v, v_before);
  EXPECT_EQ(skipping.state_dict().at("v"), state_before.at("v"));
  EXPECT_EQ(with_skip.w, plain.w);  // the others stepped as without the skip
  EXPECT_NE(plain.v, v_before);
}

TEST(Muon, StateDictRoundTripContinuesIdentically) {
  MuonOptions o;
  o.nesterov = true;
  Model a;
  Muon muon_a(a.groups(), o);
  for (int step = 0; step < 2; ++step) {
    a.new_grads(step);
    muon_a.step_with_ready_grads();
  }
  Model b;
  b.w = a.w;
  b.v = a.v;
  b.qkv = a.qkv;
  Muon muon_b(b.groups(), o);
  muon_b.load_state_dict(muon_a.state_dict());
  for (int step = 2; step < 5; ++step) {
    a.new_grads(step);
    b.new_grads(step);
    muon_a.step_with_ready_grads();
    muon_b.step_with_ready_grads();
  }
  EXPECT_EQ(a.w, b.w);
  EXPECT_EQ(a.v, b.v);
  EXPECT_EQ(a.qkv, b.qkv);
  EXPECT_EQ(muon_a.state_dict(), muon_b.state_dict());
  // Without the state the continuation differs (the momentum matters).
  Model c;
  c.w = b.w;
  Muon muon_c(c.groups(), o);
  c.new_grads(9);
  b.new_grads(9);
  muon_c.step_with_ready_grads();
  muon_b.step_with_ready_grads();
  EXPECT_NE(c.w, b.w);
}

TEST(Muon, RejectsNon2DParamsNamingThem) {
  std::vector<float> w(8), g(8);
  try {
    Muon(single_group({{"decoder.layers.0.bias", {8}, w.data(), g.data(), {}}}), {});
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("decoder.layers.0.bias"), std::string::npos) << e.what();
  }
  try {
    Muon(single_group({{"qkv", {4, 2}, w.data(), g.data(), {2, 1}}}), {});
    ADD_FAILURE() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("qkv"), std::string::npos) << e.what();
  }
  Muon ok(single_group({{"w", {4, 2}, w.data(), g.data(), {}}}), {});
  OptimizerState s = ok.state_dict();
  s["w"]["momentum_buffer"].resize(7);
  EXPECT_THROW(ok.load_state_dict(s), ShapeError);
  OptimizerState inf_momentum = ok.state_dict();
  inf_momentum["w"]["momentum_buffer"][5] = INFINITY;
  EXPECT_THROW(ok.load_state_dict(inf_momentum), FormatError);
}

}  // namespace
}  // namespace shardwise::optim
