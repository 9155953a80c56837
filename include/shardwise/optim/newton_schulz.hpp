// Newton–Schulz orthogonalization: approximates polar(G) = U V^T for G = U S V^T with a few
// odd quintic matrix polynomials, using only GEMMs (BLAS).
//
// Works on the short side: with X the m x n view of G where m <= n (G itself, or G^T for a tall
// G), X <- G / (||G||_F + eps), then per step with coefficients (a, b, c):
//   A = X X^T;  B = b A + c A A;  X <- a X + B X
// A is an m x m Gram matrix, so tall and wide inputs cost the same. A tall G is never copied
// into a transpose: the same products are formed with BLAS transpose flags (A = G^T G,
// X <- X a + X B, B symmetric).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "shardwise/config/optimizer_config.hpp"

namespace shardwise::optim {

// The optimizer spec's enums (config/optimizer_config.hpp), one definition and one name table:
//   kQuintic       five tuned quintics, cycled (default)
//   kSimple        Keller Jordan's single quintic (3.4445, -4.7750, 2.0315) every step
//   kPolarExpress  Amsel, Persson, Musco, Gower 2025, degree 5, with its 1.01 safety factor
using NsCoefficients = MuonCoefficientSet;
//   kFp32  fp32 GEMM inputs
//   kBf16  GEMM inputs rounded to bf16 (RNE), fp32 accumulation: what bf16 tensor cores do
using MatmulPrecision = shardwise::MatmulPrecision;

//   kStandard  X <- p(X X^T) X every step: products with the long side n every step
//   kGram      iterate on the m x m Gram matrix R = X X^T and accumulate Q = prod p_k(R_k);
//              X <- Q X once at the end and at restarts (optim/newton_schulz_gram.hpp)
using NsAlgorithm = shardwise::NsAlgorithm;

struct NewtonSchulzOptions {
  NsCoefficients coefficients = kDefaultOptimizerConfig.muon_coefficient_set;
  NsAlgorithm algorithm = kDefaultOptimizerConfig.muon_ns_algorithm;
  int steps = kDefaultOptimizerConfig.muon_ns_steps;
  MatmulPrecision precision = kDefaultOptimizerConfig.muon_matmul_precision;
  float eps = 1e-7f;  // added to the Frobenius norm before normalising
  // Form the symmetric products (X X^T and A A) with ssyrk at half the flops of sgemm.
  bool use_syrk = true;
  // kGram: the bound on ||Q|| ||X|| within one restart segment (the factor by which the Gram form
  // can amplify rounding errors); 0 picks the precision's default (gram_default_growth_limit).
  double gram_growth_limit = 0.0;
};

using NsStepCoefficients = std::array<double, 3>;  // (a, b, c)

// The (a, b, c) used at step `step` (0-based) of a coefficient set.
NsStepCoefficients ns_coefficients(NsCoefficients set, int step);

// Parses "quintic", "simple", "polar_express"; InvalidArgument naming `what` otherwise.
NsCoefficients parse_ns_coefficients(std::string_view name, std::string_view what);
std::string_view ns_coefficients_name(NsCoefficients set);

// Parses the names of kNsAlgorithmNames ("standard", "gram"); InvalidArgument naming `what`.
NsAlgorithm parse_ns_algorithm(std::string_view name, std::string_view what);
std::string_view ns_algorithm_name(NsAlgorithm algorithm);

// Nominal FLOPs of one orthogonalization counted as plain GEMMs (4 m^2 n + 2 m^3 per step, m the
// short side): the rate benchmarks report.
double newton_schulz_gemm_flops(std::int64_t rows, std::int64_t cols, int steps);

// ||U U^T - I||_F / sqrt(m) for the rows x cols row-major u, m its short side (U U^T the m x m
// Gram matrix of the short side): how far an orthogonalization is from orthogonal. The product
// in fp32 (BLAS), the sum in fp64.
double orthogonality_error(const float* u, std::int64_t rows, std::int64_t cols);

// Calls block(first_row, rows_in_block) for each part of `row_split` in order, after checking
// that every part is positive and that they sum to `rows` (a fused QKV is orthogonalised part by
// part). Shared by the CPU and GPU Newton–Schulz.
void for_each_row_block(std::int64_t rows, std::span<const std::int64_t> row_split,
                        const std::function<void(std::int64_t, std::int64_t)>& block);

// Reusable workspace: orthogonalizing many matrices of similar size allocates once.
class NewtonSchulz {
 public:
  explicit NewtonSchulz(NewtonSchulzOptions options = {});

  // out = NS(g) for the rows x cols row-major matrix g. out may alias g. A zero matrix maps to
  // zero.
  void orthogonalize(const float* g, std::int64_t rows, std::int64_t cols, float* out);

  // Orthogonalizes row blocks of g independently: block i has row_split[i] rows (sum == rows).
  // This is how a fused QKV weight is treated: each of Q, K and V is its own matrix.
  void orthogonalize_row_blocks(const float* g, std::int64_t rows, std::int64_t cols,
                                std::span<const std::int64_t> row_split, float* out);

  const NewtonSchulzOptions& options() const { return options_; }

 private:
  NewtonSchulzOptions options_;
  std::vector<float> x_, y_, gram_, poly_;
  std::vector<float> q_, t_;  // kGram: the accumulated polynomial and a product's scratch
};

}  // namespace shardwise::optim
