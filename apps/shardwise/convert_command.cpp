// `shardwise convert`: rewrites a safetensors checkpoint with its 2-D weights in MXFP8 (E4M3 data +
// E8M0 scales), or back to bf16. The work is in checkpoint/mxfp8_convert.hpp; this file parses the
// options, draws a progress bar on a terminal and prints the one-line summary.
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_integer.hpp"
#include "cli_path.hpp"
#include "command_registry.hpp"
#include "shardwise/checkpoint/mxfp8_convert.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/command_paths.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/train/memory_estimate.hpp"

namespace shardwise::cli {
namespace {

// Files smaller than this convert in well under a second; no bar for them.
constexpr std::uint64_t kProgressMinBytes = std::uint64_t{256} << 20;

struct ConvertArgs {
  std::string to;
  std::string input;
  std::string output;
  std::optional<std::string> scale_rule;    // default ceil
  std::optional<std::string> scale_layout;  // default 2d
  std::vector<std::string> include;
  std::vector<std::string> exclude;
  int threads = 0;
};

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.2f %s", value, units[unit]);
  return text;
}

// A one-line bar redrawn in place on stderr, at most once per whole percent.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  ~ProgressBar() { finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  ConvertProgress callback() {
    if (!enabled_) return {};
    return [this](std::uint64_t done, std::uint64_t total) { draw(done, total); };
  }
  // Ends the bar's line so the summary starts on a fresh one.
  void finish() {
    if (drawn_) std::fputc('\n', stderr);
    drawn_ = false;
  }

 private:
  void draw(std::uint64_t done, std::uint64_t total) {
    const int percent = total == 0 ? 100 : static_cast<int>(done * 100 / total);
    if (percent == last_percent_) return;
    last_percent_ = percent;
    constexpr int kWidth = 40;
    std::string bar(kWidth, ' ');
    for (int i = 0; i < percent * kWidth / 100; ++i) bar[static_cast<std::size_t>(i)] = '#';
    std::fprintf(stderr, "\rconvert [%s] %3d%% %s / %s", bar.c_str(), percent,
                 human_bytes(done).c_str(), human_bytes(total).c_str());
    std::fflush(stderr);
    drawn_ = true;
  }

  bool enabled_;
  bool drawn_ = false;
  int last_percent_ = -1;
};

bool wants_progress(const std::string& input) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(input, ec);
  return !ec && size >= kProgressMinBytes && ::isatty(::fileno(stderr)) != 0;
}

void print_summary(const char* verb, const ConvertSummary& s, const std::string& skipped) {
  const double ratio =
      s.bytes_in == 0 ? 0.0 : static_cast<double>(s.bytes_out) / static_cast<double>(s.bytes_in);
  std::printf("%s %zu tensors, copied %zu%s; %s -> %s (%.3fx)\n", verb, s.converted, s.copied,
              skipped.c_str(), human_bytes(s.bytes_in).c_str(), human_bytes(s.bytes_out).c_str(),
              ratio);
}

// libgomp ends the process (exit 1, "Thread creation failed") when it cannot make a thread: a
// --threads whose stacks do not fit in half the address space left under `ulimit -v` (the
// other half for the tensors) is refused first.
void require_thread_stacks_fit(int threads) {
  const std::optional<double> left = address_space_left_bytes();
  if (!left || threads <= 1) return;
  std::size_t stack = std::size_t{8} << 20;  // glibc's default on x86-64
  pthread_attr_t attr;
  if (::pthread_getattr_default_np(&attr) == 0) {
    ::pthread_attr_getstacksize(&attr, &stack);
    ::pthread_attr_destroy(&attr);
  }
  const double budget = *left / 2;
  const double needed = static_cast<double>(threads - 1) * static_cast<double>(stack);
  SW_REQUIRE(needed <= budget, InvalidArgument, "--threads ", threads, ": the threads' stacks (",
             format_bytes(static_cast<double>(stack)), " each, ", format_bytes(needed),
             ") do not fit in half the ", format_bytes(*left),
             " of address space this process may still take (its limit, `ulimit -v`): give at "
             "most ",
             1 + static_cast<std::int64_t>(budget / static_cast<double>(stack)), " threads");
}

int run_convert(const ConvertArgs& args) {
  // The output must be a writable file path, not the input, before any tensor is read.
  check_command_paths({{"", args.input, PathUse::kReadFile},
                       {"convert: output", args.output, PathUse::kWriteFile}});
  require_thread_stacks_fit(args.threads);
  ProgressBar bar(wants_progress(args.input));
  if (args.to == "mxfp8") {
    Mxfp8ConvertOptions options;
    options.rule = parse_mxfp8_scale_rule(args.scale_rule.value_or("ceil"));
    options.layout = parse_mxfp8_scale_layout(args.scale_layout.value_or("2d"));
    options.include = args.include;
    options.exclude = args.exclude;
    options.num_threads = args.threads;
    options.progress = bar.callback();
    const ConvertSummary s = convert_safetensors_to_mxfp8(args.input, args.output, options);
    std::string skipped;
    if (s.skipped_not_2d > 0) skipped += str_cat(", skipped ", s.skipped_not_2d, " not 2-D");
    if (s.skipped_not_float > 0) {
      skipped += str_cat(", skipped ", s.skipped_not_float, " not fp32/bf16/fp16");
    }
    bar.finish();
    print_summary("mxfp8: converted", s, skipped);
    return 0;
  }
  if (args.to == "bf16") {
    SW_REQUIRE(args.include.empty() && args.exclude.empty(), InvalidArgument,
               "convert --to bf16 restores every MXFP8 tensor; --include/--exclude do not apply");
    // The file records each tensor's rule and layout; a flag given here was ignored.
    SW_REQUIRE(!args.scale_rule && !args.scale_layout, InvalidArgument, "convert --to bf16 reads ",
               args.scale_rule ? "the scale rule" : "the scale layout",
               " each tensor was written with from the file; ",
               args.scale_rule ? "--scale-rule" : "--scale-layout", " does not apply");
    Mxfp8RestoreOptions options;
    options.dtype = DType::kBFloat16;
    options.num_threads = args.threads;
    options.progress = bar.callback();
    const ConvertSummary s = convert_safetensors_from_mxfp8(args.input, args.output, options);
    bar.finish();
    print_summary("bf16: restored", s, "");
    return 0;
  }
  throw InvalidArgument(str_cat("convert: unknown --to '", args.to, "' (valid: mxfp8, bf16)"));
}

const bool registered = register_command(
    "convert", "Convert a safetensors checkpoint's 2-D weights to MXFP8, or back to bf16",
    [](CLI::App& app) {
      auto args = std::make_shared<ConvertArgs>();
      app.add_option("--to", args->to, "mxfp8 or bf16")->required();
      app.add_option("input", args->input, "Input .safetensors file")
          ->required()
          ->check(non_empty_path());
      app.add_option("output", args->output,
                     "Output .safetensors file (written atomically; must differ from the input)")
          ->required()
          ->check(non_empty_path());
      app.add_option("--scale-rule", args->scale_rule,
                     "ceil (default: amax/448 rounded up to a power of two, as Transformer "
                     "Engine) or floor (OCP MX: floor(log2 amax) - 8, saturating)");
      app.add_option("--scale-layout", args->scale_layout,
                     "2d (default: NAME_scale is [rows, ceil(cols/32)]) or swizzled (cuBLAS "
                     "128x4 tiles, [round_up(rows,128), round_up(ceil(cols/32),4)])");
      app.add_option("--include", args->include,
                     "Regex (RE2 syntax, searched in the name; repeatable): convert only 2-D "
                     "tensors whose name matches. Default: every 2-D fp32/bf16/fp16 tensor "
                     "except names matching '" +
                         std::string(kMxfp8DefaultExcludePattern) +
                         "' (embeddings, output layer, norms); giving --include drops that "
                         "default exclusion");
      app.add_option("--exclude", args->exclude,
                     "Regex (repeatable): never convert tensors whose name matches");
      app.add_option("--threads", args->threads, "Codec threads (default: OpenMP default)")
          ->check(integer_in(1, 4096));
      app.footer(
          "Each converted tensor NAME becomes NAME (F8_E4M3) + NAME_scale (F8_E8M0); block size, "
          "scale rule, layout and each tensor's original dtype and shape are recorded in "
          "__metadata__ (shardwise.mxfp8.*). Other tensors and metadata are copied unchanged. "
          "Tensors selected by name but not 2-D are copied and counted in the summary.");
      return [args] { return run_convert(*args); };
    });

}  // namespace
}  // namespace shardwise::cli
