// The overlapped TP GEMMs at np 2 and np 4 (TP group = world, and tp = 2 groups at np 4) against
// the non-overlapped path and an fp64 reference built from the same global matrices on every
// rank. The bound checked is the one of docs/tp_overlap.md: the overlapped result differs from
// the none path by the order the T partial sums are added, 2(T-1) * u * sum_r |partial_r|, and
// by what the BLAS changes when a GEMM has fewer rows (its kernels may accumulate the k products
// of an element in another order), at most 2k * u * sum |a||b|:
//   |overlapped - none| <= 2 (T - 1 + k) * u * sum |a||b|   elementwise, k the local inner size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/tp/overlapped_gemm.hpp"

namespace shardwise::tp {
namespace {

constexpr double kUnitRoundoff = 1.0 / (1 << 24);

std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  for (auto& v : out) v = dist(gen);
  return out;
}

// fp64 c = a * b^T (b [n, k]) and sum |a||b| per element, over rows [row0, row0 + rows) of a.
struct Reference {
  std::vector<double> value;
  std::vector<double> magnitude;
};
Reference reference_abt(const std::vector<float>& a, std::int64_t row0, std::int64_t rows,
                        std::int64_t k, const std::vector<float>& b, std::int64_t n,
                        std::int64_t b_col0 = 0, std::int64_t b_cols = -1) {
  if (b_cols < 0) b_cols = k;
  Reference ref{std::vector<double>(static_cast<std::size_t>(rows * n)),
                std::vector<double>(static_cast<std::size_t>(rows * n))};
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0, mag = 0;
      for (std::int64_t l = 0; l < k; ++l) {
        const double x = a[static_cast<std::size_t>((row0 + i) * k + l)];
        const double y = b[static_cast<std::size_t>(j * b_cols + b_col0 + l)];
        sum += x * y;
        mag += std::abs(x * y);
      }
      ref.value[static_cast<std::size_t>(i * n + j)] = sum;
      ref.magnitude[static_cast<std::size_t>(i * n + j)] = mag;
    }
  }
  return ref;
}

std::vector<OverlapChoice> overlapped_choices() {
  return {{OverlapAlgorithm::kRingExchange, 1},
          {OverlapAlgorithm::kPipeline, 1},
          {OverlapAlgorithm::kPipeline, 3},
          {OverlapAlgorithm::kPipeline, 64}};  // more splits than rows: clamped
}

struct Groups {
  ProcessGroupPtr world;
  std::vector<ProcessGroupPtr> tp;  // the world, and tp = 2 groups when the world has 4 ranks
};
Groups groups() {
  Groups g{init_mpi_world(), {}};
  g.tp.push_back(g.world);
  if (g.world->size() == 4) g.tp.push_back(make_parallel_groups(g.world, {2}).tensor_parallel);
  return g;
}

// Column-parallel forward: the global X [T*m, k] is sharded by rows; this rank's weight shard
// W_r [n, k] (a different seed per rank) multiplies the gathered X.
TEST(OverlappedGemm, AllGatherGemmEqualsGatherThenGemm) {
  for (const auto& group : groups().tp) {
    const int t = group->size();
    const int rank = group->rank();
    const std::int64_t m = 5, k = 24, n = 7;
    const auto x = random_matrix(t * m, k, 11);
    const auto w = random_matrix(n, k, 100 + static_cast<std::uint32_t>(rank));
    const ConstMatrix shard{x.data() + rank * m * k, m, k};
    const RightOperand op{{w.data(), n, k}, blas::Op::kTranspose};
    std::vector<float> expected(static_cast<std::size_t>(t * m * n));
    std::vector<float> expected_gathered(static_cast<std::size_t>(t * m * k));
    all_gather_gemm(*group, {}, shard, op, {expected.data(), t * m, n}, expected_gathered.data());
    EXPECT_EQ(expected_gathered, x);
    const Reference ref = reference_abt(x, 0, t * m, k, w, n);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(expected[i], ref.value[i], 2 * k * kUnitRoundoff * ref.magnitude[i]) << i;
    }
    for (const OverlapChoice& choice : overlapped_choices()) {
      std::vector<float> out(expected.size(), -1.0f), gathered(x.size(), -1.0f);
      all_gather_gemm(*group, choice, shard, op, {out.data(), t * m, n}, gathered.data());
      EXPECT_EQ(gathered, x) << overlap_algorithm_name(choice.algorithm);
      // Same products, no sums across ranks: equal up to the BLAS's row-count dependence.
      for (std::size_t i = 0; i < out.size(); ++i) {
        ASSERT_NEAR(out[i], expected[i], 2 * k * kUnitRoundoff * ref.magnitude[i])
            << overlap_algorithm_name(choice.algorithm) << " splits " << choice.num_splits;
      }
    }
  }
}

// Row-parallel forward: X_r [T*m, k_r] is this rank's column block of a global X [T*m, K],
// W_r [n, k_r] the matching column block of W [n, K]; the sum over ranks is X W^T.
TEST(OverlappedGemm, GemmReduceScatterWithinSummationOrderBound) {
  for (const auto& group : groups().tp) {
    const int t = group->size();
    const int rank = group->rank();
    const std::int64_t m = 6, kr = 16, n = 9, big_k = kr * t;
    const auto x_global = random_matrix(t * m, big_k, 21);
    const auto w_global = random_matrix(n, big_k, 22);
    std::vector<float> x(static_cast<std::size_t>(t * m * kr)), w(static_cast<std::size_t>(n * kr));
    for (std::int64_t i = 0; i < t * m; ++i) {
      for (std::int64_t l = 0; l < kr; ++l) x[i * kr + l] = x_global[i * big_k + rank * kr + l];
    }
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t l = 0; l < kr; ++l) w[j * kr + l] = w_global[j * big_k + rank * kr + l];
    }
    const ConstMatrix input{x.data(), t * m, kr};
    const RightOperand op{{w.data(), n, kr}, blas::Op::kTranspose};
    std::vector<float> expected(static_cast<std::size_t>(m * n));
    gemm_reduce_scatter(*group, {}, input, op, {expected.data(), m, n});
    const Reference ref = reference_abt(x_global, rank * m, m, big_k, w_global, n);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      ASSERT_NEAR(expected[i], ref.value[i], 2 * (big_k + t) * kUnitRoundoff * ref.magnitude[i]);
    }
    for (const OverlapChoice& choice : overlapped_choices()) {
      std::vector<float> out(expected.size(), -1.0f);
      gemm_reduce_scatter(*group, choice, input, op, {out.data(), m, n});
      for (std::size_t i = 0; i < out.size(); ++i) {
        // sum_r |partial_r| <= sum |x||w|: the bound of docs/tp_overlap.md.
        ASSERT_NEAR(out[i], expected[i], 2 * (t - 1 + kr) * kUnitRoundoff * ref.magnitude[i])
            << overlap_algorithm_name(choice.algorithm) << " splits " << choice.num_splits
            << " element " << i;
      }
    }
  }
}

TEST(OverlappedGemm, RingExchangeMovesTheBandwidthOptimalVolume) {
  for (const auto& group : groups().tp) {
    const int t = group->size();
    const std::int64_t m = 4, k = 8, n = 3;
    const auto x = random_matrix(t * m, k, 5);
    const auto w = random_matrix(n, k, 6);
    std::vector<float> out(static_cast<std::size_t>(t * m * n));
    group->barrier()->wait();
    group->reset_traffic();
    all_gather_gemm(*group, {OverlapAlgorithm::kRingExchange, 1}, {x.data(), m, k},
                    {{w.data(), n, k}, blas::Op::kTranspose}, {out.data(), t * m, n});
    // (T-1)/T of the gathered matrix, as a ring all-gather: (T-1) shards of m*k floats.
    EXPECT_EQ(group->traffic().bytes_sent.at(CollectiveKind::kSend), (t - 1) * m * k * 4);
    EXPECT_EQ(group->traffic().bytes_received.at(CollectiveKind::kRecv), (t - 1) * m * k * 4);
    group->reset_traffic();
    std::vector<float> scattered(static_cast<std::size_t>(m * n));
    gemm_reduce_scatter(*group, {OverlapAlgorithm::kRingExchange, 1}, {x.data(), t * m, k},
                        {{w.data(), n, k}, blas::Op::kTranspose}, {scattered.data(), m, n});
    EXPECT_EQ(group->traffic().bytes_sent.at(CollectiveKind::kSend), (t - 1) * m * n * 4);
  }
}

// Column-parallel backward: every dgrad x wgrad combination against none/none; grad_weight
// must be bitwise the same (same GEMM on the same gathered input), grad_input within the
// summation-order bound (the reference magnitude is sum_r |dY_r||W_r|).
TEST(OverlappedGemm, ColumnParallelBackwardCombinations) {
  for (const auto& group : groups().tp) {
    const int t = group->size();
    const int rank = group->rank();
    const std::int64_t m = 5, k = 12, n = 8;
    const auto x = random_matrix(t * m, k, 31);
    std::vector<std::vector<float>> w, dy;
    for (int r = 0; r < t; ++r) {
      w.push_back(random_matrix(n, k, 40 + static_cast<std::uint32_t>(r)));
      dy.push_back(random_matrix(t * m, n, 50 + static_cast<std::uint32_t>(r)));
    }
    std::vector<double> magnitude(static_cast<std::size_t>(m * k), 0.0);
    for (int r = 0; r < t; ++r) {
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t l = 0; l < k; ++l) {
          for (std::int64_t j = 0; j < n; ++j) {
            magnitude[i * k + l] += std::abs(double(dy[r][(rank * m + i) * n + j]) * w[r][j * k + l]);
          }
        }
      }
    }
    auto run = [&](OverlapChoice dgrad, OverlapChoice wgrad, float beta) {
      std::vector<float> dx(static_cast<std::size_t>(m * k)), dw(static_cast<std::size_t>(n * k), 0.5f);
      column_parallel_backward(*group, dgrad, wgrad, {x.data() + rank * m * k, m, k},
                               {w[rank].data(), n, k}, {dy[rank].data(), t * m, n},
                               {{dx.data(), m, k}, {dw.data(), n, k}, beta});
      return std::make_pair(dx, dw);
    };
    const auto [dx_ref, dw_ref] = run({}, {}, 0.0f);
    const Reference dw_exact = [&] {
      // dW = dY^T X: transpose dY into [n, T*m] and reuse reference_abt with b = X^T.
      std::vector<float> dyt(static_cast<std::size_t>(n * t * m)), xt(static_cast<std::size_t>(k * t * m));
      for (std::int64_t i = 0; i < t * m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) dyt[j * t * m + i] = dy[rank][i * n + j];
        for (std::int64_t l = 0; l < k; ++l) xt[l * t * m + i] = x[i * k + l];
      }
      return reference_abt(dyt, 0, n, t * m, xt, k);
    }();
    for (std::size_t i = 0; i < dw_ref.size(); ++i) {
      ASSERT_NEAR(dw_ref[i], dw_exact.value[i], 2 * t * m * kUnitRoundoff * dw_exact.magnitude[i]);
    }
    const OverlapChoice none{}, bulk{OverlapAlgorithm::kBulk, 1},
        ring{OverlapAlgorithm::kRingExchange, 1}, pipeline{OverlapAlgorithm::kPipeline, 2};
    for (const auto& dgrad : {none, bulk, ring, pipeline}) {
      for (const auto& wgrad : {none, bulk}) {
        const auto [dx, dw] = run(dgrad, wgrad, 0.0f);
        EXPECT_EQ(dw, dw_ref) << overlap_algorithm_name(dgrad.algorithm);
        for (std::size_t i = 0; i < dx.size(); ++i) {
          ASSERT_NEAR(dx[i], dx_ref[i], 2 * (t - 1 + n) * kUnitRoundoff * magnitude[i])
              << overlap_algorithm_name(dgrad.algorithm) << "/" << overlap_algorithm_name(wgrad.algorithm);
        }
      }
    }
    // beta = 1 accumulates onto the 0.5 already there.
    const auto accumulated = run(bulk, bulk, 1.0f).second;
    for (std::size_t i = 0; i < dw_ref.size(); ++i) EXPECT_FLOAT_EQ(accumulated[i], dw_ref[i] + 0.5f);
    EXPECT_THROW(run(none, ring, 0.0f), InvalidArgument);
  }
}

// Row-parallel backward: grad_input = AllGather(dY) W_r, grad_weight = AllGather(dY)^T X_r, the
// same for every dgrad algorithm (no sums across ranks).
TEST(OverlappedGemm, RowParallelBackwardEqualsNone) {
  for (const auto& group : groups().tp) {
    const int t = group->size();
    const int rank = group->rank();
    const std::int64_t m = 3, k = 10, n = 6;
    const auto x = random_matrix(t * m, k, 60 + static_cast<std::uint32_t>(rank));
    const auto w = random_matrix(n, k, 70 + static_cast<std::uint32_t>(rank));
    const auto dy = random_matrix(t * m, n, 80);
    auto run = [&](OverlapChoice dgrad) {
      std::vector<float> dx(static_cast<std::size_t>(t * m * k)), dw(static_cast<std::size_t>(n * k));
      row_parallel_backward(*group, dgrad, {x.data(), t * m, k}, {w.data(), n, k},
                            {dy.data() + rank * m * n, m, n}, {dx.data(), t * m, k},
                            {dw.data(), n, k});
      return std::make_pair(dx, dw);
    };
    const auto [dx_ref, dw_ref] = run({});
    // grad_input row i = dY[i] W: check one entry against fp64.
    double expect = 0;
    for (std::int64_t j = 0; j < n; ++j) expect += double(dy[(t * m - 1) * n + j]) * w[j * k + 2];
    EXPECT_NEAR(dx_ref[(t * m - 1) * k + 2], expect, 1e-5);
    for (const OverlapChoice& choice : overlapped_choices()) {
      const auto [dx, dw] = run(choice);
      for (std::int64_t i = 0; i < t * m; ++i) {
        for (std::int64_t l = 0; l < k; ++l) {
          double magnitude = 0;
          for (std::int64_t j = 0; j < n; ++j) magnitude += std::abs(double(dy[i * n + j]) * w[j * k + l]);
          ASSERT_NEAR(dx[i * k + l], dx_ref[i * k + l], 2 * n * kUnitRoundoff * magnitude)
              << overlap_algorithm_name(choice.algorithm);
        }
      }
      EXPECT_EQ(dw, dw_ref) << overlap_algorithm_name(choice.algorithm);
    }
    EXPECT_THROW(run({OverlapAlgorithm::kBulk, 1}), InvalidArgument);
  }
}

}  // namespace
}  // namespace shardwise::tp
