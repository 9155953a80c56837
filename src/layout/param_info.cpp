#include "shardwise/layout/param_info.hpp"

#include <algorithm>

#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/param_sizes.hpp"

namespace shardwise {
namespace {

// "[a, b, ...]", cut after a few dimensions (the shape may come from untrusted input).
std::string param_shape_text(const std::vector<std::int64_t>& shape) {
  constexpr std::size_t kShown = 8;
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size() && i < kShown; ++i) {
    out += (i ? ", " : "") + std::to_string(shape[i]);
  }
  if (shape.size() > kShown) out += str_cat(", ... (", shape.size(), " dimensions)");
  return out + "]";
}

}  // namespace

std::int64_t ParamInfo::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    SW_REQUIRE(d >= 0, ShapeError, "param ", name, ": negative dimension ", d, " in shape");
    // Checked so that a huge shape is refused instead of wrapping to a small (or empty) range.
    SW_REQUIRE(!__builtin_mul_overflow(n, d, &n) && n <= kMaxModelNumel, ShapeError, "param ", name,
               ": shape ", param_shape_text(shape), " has more than ", kMaxModelNumel,
               " elements (2^50, the most shardwise lays out)");
  }
  return n;
}

std::optional<std::string> qkv_split_problem(const ParamInfo& param) {
  if (!param.is_qkv()) return std::nullopt;
  const std::vector<std::int64_t>& split = param.qkv_split;
  if (split.size() != 3) return str_cat("must have 3 entries [q, k, v], got ", split.size());
  if (!param.is_2d()) return str_cat("needs a 2-D shape, got ", param.shape.size(), " dims");
  for (const std::int64_t rows : split) {
    if (rows <= 0) return str_cat("entries must be > 0, got ", rows);
  }
  const auto qk = checked_add(split[0], split[1]);
  const auto rows = qk ? checked_add(*qk, split[2]) : std::nullopt;
  if (rows != param.shape[0]) {
    return str_cat("sums to ", rows ? std::to_string(*rows) : std::string("more than 2^63"),
                   " but shape[0] is ", param.shape[0]);
  }
  return std::nullopt;
}

void validate_param_sizes(const ParamList& params) {
  std::int64_t total = 0;
  for (const ParamInfo& p : params) {
    total += p.numel();  // each at most kMaxModelNumel, so the sum of two cannot overflow
    SW_REQUIRE(total <= kMaxModelNumel, ShapeError, "the params up to ", p.name, " hold ", total,
               " elements, more than ", kMaxModelNumel, " (2^50, the most shardwise lays out)");
  }
}

bool is_managed_by_layer_wise_optimizer(const ParamInfo& param) {
  if (param.use_muon.has_value() && !*param.use_muon) return false;
  return param.is_2d() && !param.embedding_or_output && !param.shared_embedding;
}

namespace {

// Work of Newton–Schulz on an m x n matrix: the Gram products cost max*min^2.
double matrix_ns_cost(std::int64_t m, std::int64_t n) {
  const double big = static_cast<double>(std::max(m, n));
  const double small = static_cast<double>(std::min(m, n));
  return big * small * small;
}

}  // namespace

double newton_schulz_cost(const ParamInfo& param) {
  if (!is_managed_by_layer_wise_optimizer(param)) return static_cast<double>(param.numel());
  const std::int64_t cols = param.shape[1];
  if (!param.is_qkv()) return matrix_ns_cost(param.shape[0], cols);
  // Split QKV: Muon orthogonalises the query, key and value blocks separately.
  double cost = 0.0;
  for (std::int64_t rows : param.qkv_split) cost += matrix_ns_cost(rows, cols);
  return cost;
}

std::string param_label(const ParamList& params, ParamId id) {
  if (id < params.size()) return str_cat("param '", params[id].name, "' (id ", id, ")");
  return str_cat("param id ", id);
}

}  // namespace shardwise
