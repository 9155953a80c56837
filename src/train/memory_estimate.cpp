#include "shardwise/train/memory_estimate.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "shardwise/core/error.hpp"

namespace shardwise {

namespace {

constexpr double kFloatBytes = 4;
constexpr int kEvalBatch = 64;  // the trainer's evaluation batch

// Elements of every parameter of the reference GPT (see GptModel::register_params).
double parameter_count(const GptConfig& m) {
  const double v = m.vocab_size, h = m.hidden, f = m.ffn_hidden;
  const double per_layer = 4 * h                     // two layer norms
                           + 3 * h * h + 3 * h       // qkv
                           + h * h + h               // attention projection
                           + f * h + f + h * f + h;  // mlp
  double count = v * h + m.num_layers * per_layer + 2 * h;
  if (!m.rope) count += double(m.seq_len) * h;
  if (!m.tied_embeddings) count += v * h;
  return count;
}

// Floats one forward keeps for backward at `batch` samples, plus backward's largest temporaries.
double activation_floats(const GptConfig& m, double batch) {
  const double n = batch * m.seq_len, h = m.hidden, f = m.ffn_hidden, v = m.vocab_size;
  const double per_layer =
      8 * n * h + 4 * n + 2 * n * f + batch * m.num_heads * double(m.seq_len) * m.seq_len;
  return m.num_layers * per_layer + 2 * n * h + 2 * n + 2 * n * v + 3 * n * std::max(3 * h, f);
}

}  // namespace

MemoryEstimate estimate_training_memory(const GptConfig& model, int micro_batch, int eval_samples,
                                        int optimizer_shards) {
  MemoryEstimate e;
  e.parameter_count = parameter_count(model);
  e.parameters = e.parameter_count * kFloatBytes;
  e.gradients = e.parameter_count * kFloatBytes;
  // Upper bound over the optimizers: two AdamW moments and an fp32 main copy per element.
  e.optimizer_state = 3 * e.parameter_count * kFloatBytes / std::max(1, optimizer_shards);
  const double batch = std::max<double>(micro_batch, std::min(kEvalBatch, eval_samples));
  e.activations = activation_floats(model, batch) * kFloatBytes;
  return e;
}

std::optional<double> available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    double kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return std::nullopt;
}

std::optional<double> address_space_left_bytes() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  std::ifstream statm("/proc/self/statm");  // first field: the address space in pages
  double pages = 0;
  if (!(statm >> pages)) return std::nullopt;
  const double used = pages * static_cast<double>(::sysconf(_SC_PAGESIZE));
  return std::max(0.0, static_cast<double>(limit.rlim_cur) - used);
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) {
    bytes /= 1024;
    ++unit;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, bytes >= 1e6 ? "%.3g %s" : "%.1f %s", bytes, units[unit]);
  return buf;
}

void require_memory_fits(const MemoryEstimate& e, int ranks_on_host,
                         std::optional<double> available) {
  if (!available) return;
  const double needed = e.total() * std::max(1, ranks_on_host);
  SW_REQUIRE(needed <= *available, ConfigError, "this run needs an estimated ",
             format_bytes(e.total()), " per rank (", e.parameter_count, " parameters: weights ",
             format_bytes(e.parameters), ", gradients ", format_bytes(e.gradients),
             ", optimizer state ", format_bytes(e.optimizer_state), ", activations ",
             format_bytes(e.activations), ") x ", std::max(1, ranks_on_host),
             " rank(s) on this host = ", format_bytes(needed), ", more than the ",
             format_bytes(*available),
             " available (MemAvailable in /proc/meminfo): reduce model.layers, model.hidden, "
             "model.ffn, model.vocab, model.seq_len or training.micro_batch_size");
}

void require_address_space_fits(const MemoryEstimate& e, std::optional<double> left) {
  if (!left) return;
  SW_REQUIRE(e.total() <= *left, ConfigError, "this run needs an estimated ",
             format_bytes(e.total()), " per rank (", e.parameter_count,
             " parameters), more than the ", format_bytes(*left),
             " of address space this process may still take (its limit, `ulimit -v`): raise "
             "the limit, or reduce model.layers, model.hidden, model.ffn, model.vocab, "
             "model.seq_len or training.micro_batch_size");
}

}  // namespace shardwise
