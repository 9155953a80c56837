#include "shardwise/train/memory_estimate.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
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

namespace {

// A number read from a cgroup file; nullopt for "max", a missing file or anything else.
std::optional<double> cgroup_number(const std::filesystem::path& file) {
  std::ifstream in(file);
  double value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

// Limit less usage over `dir` and every cgroup above it (a parent's limit binds its children),
// the least of them; `limit_file` / `usage_file` per version. v1 writes "no limit" as ~2^63.
std::optional<double> tightest_cgroup_room(const std::filesystem::path& root,
                                           std::filesystem::path dir, const char* limit_file,
                                           const char* usage_file) {
  std::optional<double> room;
  for (;;) {
    const std::filesystem::path at = root / dir.relative_path();
    const std::optional<double> limit = cgroup_number(at / limit_file);
    if (limit && *limit < 0x1p60) {
      const double left = std::max(0.0, *limit - cgroup_number(at / usage_file).value_or(0.0));
      room = std::min(room.value_or(left), left);
    }
    if (!dir.has_relative_path()) return room;
    dir = dir.parent_path();
  }
}

}  // namespace

std::optional<double> cgroup_memory_left_bytes(const std::filesystem::path& cgroup_root,
                                               const std::filesystem::path& self_cgroup) {
  std::ifstream in(self_cgroup);
  std::optional<double> room;
  auto take = [&](std::optional<double> r) {
    if (r) room = std::min(room.value_or(*r), *r);
  };
  // Lines are "id:controllers:path": "0::path" for v2, "4:memory:path" for v1's memory controller.
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::filesystem::path path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      take(tightest_cgroup_room(cgroup_root, path, "memory.max", "memory.current"));
    } else if (controllers == "memory") {
      take(tightest_cgroup_room(cgroup_root / "memory", path, "memory.limit_in_bytes",
                                "memory.usage_in_bytes"));
    }
  }
  return room;
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
                         std::optional<double> available, std::string_view source) {
  if (!available) return;
  const double needed = e.total() * std::max(1, ranks_on_host);
  SW_REQUIRE(needed <= *available, ConfigError, "this run needs an estimated ",
             format_bytes(e.total()), " per rank (", e.parameter_count, " parameters: weights ",
             format_bytes(e.parameters), ", gradients ", format_bytes(e.gradients),
             ", optimizer state ", format_bytes(e.optimizer_state), ", activations ",
             format_bytes(e.activations), ") x ", std::max(1, ranks_on_host),
             " rank(s) on this host = ", format_bytes(needed), ", more than the ",
             format_bytes(*available), " available (", source,
             "): reduce model.layers, model.hidden, "
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
