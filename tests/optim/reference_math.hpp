// Double-precision oracles for the optimizer tests: plain loops, no BLAS, written independently
// of the code under test.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "shardwise/core/float_convert.hpp"

namespace shardwise::optim::testing {

struct Mat {
  std::int64_t rows = 0, cols = 0;
  std::vector<double> v;
  Mat() = default;
  Mat(std::int64_t r, std::int64_t c) : rows(r), cols(c), v(static_cast<std::size_t>(r * c)) {}
  double& at(std::int64_t i, std::int64_t j) { return v[static_cast<std::size_t>(i * cols + j)]; }
  double at(std::int64_t i, std::int64_t j) const {
    return v[static_cast<std::size_t>(i * cols + j)];
  }
};

inline Mat transpose(const Mat& a) {
  Mat t(a.cols, a.rows);
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (std::int64_t j = 0; j < a.cols; ++j) t.at(j, i) = a.at(i, j);
  return t;
}

inline Mat matmul(const Mat& a, const Mat& b) {
  Mat c(a.rows, b.cols);
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (std::int64_t k = 0; k < a.cols; ++k) {
      const double aik = a.at(i, k);
      for (std::int64_t j = 0; j < b.cols; ++j) c.at(i, j) += aik * b.at(k, j);
    }
  return c;
}

inline Mat from_floats(const std::vector<float>& f, std::int64_t rows, std::int64_t cols) {
  Mat m(rows, cols);
  for (std::size_t i = 0; i < f.size(); ++i) m.v[i] = f[i];
  return m;
}

inline std::vector<float> to_floats(const Mat& m) {
  std::vector<float> f(m.v.size());
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(m.v[i]);
  return f;
}

// The matrix as the fp32 code sees it (every entry rounded to float).
inline Mat as_float_matrix(const Mat& m) { return from_floats(to_floats(m), m.rows, m.cols); }

inline double bf16_round(double x) { return round_to_bf16(static_cast<float>(x)); }

// The textbook iteration: X = G/(|G|_F + eps) on the short side, then
// A = X X^T, B = bA + cAA, X = aX + BX for each (a, b, c). With bf16, the GEMM inputs are
// rounded to bf16 at the same points the production code rounds them.
inline Mat newton_schulz_reference(const Mat& g, const std::vector<std::array<double, 3>>& coeffs,
                                   double eps = 1e-7, bool bf16 = false) {
  const bool tall = g.rows > g.cols;
  Mat x = tall ? transpose(g) : g;
  double norm = 0.0;
  for (double e : x.v) norm += e * e;
  norm = std::sqrt(norm);
  for (double& e : x.v) e /= (norm + eps);
  for (const auto& [a, b, c] : coeffs) {
    if (bf16)
      for (double& e : x.v) e = bf16_round(e);
    Mat gram = matmul(x, transpose(x));
    if (bf16)
      for (double& e : gram.v) e = bf16_round(e);
    Mat poly = matmul(gram, gram);
    for (std::size_t i = 0; i < poly.v.size(); ++i) poly.v[i] = b * gram.v[i] + c * poly.v[i];
    if (bf16)
      for (double& e : poly.v) e = bf16_round(e);
    Mat px = matmul(poly, x);
    for (std::size_t i = 0; i < x.v.size(); ++i) x.v[i] = a * x.v[i] + px.v[i];
  }
  return tall ? transpose(x) : x;
}

// Eigenvalues of a symmetric matrix by cyclic Jacobi rotations (ascending).
inline std::vector<double> symmetric_eigenvalues(Mat a) {
  const std::int64_t n = a.rows;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0.0;
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = i + 1; j < n; ++j) off += a.at(i, j) * a.at(i, j);
    if (off < 1e-30) break;
    for (std::int64_t p = 0; p < n; ++p) {
      for (std::int64_t q = p + 1; q < n; ++q) {
        const double apq = a.at(p, q);
        if (std::fabs(apq) < 1e-300) continue;
        const double theta = (a.at(q, q) - a.at(p, p)) / (2.0 * apq);
        const double t =
            (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1.0 / std::sqrt(t * t + 1), s = t * c;
        for (std::int64_t k = 0; k < n; ++k) {  // rotate columns p, q
          const double akp = a.at(k, p), akq = a.at(k, q);
          a.at(k, p) = c * akp - s * akq;
          a.at(k, q) = s * akp + c * akq;
        }
        for (std::int64_t k = 0; k < n; ++k) {  // rotate rows p, q
          const double apk = a.at(p, k), aqk = a.at(q, k);
          a.at(p, k) = c * apk - s * aqk;
          a.at(q, k) = s * apk + c * aqk;
        }
      }
    }
  }
  std::vector<double> eig(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) eig[static_cast<std::size_t>(i)] = a.at(i, i);
  std::sort(eig.begin(), eig.end());
  return eig;
}

// Singular values (ascending) from the eigenvalues of the short-side Gram matrix.
inline std::vector<double> singular_values(const Mat& x) {
  const Mat gram = x.rows <= x.cols ? matmul(x, transpose(x)) : matmul(transpose(x), x);
  std::vector<double> s = symmetric_eigenvalues(gram);
  for (double& e : s) e = std::sqrt(std::max(0.0, e));
  return s;
}

inline Mat random_gaussian(std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                           double stddev = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(0.0, stddev);
  Mat m(rows, cols);
  for (double& e : m.v) e = dist(rng);
  return m;
}

// rows x cols matrix with orthonormal columns (rows >= cols), by modified Gram–Schmidt.
inline Mat random_orthonormal_columns(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  Mat q = random_gaussian(rows, cols, seed);
  for (std::int64_t j = 0; j < cols; ++j) {
    for (int pass = 0; pass < 2; ++pass) {  // twice is enough for double
      for (std::int64_t k = 0; k < j; ++k) {
        double dot = 0.0;
        for (std::int64_t i = 0; i < rows; ++i) dot += q.at(i, k) * q.at(i, j);
        for (std::int64_t i = 0; i < rows; ++i) q.at(i, j) -= dot * q.at(i, k);
      }
    }
    double norm = 0.0;
    for (std::int64_t i = 0; i < rows; ++i) norm += q.at(i, j) * q.at(i, j);
    norm = std::sqrt(norm);
    for (std::int64_t i = 0; i < rows; ++i) q.at(i, j) /= norm;
  }
  return q;
}

// U diag(s) V^T with random orthonormal U (rows x r), V (cols x r), r = min(rows, cols).
inline Mat with_singular_values(std::int64_t rows, std::int64_t cols, const std::vector<double>& s,
                                std::uint64_t seed) {
  const std::int64_t r = std::min(rows, cols);
  Mat u = random_orthonormal_columns(rows, r, seed);
  Mat v = random_orthonormal_columns(cols, r, seed + 1);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t k = 0; k < r; ++k) u.at(i, k) *= s[static_cast<std::size_t>(k)];
  return matmul(u, transpose(v));
}

inline double max_abs_diff(const Mat& a, const Mat& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.v.size(); ++i) worst = std::max(worst, std::fabs(a.v[i] - b.v[i]));
  return worst;
}

inline double frobenius(const Mat& a) {
  double s = 0.0;
  for (double e : a.v) s += e * e;
  return std::sqrt(s);
}

}  // namespace shardwise::optim::testing
