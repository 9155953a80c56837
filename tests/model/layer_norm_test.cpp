// Layer norm (rows handled several at a time, fp32 on every ISA level the CPU offers) against a
// plain one-row-at-a-time loop written here, bit for bit: a row's results must not depend on how
// many rows a call gets, where the row sits in the batch (bit-exact resume at another
// data-parallel size relies on it) or which level runs.
#include "shardwise/model/layer_norm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "shardwise/core/cpu_isa.hpp"

namespace shardwise {
namespace {

template <typename Scalar>
struct Reference {
  std::vector<Scalar> y, mean, rstd, dx, dw, db;
};

// The textbook loops, one row at a time, each sum in column order.
template <typename Scalar>
Reference<Scalar> reference(const std::vector<Scalar>& x, const std::vector<Scalar>& dy,
                            const std::vector<Scalar>& w, const std::vector<Scalar>& b,
                            std::int64_t n, std::int64_t h, double eps, Reference<Scalar> r) {
  r.y.resize(x.size());
  r.mean.resize(n);
  r.rstd.resize(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const Scalar* xi = x.data() + i * h;
    Scalar m = 0, var = 0;
    for (std::int64_t c = 0; c < h; ++c) m += xi[c];
    m /= static_cast<Scalar>(h);
    for (std::int64_t c = 0; c < h; ++c) var += (xi[c] - m) * (xi[c] - m);
    var /= static_cast<Scalar>(h);
    r.mean[i] = m;
    r.rstd[i] = Scalar(1) / std::sqrt(var + static_cast<Scalar>(eps));
    for (std::int64_t c = 0; c < h; ++c) {
      r.y[i * h + c] = (xi[c] - m) * r.rstd[i] * w[c] + b[c];
    }
  }
  const Scalar inv_h = Scalar(1) / static_cast<Scalar>(h);
  for (std::int64_t i = 0; i < n; ++i) {
    const Scalar *xi = x.data() + i * h, *dyi = dy.data() + i * h;
    Scalar s1 = 0, s2 = 0;
    for (std::int64_t c = 0; c < h; ++c) {
      const Scalar xhat = (xi[c] - r.mean[i]) * r.rstd[i];
      const Scalar dxhat = dyi[c] * w[c];
      s1 += dxhat;
      s2 += dxhat * xhat;
      r.dw[c] += dyi[c] * xhat;
      r.db[c] += dyi[c];
    }
    for (std::int64_t c = 0; c < h; ++c) {
      const Scalar xhat = (xi[c] - r.mean[i]) * r.rstd[i];
      const Scalar dxhat = dyi[c] * w[c];
      r.dx[i * h + c] += r.rstd[i] * (dxhat - s1 * inv_h - xhat * s2 * inv_h);
    }
  }
  return r;
}

template <typename Scalar>
std::vector<Scalar> random_values(std::size_t count, double mean, double stddev,
                                  std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(mean, stddev);
  std::vector<Scalar> v(count);
  for (Scalar& e : v) e = static_cast<Scalar>(normal(gen));
  return v;
}

template <typename Scalar>
void expect_same_bits(const std::vector<Scalar>& got, const std::vector<Scalar>& want,
                      const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << what << "[" << i << "]";
  }
}

template <typename Scalar>
void check_against_reference(std::int64_t n, std::int64_t h) {
  SCOPED_TRACE(testing::Message() << "n=" << n << " h=" << h << " bytes=" << sizeof(Scalar)
                                  << " isa=" << isa_level_name(active_isa_level()));
  const double eps = 1e-5;
  const auto count = static_cast<std::size_t>(n * h);
  const auto x = random_values<Scalar>(count, 0.3, 2.0, 1);
  const auto dy = random_values<Scalar>(count, 0.0, 1.0, 2);
  const auto w = random_values<Scalar>(h, 1.0, 0.2, 3);
  const auto b = random_values<Scalar>(h, 0.0, 0.2, 4);
  // Gradients that already hold values: backward adds to them.
  Reference<Scalar> start{{},
                          {},
                          {},
                          random_values<Scalar>(count, 0.0, 1.0, 5),
                          random_values<Scalar>(h, 0.0, 1.0, 6),
                          random_values<Scalar>(h, 0.0, 1.0, 7)};
  Reference<Scalar> zero_dx = start;
  zero_dx.dx.assign(count, Scalar(0));
  const Reference<Scalar> want_add = reference(x, dy, w, b, n, h, eps, start);
  const Reference<Scalar> want_overwrite = reference(x, dy, w, b, n, h, eps, zero_dx);

  std::vector<Scalar> y, mean, rstd;
  layer_norm_forward(x.data(), w.data(), b.data(), n, h, eps, y, mean, rstd);
  expect_same_bits(y, want_add.y, "y");
  expect_same_bits(mean, want_add.mean, "mean");
  expect_same_bits(rstd, want_add.rstd, "rstd");

  Reference<Scalar> got = start;
  layer_norm_backward(dy.data(), x.data(), mean, rstd, w.data(), n, h, got.dw.data(), got.db.data(),
                      got.dx, LayerNormDx::kAdd);
  expect_same_bits(got.dx, want_add.dx, "dx (add)");
  expect_same_bits(got.dw, want_add.dw, "dw");
  expect_same_bits(got.db, want_add.db, "db");

  got = start;
  got.dx.assign(3, Scalar(9));  // overwritten and resized
  layer_norm_backward(dy.data(), x.data(), mean, rstd, w.data(), n, h, got.dw.data(), got.db.data(),
                      got.dx);
  expect_same_bits(got.dx, want_overwrite.dx, "dx (overwrite)");
  expect_same_bits(got.dw, want_overwrite.dw, "dw (overwrite)");
}

TEST(LayerNorm, RowGroupsGiveTheBitsOfOneRowAtATime) {
  // Row counts below, at and past multiples of the row group of 8; hidden sizes below, at and
  // past multiples of the 8-column tiles.
  for (IsaLevel level : supported_isa_levels()) {
    ScopedIsaLevel forced(level);
    for (std::int64_t n : {1, 3, 8, 13, 16, 21}) {
      for (std::int64_t h : {1, 5, 8, 21, 64}) {
        check_against_reference<float>(n, h);
        check_against_reference<double>(n, h);
      }
    }
  }
}

TEST(LayerNorm, ARowsResultDoesNotDependOnItsNeighbours) {
  const std::int64_t n = 19, h = 24, first = 5, rows = 9;
  const auto x = random_values<float>(n * h, 0.0, 3.0, 11);
  const auto w = random_values<float>(h, 1.0, 0.2, 12);
  const auto b = random_values<float>(h, 0.0, 0.2, 13);
  std::vector<float> y, mean, rstd, part_y, part_mean, part_rstd;
  layer_norm_forward(x.data(), w.data(), b.data(), n, h, 1e-5, y, mean, rstd);
  layer_norm_forward(x.data() + first * h, w.data(), b.data(), rows, h, 1e-5, part_y, part_mean,
                     part_rstd);
  for (std::int64_t i = 0; i < rows; ++i) {
    ASSERT_EQ(part_mean[i], mean[first + i]) << "row " << first + i;
    ASSERT_EQ(part_rstd[i], rstd[first + i]) << "row " << first + i;
    for (std::int64_t c = 0; c < h; ++c) {
      ASSERT_EQ(part_y[i * h + c], y[(first + i) * h + c]) << "row " << first + i;
    }
  }
}

TEST(LayerNorm, NormalisesEachRow) {
  const std::int64_t n = 10, h = 32;
  const auto x = random_values<double>(n * h, 2.0, 5.0, 21);
  const std::vector<double> w(h, 1.0), b(h, 0.0);
  std::vector<double> y, mean, rstd;
  layer_norm_forward(x.data(), w.data(), b.data(), n, h, 0.0, y, mean, rstd);
  for (std::int64_t i = 0; i < n; ++i) {
    double m = 0, sq = 0;
    for (std::int64_t c = 0; c < h; ++c) m += y[i * h + c];
    for (std::int64_t c = 0; c < h; ++c) sq += y[i * h + c] * y[i * h + c];
    EXPECT_NEAR(m / h, 0.0, 1e-12) << "row " << i;
    EXPECT_NEAR(sq / h, 1.0, 1e-12) << "row " << i;
  }
}

}  // namespace
}  // namespace shardwise
