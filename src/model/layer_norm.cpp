#include "shardwise/model/layer_norm.hpp"

#include <cmath>

#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

// Rows whose sums run side by side. Each row's sum still adds its columns in order; 8 chains
// keep the adders busy where one chain waits out each add's latency.
constexpr int kRowGroup = 8;

// Mean and rstd of the G rows at x (row-major, h columns), each a chain in column order.
template <int G, typename Scalar>
void row_stats(const Scalar* __restrict x, std::int64_t h, Scalar eps, Scalar* __restrict mean,
               Scalar* __restrict rstd) {
  Scalar m[G] = {};
  for (std::int64_t c = 0; c < h; ++c) {
    for (int r = 0; r < G; ++r) m[r] += x[r * h + c];
  }
  for (int r = 0; r < G; ++r) m[r] /= static_cast<Scalar>(h);
  Scalar var[G] = {};
  for (std::int64_t c = 0; c < h; ++c) {
    for (int r = 0; r < G; ++r) var[r] += (x[r * h + c] - m[r]) * (x[r * h + c] - m[r]);
  }
  for (int r = 0; r < G; ++r) {
    var[r] /= static_cast<Scalar>(h);
    mean[r] = m[r];
    rstd[r] = Scalar(1) / std::sqrt(var[r] + eps);
  }
}

template <typename Scalar>
void normalize_row(const Scalar* __restrict x, const Scalar* __restrict w,
                   const Scalar* __restrict b, std::int64_t h, Scalar m, Scalar r,
                   Scalar* __restrict y) {
  for (std::int64_t c = 0; c < h; ++c) y[c] = (x[c] - m) * r * w[c] + b[c];
}

// The forward of G rows starting at row i.
template <int G, typename Scalar>
void forward_rows(const Scalar* x, const Scalar* w, const Scalar* b, std::int64_t i,
                  std::int64_t h, Scalar eps, Scalar* y, Scalar* mean, Scalar* rstd) {
  row_stats<G>(x + i * h, h, eps, mean + i, rstd + i);
  for (std::int64_t k = i; k < i + G; ++k) {
    normalize_row(x + k * h, w, b, h, mean[k], rstd[k], y + k * h);
  }
}

// Per row of the G rows at dy / x: sum_c dxhat and sum_c dxhat * xhat (dxhat = dy * w), each a
// chain in column order.
template <int G, typename Scalar>
void row_grad_sums(const Scalar* __restrict dy, const Scalar* __restrict x,
                   const Scalar* __restrict mean, const Scalar* __restrict rstd,
                   const Scalar* __restrict w, std::int64_t h, Scalar* __restrict sum_dxhat,
                   Scalar* __restrict sum_dxhat_xhat) {
  Scalar s1[G] = {}, s2[G] = {};
  for (std::int64_t c = 0; c < h; ++c) {
    for (int r = 0; r < G; ++r) {
      const Scalar xhat = (x[r * h + c] - mean[r]) * rstd[r];
      const Scalar dxhat = dy[r * h + c] * w[c];
      s1[r] += dxhat;
      s2[r] += dxhat * xhat;
    }
  }
  for (int r = 0; r < G; ++r) {
    sum_dxhat[r] = s1[r];
    sum_dxhat_xhat[r] = s2[r];
  }
}

// One row's parameter gradients (dw += dy * xhat, db += dy) and
// dx (=, +=) rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
template <LayerNormDx kMode, typename Scalar>
void backward_row(const Scalar* __restrict dy, const Scalar* __restrict x, Scalar m, Scalar r,
                  const Scalar* __restrict w, std::int64_t h, Scalar sum_dxhat,
                  Scalar sum_dxhat_xhat, Scalar* __restrict dw, Scalar* __restrict db,
                  Scalar* __restrict dx) {
  const Scalar inv_h = Scalar(1) / static_cast<Scalar>(h);
  for (std::int64_t c = 0; c < h; ++c) {
    const Scalar xhat = (x[c] - m) * r;
    const Scalar dxhat = dy[c] * w[c];
    dw[c] += dy[c] * xhat;
    db[c] += dy[c];
    const Scalar v = r * (dxhat - sum_dxhat * inv_h - xhat * sum_dxhat_xhat * inv_h);
    if constexpr (kMode == LayerNormDx::kAdd) {
      dx[c] += v;
    } else {
      dx[c] = v;
    }
  }
}

// The backward of G rows starting at row i (rows in order, so dw and db sum rows in order).
template <int G, LayerNormDx kMode, typename Scalar>
void backward_rows(const Scalar* dy, const Scalar* x, const Scalar* mean, const Scalar* rstd,
                   const Scalar* w, std::int64_t i, std::int64_t h, Scalar* dw, Scalar* db,
                   Scalar* dx) {
  Scalar s1[G], s2[G];
  row_grad_sums<G>(dy + i * h, x + i * h, mean + i, rstd + i, w, h, s1, s2);
  for (int r = 0; r < G; ++r) {
    const std::int64_t k = i + r;
    backward_row<kMode>(dy + k * h, x + k * h, mean[k], rstd[k], w, h, s1[r], s2[r], dw, db,
                        dx + k * h);
  }
}

template <LayerNormDx kMode, typename Scalar>
void backward_all_rows(const Scalar* dy, const Scalar* x, const Scalar* mean, const Scalar* rstd,
                       const Scalar* w, std::int64_t n, std::int64_t h, Scalar* dw, Scalar* db,
                       Scalar* dx) {
  std::int64_t i = 0;
  for (; i + kRowGroup <= n; i += kRowGroup) {
    backward_rows<kRowGroup, kMode>(dy, x, mean, rstd, w, i, h, dw, db, dx);
  }
  for (; i < n; ++i) backward_rows<1, kMode>(dy, x, mean, rstd, w, i, h, dw, db, dx);
}

}  // namespace

template <typename Scalar>
void layer_norm_forward(const Scalar* x, const Scalar* w, const Scalar* b, std::int64_t n,
                        std::int64_t h, double eps, std::vector<Scalar>& y,
                        std::vector<Scalar>& mean, std::vector<Scalar>& rstd) {
  y.resize(static_cast<std::size_t>(n * h));
  mean.resize(static_cast<std::size_t>(n));
  rstd.resize(static_cast<std::size_t>(n));
  const auto e = static_cast<Scalar>(eps);
  std::int64_t i = 0;
  for (; i + kRowGroup <= n; i += kRowGroup) {
    forward_rows<kRowGroup>(x, w, b, i, h, e, y.data(), mean.data(), rstd.data());
  }
  for (; i < n; ++i) forward_rows<1>(x, w, b, i, h, e, y.data(), mean.data(), rstd.data());
}

template <typename Scalar>
void layer_norm_backward(const Scalar* dy, const Scalar* x, const std::vector<Scalar>& mean,
                         const std::vector<Scalar>& rstd, const Scalar* w, std::int64_t n,
                         std::int64_t h, Scalar* dw, Scalar* db, std::vector<Scalar>& dx,
                         LayerNormDx mode) {
  if (mode == LayerNormDx::kAdd) {
    SW_CHECK(dx.size() == static_cast<std::size_t>(n * h), "layer_norm_backward: adding to ",
             dx.size(), " values, want ", n * h);
    backward_all_rows<LayerNormDx::kAdd>(dy, x, mean.data(), rstd.data(), w, n, h, dw, db,
                                         dx.data());
    return;
  }
  dx.resize(static_cast<std::size_t>(n * h));
  backward_all_rows<LayerNormDx::kOverwrite>(dy, x, mean.data(), rstd.data(), w, n, h, dw, db,
                                             dx.data());
}

#define SHARDWISE_INSTANTIATE_LAYER_NORM(S)                                                      \
  template void layer_norm_forward<S>(const S*, const S*, const S*, std::int64_t, std::int64_t, \
                                      double, std::vector<S>&, std::vector<S>&,                 \
                                      std::vector<S>&);                                         \
  template void layer_norm_backward<S>(const S*, const S*, const std::vector<S>&,               \
                                       const std::vector<S>&, const S*, std::int64_t,           \
                                       std::int64_t, S*, S*, std::vector<S>&, LayerNormDx);

SHARDWISE_INSTANTIATE_LAYER_NORM(float)
SHARDWISE_INSTANTIATE_LAYER_NORM(double)

}  // namespace shardwise
