// fp32 attention (direct per-head kernels) against the fp64 BLAS path, every ISA level against
// the baseline bit for bit, and combine_rows / causal_dots against plain loops.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "every_isa_level.hpp"
#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/model/attention_kernels.hpp"
#include "shardwise/model/dense_kernels.hpp"

namespace shardwise {
namespace {

std::vector<double> random_values(std::size_t count, double stddev, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0.0, stddev);
  std::vector<double> v(count);
  for (double& e : v) e = normal(gen);
  return v;
}

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// coef(r, k) zeroed outside `range` (what combine_rows asks of its caller).
std::vector<float> ranged_coef(int n, std::int64_t ld, CoefLayout layout, CoefRange range) {
  std::vector<float> coef = to_float(random_values(n * ld, 1.0, 1));
  for (int r = 0; r < n; ++r) {
    for (int k = 0; k < n; ++k) {
      const bool inside = range == CoefRange::kAll || (range == CoefRange::kUpToRow && k <= r) ||
                          (range == CoefRange::kFromRow && k >= r);
      if (!inside) (layout == CoefLayout::kRowMajor ? coef[r * ld + k] : coef[k * ld + r]) = 0;
    }
  }
  return coef;
}

void check_combine_rows(int width) {
  const int n = 11;  // row blocks of 4 and a tail of 3
  const std::int64_t ld_coef = 13, ld_in = 37, ld_out = 35;
  const auto in = to_float(random_values(n * ld_in, 1.0, 2));
  for (IsaLevel level : supported_isa_levels()) {
    ScopedIsaLevel forced(level);
    for (CoefLayout layout : {CoefLayout::kRowMajor, CoefLayout::kTransposed}) {
      for (CoefRange range : {CoefRange::kAll, CoefRange::kUpToRow, CoefRange::kFromRow}) {
        const std::vector<float> coef = ranged_coef(n, ld_coef, layout, range);
        std::vector<float> out(n * ld_out, -7.0f);
        combine_rows(coef.data(), ld_coef, layout, range, n, n, in.data(), ld_in, width, out.data(),
                     ld_out);
        for (int r = 0; r < n; ++r) {
          for (int c = 0; c < ld_out; ++c) {
            if (c >= width) {  // outside the block: untouched
              ASSERT_EQ(out[r * ld_out + c], -7.0f);
              continue;
            }
            float want = 0.0f;
            for (int k = 0; k < n; ++k) {
              const float a =
                  layout == CoefLayout::kRowMajor ? coef[r * ld_coef + k] : coef[k * ld_coef + r];
              want += a * in[k * ld_in + c];
            }
            ASSERT_EQ(out[r * ld_out + c], want)
                << isa_level_name(level) << " width " << width << " layout "
                << static_cast<int>(layout) << " range " << static_cast<int>(range) << " at " << r
                << "," << c;
          }
        }
      }
    }
  }
}

TEST(CombineRows, MatchesAPlainLoopInKOrder) {
  check_combine_rows(19);  // row by row
  check_combine_rows(32);  // register-blocked
}

TEST(CausalDots, LanePartialSumsAddedPairwise) {
  const int n = 6;
  for (int depth : {3, 8, 21}) {
    const std::int64_t lda = 29, ldb = 31, ld_out = 7;
    const auto a = to_float(random_values(n * lda, 1.0, 5));
    const auto b = to_float(random_values(n * ldb, 1.0, 6));
    for (IsaLevel level : supported_isa_levels()) {
      ScopedIsaLevel forced(level);
      std::vector<float> out(n * ld_out, -7.0f);
      causal_dots(a.data(), lda, b.data(), ldb, n, depth, out.data(), ld_out);
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < ld_out; ++j) {
          float want = -7.0f;  // past column n: untouched
          if (j < n) {
            float lane[8] = {};
            const int full = depth / 8 * 8;
            for (int d = 0; d < full; ++d) lane[d % 8] += a[i * lda + d] * b[j * ldb + d];
            want = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                   ((lane[4] + lane[5]) + (lane[6] + lane[7]));
            for (int d = full; d < depth; ++d) want += a[i * lda + d] * b[j * ldb + d];
            if (j > i) want = 0.0f;
          }
          ASSERT_EQ(out[i * ld_out + j], want)
              << isa_level_name(level) << " depth " << depth << " at " << i << "," << j;
        }
      }
    }
  }
}

// Rows long enough for the grouped dots (8 and 4 at a time, depth a multiple of 8): the same
// bits as one dot at a time, and the depth % 8 tail on its own path.
TEST(CausalDots, GroupedDotsGiveTheOneAtATimeBits) {
  const int n = 13;
  for (int depth : {64, 24, 20}) {
    const std::int64_t lda = depth + 3, ldb = depth + 5, ld_out = n;
    const auto a = to_float(random_values(n * lda, 1.0, 7));
    const auto b = to_float(random_values(n * ldb, 1.0, 8));
    std::vector<float> want(n * ld_out);
    {
      ScopedIsaLevel baseline(IsaLevel::kBaseline);
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          // A 1 x 1 product: always the one-dot path.
          causal_dots(a.data() + i * lda, lda, b.data() + j * ldb, ldb, 1, depth,
                      &want[i * ld_out + j], 1);
          if (j > i) want[i * ld_out + j] = 0.0f;
        }
      }
    }
    for (IsaLevel level : supported_isa_levels()) {
      ScopedIsaLevel forced(level);
      std::vector<float> out(n * ld_out, -7.0f);
      causal_dots(a.data(), lda, b.data(), ldb, n, depth, out.data(), ld_out);
      for (int k = 0; k < n * ld_out; ++k) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(out[k]), std::bit_cast<std::uint32_t>(want[k]))
            << isa_level_name(level) << " depth " << depth << " at " << k / n << "," << k % n;
      }
    }
  }
}

struct AttentionResult {
  std::vector<double> probs, out, dqkv;
};

template <typename Scalar>
AttentionResult run_attention(int batch, int seq, int heads, int head_dim) {
  const std::int64_t rows = std::int64_t{batch} * seq, hidden = std::int64_t{heads} * head_dim;
  const auto qkv_d = random_values(rows * 3 * hidden, 1.0, 3);
  const auto dout_d = random_values(rows * hidden, 1.0, 4);
  const std::vector<Scalar> qkv(qkv_d.begin(), qkv_d.end()), dout(dout_d.begin(), dout_d.end());
  std::vector<Scalar> probs, out, dqkv;
  attention_forward(qkv.data(), batch, seq, heads, head_dim, probs, out);
  attention_backward(qkv.data(), probs, dout.data(), batch, seq, heads, head_dim, dqkv);
  return {{probs.begin(), probs.end()}, {out.begin(), out.end()}, {dqkv.begin(), dqkv.end()}};
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 2e-5 * (1 + std::fabs(want[i]))) << what << "[" << i << "]";
  }
}

TEST(Attention, FloatKernelsMatchTheDoubleBlasPath) {
  // head_dim 20 runs combine_rows row by row, 32 register-blocked; seq 17 pads to 32 columns.
  for (int head_dim : {20, 32}) {
    for (int seq : {1, 5, 12, 17}) {
      SCOPED_TRACE(testing::Message() << "seq " << seq << " head_dim " << head_dim);
      const AttentionResult want = run_attention<double>(3, seq, 2, head_dim);
      const AttentionResult got = run_attention<float>(3, seq, 2, head_dim);
      expect_close(got.probs, want.probs, "probs");
      expect_close(got.out, want.out, "out");
      expect_close(got.dqkv, want.dqkv, "dqkv");
    }
  }
}

TEST(Attention, EveryIsaLevelGivesTheBaselineBits) {
  test::compare_every_isa_level_with_baseline(
      [] { return run_attention<float>(2, 12, 3, 64); },
      [](IsaLevel level, const AttentionResult& got, const AttentionResult& baseline) {
        EXPECT_EQ(got.probs, baseline.probs) << isa_level_name(level);
        EXPECT_EQ(got.out, baseline.out) << isa_level_name(level);
        EXPECT_EQ(got.dqkv, baseline.dqkv) << isa_level_name(level);
      });
}

}  // namespace
}  // namespace shardwise
