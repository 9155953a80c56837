// Host stand-in for src/cuda/gpt_kernels.hpp: each launcher's specification as a plain loop, so
// the device GPT's host code (products, buffers, order) runs on the CPU.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "cuda_status.hpp"

namespace shardwise::cuda::detail {

inline void launch_embedding_forward(const std::int32_t* tokens, const float* wte, const float* wpe,
                                     std::int64_t n, int seq, int hidden, float* x, cudaStream_t) {
  for (std::int64_t i = 0; i < n; ++i) {
    for (int c = 0; c < hidden; ++c) {
      float v = wte[std::int64_t{tokens[i]} * hidden + c];
      if (wpe != nullptr) v += wpe[(i % seq) * hidden + c];
      x[i * hidden + c] = v;
    }
  }
}

inline void launch_embedding_backward(const std::int32_t* tokens, const float* dx, std::int64_t n,
                                      int hidden, float* wte_grad, cudaStream_t) {
  for (std::int64_t i = 0; i < n; ++i) {
    for (int c = 0; c < hidden; ++c)
      wte_grad[std::int64_t{tokens[i]} * hidden + c] += dx[i * hidden + c];
  }
}

inline void launch_position_backward(const float* dx, int batch, int seq, int hidden,
                                     float* wpe_grad, cudaStream_t) {
  for (int b = 0; b < batch; ++b) {
    for (std::int64_t e = 0; e < std::int64_t{seq} * hidden; ++e) {
      wpe_grad[e] += dx[std::int64_t{b} * seq * hidden + e];
    }
  }
}

struct RopeTables {
  const float* cos = nullptr;
  const float* sin = nullptr;
  float sign = 1.0f;
};

// Rotates pairs of `v` (head_dim values at position s) in place.
inline void emulated_rotate(float* v, int s, int head_dim, const RopeTables& rope) {
  if (rope.cos == nullptr) return;
  for (int pair = 0; pair < head_dim / 2; ++pair) {
    const float cs = rope.cos[s * (head_dim / 2) + pair];
    const float sn = rope.sign * rope.sin[s * (head_dim / 2) + pair];
    const float v0 = v[2 * pair], v1 = v[2 * pair + 1];
    v[2 * pair] = v0 * cs - v1 * sn;
    v[2 * pair + 1] = v0 * sn + v1 * cs;
  }
}

inline void launch_rows_to_heads(const float* rows, std::int64_t row_stride, std::int64_t col0,
                                 int batch, int seq, int heads, int head_dim, RopeTables rope,
                                 float* out, cudaStream_t) {
  for (int b = 0; b < batch; ++b) {
    for (int hh = 0; hh < heads; ++hh) {
      for (int s = 0; s < seq; ++s) {
        float* o = out + ((std::int64_t{b} * heads + hh) * seq + s) * head_dim;
        const float* src = rows + (std::int64_t{b} * seq + s) * row_stride + col0 + hh * head_dim;
        std::copy(src, src + head_dim, o);
        emulated_rotate(o, s, head_dim, rope);
      }
    }
  }
}

inline void launch_heads_to_rows(const float* in, int batch, int seq, int heads, int head_dim,
                                 RopeTables rope, float* rows, std::int64_t row_stride,
                                 std::int64_t col0, cudaStream_t) {
  for (int b = 0; b < batch; ++b) {
    for (int hh = 0; hh < heads; ++hh) {
      for (int s = 0; s < seq; ++s) {
        const float* src = in + ((std::int64_t{b} * heads + hh) * seq + s) * head_dim;
        float* dst = rows + (std::int64_t{b} * seq + s) * row_stride + col0 + hh * head_dim;
        std::copy(src, src + head_dim, dst);
        emulated_rotate(dst, s, head_dim, rope);
      }
    }
  }
}

inline void launch_causal_softmax(float* scores, std::int64_t count, int seq, cudaStream_t) {
  for (std::int64_t r = 0; r < count * seq; ++r) {
    float* p = scores + r * seq;
    const int i = static_cast<int>(r % seq);
    const float mx = *std::max_element(p, p + i + 1);
    float sum = 0;
    for (int j = 0; j <= i; ++j) sum += std::exp(p[j] - mx);
    for (int j = 0; j < seq; ++j) p[j] = j <= i ? std::exp(p[j] - mx) / sum : 0.0f;
  }
}

inline void launch_causal_softmax_backward(const float* probs, float* ds, std::int64_t count,
                                           int seq, float scale, cudaStream_t) {
  for (std::int64_t r = 0; r < count * seq; ++r) {
    const float* p = probs + r * seq;
    float* d = ds + r * seq;
    const int i = static_cast<int>(r % seq);
    float dot = 0;
    for (int j = 0; j <= i; ++j) dot += d[j] * p[j];
    for (int j = 0; j < seq; ++j) d[j] = j <= i ? p[j] * (d[j] - dot) * scale : 0.0f;
  }
}

inline std::int64_t layer_norm_partials(std::int64_t, std::int64_t) { return 0; }

inline void launch_layer_norm_forward(const float* x, const float* w, const float* b,
                                      std::int64_t n, int h, float eps, float* y, float* mean,
                                      float* rstd, cudaStream_t) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float* xr = x + i * h;
    float m = 0, v = 0;
    for (int c = 0; c < h; ++c) m += xr[c];
    m /= static_cast<float>(h);
    for (int c = 0; c < h; ++c) v += (xr[c] - m) * (xr[c] - m);
    const float r = 1.0f / std::sqrt(v / static_cast<float>(h) + eps);
    for (int c = 0; c < h; ++c) y[i * h + c] = (xr[c] - m) * r * w[c] + b[c];
    mean[i] = m;
    rstd[i] = r;
  }
}

inline void launch_layer_norm_backward(const float* dy, const float* x, const float* mean,
                                       const float* rstd, const float* w, std::int64_t n, int h,
                                       float* dx, bool add, float* dw, float* db, float*,
                                       cudaStream_t) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float m = mean[i], r = rstd[i];
    float s1 = 0, s2 = 0;
    for (int c = 0; c < h; ++c) {
      const float dxhat = dy[i * h + c] * w[c];
      s1 += dxhat;
      s2 += dxhat * (x[i * h + c] - m) * r;
    }
    for (int c = 0; c < h; ++c) {
      const float xhat = (x[i * h + c] - m) * r;
      dw[c] += dy[i * h + c] * xhat;
      db[c] += dy[i * h + c];
      const float v = r * (dy[i * h + c] * w[c] - s1 / h - xhat * s2 / h);
      dx[i * h + c] = add ? dx[i * h + c] + v : v;
    }
  }
}

inline void launch_broadcast_rows(const float* bias, std::int64_t n, std::int64_t cols, float* y,
                                  cudaStream_t) {
  for (std::int64_t e = 0; e < n * cols; ++e) y[e] = bias[e % cols];
}

inline void launch_add(const float* a, const float* b, std::int64_t count, float* out,
                       cudaStream_t) {
  for (std::int64_t e = 0; e < count; ++e) out[e] = a[e] + b[e];
}

inline float emulated_gelu_s(float v) {
  const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
  return 1.0f / (1.0f + std::exp(std::clamp(-2.0f * u, -87.0f, 87.0f)));
}

inline void launch_gelu_forward(const float* x, float* y, std::int64_t count, cudaStream_t) {
  for (std::int64_t i = 0; i < count; ++i) y[i] = x[i] * emulated_gelu_s(x[i]);
}

inline void launch_gelu_backward(const float* x, float* d, std::int64_t count, cudaStream_t) {
  for (std::int64_t i = 0; i < count; ++i) {
    const float v = x[i], s = emulated_gelu_s(v);
    const float e = std::exp(
        std::clamp(-2.0f * 0.7978845608028654f * (v + 0.044715f * v * v * v), -87.0f, 87.0f));
    const float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * v * v);
    d[i] *= s + 2.0f * v * s * (e * s) * du;
  }
}

inline std::int64_t column_sum_partials(std::int64_t, std::int64_t) { return 0; }

inline void launch_add_column_sums(const float* m, std::int64_t rows, std::int64_t cols,
                                   float* sums, float*, cudaStream_t) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) sums[c] += m[r * cols + c];
  }
}

inline void launch_softmax_cross_entropy(float* logits, const std::int32_t* targets, std::int64_t n,
                                         std::int64_t vocab, double* row_loss, std::int32_t* argmax,
                                         cudaStream_t) {
  for (std::int64_t i = 0; i < n; ++i) {
    float* l = logits + i * vocab;
    const float* best = std::max_element(l, l + vocab);
    const float mx = *best;
    argmax[i] = static_cast<std::int32_t>(best - l);
    double sum = 0;
    for (std::int64_t c = 0; c < vocab; ++c) sum += std::exp(static_cast<double>(l[c] - mx));
    row_loss[i] = targets[i] >= 0 ? std::log(sum) - static_cast<double>(l[targets[i]] - mx) : 0.0;
    for (std::int64_t c = 0; c < vocab; ++c) {
      l[c] = static_cast<float>(std::exp(static_cast<double>(l[c] - mx)) / sum);
    }
  }
}

inline void launch_cross_entropy_backward(float* probs, const std::int32_t* targets, std::int64_t n,
                                          std::int64_t vocab, float scale, cudaStream_t) {
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t c = 0; c < vocab; ++c) {
      float& p = probs[i * vocab + c];
      p = targets[i] < 0 ? 0.0f : (c == targets[i] ? p - 1.0f : p) * scale;
    }
  }
}

}  // namespace shardwise::cuda::detail
