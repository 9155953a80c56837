#include "shardwise/optim/newton_schulz.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "shardwise/core/blas.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/float_convert.hpp"
#include "shardwise/optim/grad_stats.hpp"
#include "shardwise/optim/newton_schulz_gram.hpp"

namespace shardwise::optim {

namespace {

// Tuned quintics cycled over the steps (the default set of Megatron's Muon).
constexpr NsStepCoefficients kQuinticSet[] = {
    {4.0848, -6.8946, 2.9270}, {3.9505, -6.3029, 2.6377}, {3.7418, -5.5913, 2.3037},
    {2.8769, -3.1427, 1.2046}, {2.8366, -3.0525, 1.2012},
};

constexpr NsStepCoefficients kSimpleSet = {3.4445, -4.7750, 2.0315};

// Polar Express, degree 5: N. Amsel, D. Persson, C. Musco, R. M. Gower, "The Polar Express:
// Optimal Matrix Sign Methods and Their Application to the Muon Algorithm", arXiv:2505.16932
// (2025), Algorithm 1 (coefficients for l = 1e-3). The paper divides every polynomial but the
// last by a safety factor of 1.01 (a/1.01, b/1.01^3, c/1.01^5) for half-precision robustness;
// the last polynomial repeats for any further steps.
constexpr NsStepCoefficients kPolarExpressRaw[] = {
    {8.28721201814563, -23.595886519098837, 17.300387312530933},
    {4.107059111542203, -2.9478499167379106, 0.5448431082926601},
    {3.9486908534822946, -2.908902115962949, 0.5518191394370137},
    {3.3184196573706015, -2.488488024314874, 0.51004894012372},
    {2.300652019954817, -1.6689039845747493, 0.4188073119525673},
    {1.891301407787398, -1.2679958271945868, 0.37680408948524835},
    {1.8750014808534479, -1.2500016453999487, 0.3750001645474248},
    {1.875, -1.25, 0.375},
};
constexpr double kPolarExpressSafety = 1.01;
constexpr int kPolarExpressCount = static_cast<int>(std::size(kPolarExpressRaw));

void round_to_bf16_in_place(float* values, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) values[i] = round_to_bf16(values[i]);
}

}  // namespace

NsStepCoefficients ns_coefficients(NsCoefficients set, int step) {
  SW_CHECK(step >= 0, "Newton-Schulz step ", step);
  switch (set) {
    case NsCoefficients::kQuintic:
      return kQuinticSet[step % static_cast<int>(std::size(kQuinticSet))];
    case NsCoefficients::kSimple:
      return kSimpleSet;
    case NsCoefficients::kPolarExpress: {
      if (step >= kPolarExpressCount - 1) return kPolarExpressRaw[kPolarExpressCount - 1];
      const NsStepCoefficients& raw = kPolarExpressRaw[step];
      const double s = kPolarExpressSafety;
      return {raw[0] / s, raw[1] / (s * s * s), raw[2] / (s * s * s * s * s)};
    }
  }
  SW_CHECK(false, "unknown Newton-Schulz coefficient set");
  return {};
}

NsCoefficients parse_ns_coefficients(std::string_view name, std::string_view what) {
  if (auto set = parse_enum<NsCoefficients>(name)) return *set;
  throw InvalidArgument(str_cat(what, ": unknown Newton-Schulz coefficient set '", name,
                                "' (valid: ", enum_choices<NsCoefficients>(), ")"));
}

std::string_view ns_coefficients_name(NsCoefficients set) { return to_string(set); }

NsAlgorithm parse_ns_algorithm(std::string_view name, std::string_view what) {
  if (auto algorithm = parse_enum<NsAlgorithm>(name)) return *algorithm;
  throw InvalidArgument(str_cat(what, ": unknown Newton-Schulz algorithm '", name,
                                "' (valid: ", enum_choices<NsAlgorithm>(), ")"));
}

std::string_view ns_algorithm_name(NsAlgorithm algorithm) { return to_string(algorithm); }

double newton_schulz_gemm_flops(std::int64_t rows, std::int64_t cols, int steps) {
  const double m = static_cast<double>(std::min(rows, cols));
  const double n = static_cast<double>(std::max(rows, cols));
  return steps * (4.0 * m * m * n + 2.0 * m * m * m);
}

NewtonSchulz::NewtonSchulz(NewtonSchulzOptions options) : options_(options) {
  SW_REQUIRE(options_.steps >= 0, InvalidArgument, "Newton-Schulz steps must be >= 0, got ",
             options_.steps);
  SW_REQUIRE(options_.eps >= 0.0f, InvalidArgument, "Newton-Schulz eps must be >= 0, got ",
             options_.eps);
  SW_REQUIRE(options_.gram_growth_limit == 0.0 || options_.gram_growth_limit > 1.0, InvalidArgument,
             "Newton-Schulz gram_growth_limit must be 0 (default) or > 1, got ",
             options_.gram_growth_limit);
}

void NewtonSchulz::orthogonalize(const float* g, std::int64_t rows, std::int64_t cols, float* out) {
  SW_CHECK(rows >= 0 && cols >= 0, "orthogonalize of a ", rows, " x ", cols, " matrix");
  const auto numel = static_cast<std::size_t>(rows * cols);
  if (numel == 0) return;
  // m x n is the short-side view: the Gram matrix is m x m.
  const bool wide = rows <= cols;
  const std::int64_t m = wide ? rows : cols;
  const std::int64_t n = wide ? cols : rows;
  const bool bf16 = options_.precision == MatmulPrecision::kBf16;
  // bf16 rounds the polynomial's B before B X, so a X must stay a separate (exact) term.
  const bool fold_a_into_b = !bf16;

  x_.resize(numel);
  y_.resize(numel);
  gram_.resize(static_cast<std::size_t>(m * m));
  poly_.resize(static_cast<std::size_t>(m * m));

  const double norm = std::sqrt(sum_of_squares({g, numel}));
  const float inv = static_cast<float>(1.0 / (norm + static_cast<double>(options_.eps)));
  for (std::size_t i = 0; i < numel; ++i) x_[i] = g[i] * inv;
  if (options_.algorithm == NsAlgorithm::kGram) {
    gram_newton_schulz(options_, wide, m, n, {x_, y_, gram_, poly_, q_, t_}, out);
    return;
  }

  using blas::Op;
  for (int step = 0; step < options_.steps; ++step) {
    const NsStepCoefficients coeff = ns_coefficients(options_.coefficients, step);
    const auto a = static_cast<float>(coeff[0]);
    const auto b = static_cast<float>(coeff[1]);
    const auto c = static_cast<float>(coeff[2]);
    float* x = x_.data();
    float* gram = gram_.data();
    float* poly = poly_.data();
    if (bf16) round_to_bf16_in_place(x, numel);

    // gram = X X^T (wide: X is m x n) or G^T G (tall: G is n x m).
    if (options_.use_syrk) {
      blas::ssyrk(wide ? Op::kNone : Op::kTranspose, m, n, 1.0f, x, wide ? n : m, 0.0f, gram, m);
      blas::fill_lower_from_upper(m, gram, m);
    } else if (wide) {
      blas::sgemm(Op::kNone, Op::kTranspose, m, m, n, 1.0f, x, n, x, n, 0.0f, gram, m);
    } else {
      blas::sgemm(Op::kTranspose, Op::kNone, m, m, n, 1.0f, x, m, x, m, 0.0f, gram, m);
    }
    if (bf16) round_to_bf16_in_place(gram, static_cast<std::size_t>(m * m));

    // poly = b A + c A A (A symmetric, so A A = A A^T).
    std::memcpy(poly, gram, sizeof(float) * static_cast<std::size_t>(m * m));
    if (options_.use_syrk) {
      blas::ssyrk(Op::kNone, m, m, c, gram, m, b, poly, m);
      blas::fill_lower_from_upper(m, poly, m);
    } else {
      blas::sgemm(Op::kNone, Op::kNone, m, m, m, c, gram, m, gram, m, b, poly, m);
    }

    // X <- a X + poly X (wide) or X <- a X + X poly (tall; poly symmetric).
    float* y = y_.data();
    float beta = 0.0f;
    if (fold_a_into_b) {
      for (std::int64_t i = 0; i < m; ++i) poly[i * m + i] += a;
    } else {
      round_to_bf16_in_place(poly, static_cast<std::size_t>(m * m));
      std::memcpy(y, x, sizeof(float) * numel);
      beta = a;
    }
    if (wide) {
      blas::sgemm(Op::kNone, Op::kNone, m, n, m, 1.0f, poly, m, x, n, beta, y, n);
    } else {
      blas::sgemm(Op::kNone, Op::kNone, n, m, m, 1.0f, x, m, poly, m, beta, y, m);
    }
    std::swap(x_, y_);
  }
  std::memcpy(out, x_.data(), sizeof(float) * numel);
}

double orthogonality_error(const float* u, std::int64_t rows, std::int64_t cols) {
  const bool wide = rows <= cols;
  const std::int64_t m = wide ? rows : cols, n = wide ? cols : rows;
  if (m == 0) return 0.0;
  std::vector<float> gram(static_cast<std::size_t>(m * m));
  blas::ssyrk(wide ? blas::Op::kNone : blas::Op::kTranspose, m, n, 1.0f, u, wide ? n : m, 0.0f,
              gram.data(), m);
  double sum = 0.0;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = i; j < m; ++j) {  // the upper triangle, off-diagonal terms twice
      const double e =
          static_cast<double>(gram[static_cast<std::size_t>(i * m + j)]) - (i == j ? 1.0 : 0.0);
      sum += (i == j ? 1.0 : 2.0) * e * e;
    }
  }
  return std::sqrt(sum / static_cast<double>(m));
}

void for_each_row_block(std::int64_t rows, std::span<const std::int64_t> row_split,
                        const std::function<void(std::int64_t, std::int64_t)>& block) {
  std::int64_t total = 0;
  for (std::int64_t r : row_split) {
    SW_REQUIRE(r > 0, ShapeError, "row split has a block of ", r, " rows");
    total += r;
  }
  SW_REQUIRE(total == rows, ShapeError, "row split sums to ", total, " rows, matrix has ", rows);
  std::int64_t first = 0;
  for (std::int64_t r : row_split) {
    block(first, r);
    first += r;
  }
}

void NewtonSchulz::orthogonalize_row_blocks(const float* g, std::int64_t rows, std::int64_t cols,
                                            std::span<const std::int64_t> row_split, float* out) {
  for_each_row_block(rows, row_split, [&](std::int64_t first, std::int64_t r) {
    orthogonalize(g + first * cols, r, cols, out + first * cols);
  });
}

}  // namespace shardwise::optim
