// Layer norm over the rows of a row-major [n, h] array, for float and double.
//
// Each row's mean, variance and backward sums are one sequential chain over its h columns (the
// order of the plain per-row loop, so results do not depend on how many rows a call gets or where
// they sit in memory: a resumed run at another data-parallel size gives the same bits). Rows are
// handled a few at a time so their independent chains overlap instead of waiting on one add
// after another.
#pragma once

#include <cstdint>
#include <vector>

namespace shardwise {

// y = (x - mean) * rstd * w + b per row; mean and rstd (1 / sqrt(var + eps)) are kept for
// backward.
template <typename Scalar>
void layer_norm_forward(const Scalar* x, const Scalar* w, const Scalar* b, std::int64_t n,
                        std::int64_t h, double eps, std::vector<Scalar>& y,
                        std::vector<Scalar>& mean, std::vector<Scalar>& rstd);

// Whether layer_norm_backward overwrites dx or adds to it (a residual branch's gradient).
enum class LayerNormDx { kOverwrite, kAdd };

// dw += sum over rows of dy * xhat, db += sum over rows of dy (rows in order), and dx (= or +=)
// the input gradient. With kAdd, dx must already hold n * h values.
template <typename Scalar>
void layer_norm_backward(const Scalar* dy, const Scalar* x, const std::vector<Scalar>& mean,
                         const std::vector<Scalar>& rstd, const Scalar* w, std::int64_t n,
                         std::int64_t h, Scalar* dw, Scalar* db, std::vector<Scalar>& dx,
                         LayerNormDx mode = LayerNormDx::kOverwrite);

}  // namespace shardwise
