// Hostile YAML and sizes in training configs: recursive aliases, alias bombs, second documents,
// YAML 1.1 booleans, huge values echoed in messages, parallel-size products that overflowed, and
// sizes past what any real job uses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "shardwise/config/training_config.hpp"
#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

// The ConfigError message of parsing `yaml` with `overrides`; "" when it parses.
std::string limits_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_training_config(yaml, overrides, "c.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_MESSAGE(message, needle)                                             \
  do {                                                                              \
    const std::string message_ = (message);                                         \
    EXPECT_NE(message_.find(needle), std::string::npos) << "message: " << message_; \
  } while (0)

TEST(ConfigYamlSafety, RecursiveAliasesAreRefused) {
  EXPECT_MESSAGE(limits_error("model:\n  arch: &a [*a]\n"),
                 "c.yaml: alias '*a' on line 2 refers to the node that contains it");
  EXPECT_MESSAGE(limits_error("model: &m\n  layers: 2\n  again: *m\n"), "recursive aliases");
  EXPECT_MESSAGE(limits_error("a: &x {b: &y {c: *x}}\n"), "alias '*x'");
  EXPECT_MESSAGE(limits_error("{}", {"model.arch=&a [*a]"}),
                 "override 'model.arch=&a [*a]': alias '*a'");
  // Aliases of finished nodes are fine (and still checked for duplicate keys).
  EXPECT_MESSAGE(limits_error("x: &o {steps: 5}\ntraining: *o\n"), "unknown section 'x'");
  EXPECT_EQ(limits_error("training: &t {steps: 5}\n"), "");
}

TEST(ConfigYamlSafety, AliasBombsAreBoundedByExpandedNodes) {
  // 10 levels of 10 aliases each: 10^10 nodes if expanded; refused after a million.
  std::string yaml = "a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int i = 1; i <= 10; ++i) {
    const std::string p = str_cat("*a", i - 1);
    yaml += str_cat("a", i, ": &a", i, " [", p);
    for (int k = 1; k < 10; ++k) yaml += str_cat(", ", p);
    yaml += "]\n";
  }
  EXPECT_MESSAGE(limits_error(yaml), "aliases expand the document to more than 1000000 nodes");
}

TEST(ConfigYamlSafety, DeepAliasChainsStayLinear) {
  // A 400-deep list aliased 2000 times: 800k nodes, each of a long path. Copying the dotted path
  // per node made this quadratic; it must parse (and fail on the unknown section) quickly.
  const std::string deep = str_cat(std::string(400, '['), "1", std::string(400, ']'));
  std::string yaml = str_cat("x: &d ", deep, "\ny: [");
  for (int i = 0; i < 1900; ++i) yaml += i ? ", *d" : "*d";
  yaml += "]\n";
  EXPECT_MESSAGE(limits_error(yaml), "unknown section 'x'");
}

TEST(ConfigYamlSafety, SecondDocumentIsRefused) {
  EXPECT_MESSAGE(limits_error("training:\n  steps: 5\n---\ntraining:\n  steps: 7\n"),
                 "c.yaml: a second YAML document starts on line 3");
  EXPECT_MESSAGE(limits_error("training: {steps: 5}\n---\n"), "second YAML document");
  EXPECT_MESSAGE(limits_error("{}", {"training.steps=5\n---\n7"}), "second YAML document");
  EXPECT_EQ(limits_error("---\ntraining: {steps: 5}\n...\n"), "") << "one explicit document";
}

// YAML's "\0" escape put a NUL in a path: "victim.txt\0.jsonl" wrote the metrics over victim.txt.
TEST(ConfigYamlSafety, StringsWithANulByteAreRefused) {
  EXPECT_MESSAGE(limits_error("logging: {jsonl_path: \"/tmp/victim.txt\\0.jsonl\"}\n"),
                 "logging.jsonl_path: '/tmp/victim.txt\\x00.jsonl' contains a NUL byte");
  EXPECT_MESSAGE(limits_error("data: {path: \"corpus.txt\\0zzz\"}\n"), "contains a NUL byte");
  EXPECT_EQ(limits_error("logging: {jsonl_path: \"/tmp/m.jsonl\"}\n"), "");
}

// A raw NUL byte in the file (a binary file, a bad copy): yaml-cpp blamed "unknown escape
// character" on the next line.
TEST(ConfigYamlSafety, RawNulByteIsNamedWithItsLine) {
  using namespace std::string_literals;  // "..."s keeps the NUL
  EXPECT_MESSAGE(limits_error("model:\n  layers: 2\0\n"s),
                 "c.yaml: invalid YAML: a NUL byte on line 2");
  EXPECT_MESSAGE(limits_error("{}", {"training.steps=5\0"s}), "a NUL byte");
}

// yaml-cpp's depth guard says "bad file"; the message says what is wrong with it.
TEST(ConfigYamlSafety, DeepNestingIsCalledThat) {
  const std::string deep = "a: " + std::string(5000, '[') + std::string(5000, ']') + "\n";
  EXPECT_MESSAGE(limits_error(deep), "c.yaml: invalid YAML: nests deeper than ");
  EXPECT_EQ(limits_error(deep).find("bad file"), std::string::npos) << limits_error(deep);
}

TEST(ConfigYamlSafety, OnlyPlainNumbersAreNumbers) {
  EXPECT_MESSAGE(limits_error("model: {layers: \"1\"}\n"),
                 "model.layers: expected an integer, got the quoted string '1'");
  EXPECT_MESSAGE(
      limits_error("optimizer: {lr: !!str 1}\n"),
      "optimizer.lr: expected a finite number, got a value tagged tag:yaml.org,2002:str");
  EXPECT_EQ(limits_error("model: {layers: 1}\noptimizer: {lr: !!float 1e-3}\n"), "");
  EXPECT_EQ(limits_error("{}", {"model.layers=2", "optimizer.lr=3e-4"}), "");
}

TEST(ConfigYamlSafety, OnlyPlainTrueAndFalseAreBooleans) {
  for (const char* word : {"yes", "no", "on", "off", "y", "n", "Yes", "ON"}) {
    EXPECT_MESSAGE(limits_error(str_cat("parallel: {sequence_parallel: ", word, "}")),
                   str_cat("parallel.sequence_parallel: expected a boolean (true or false), got '",
                           word, "' (only unquoted true and false are booleans)"));
  }
  EXPECT_MESSAGE(limits_error("ddp: {overlap_grad_reduce: 'true'}"),
                 "ddp.overlap_grad_reduce: expected a boolean (true or false), got the quoted "
                 "string 'true'");
  EXPECT_MESSAGE(limits_error("{}", {"ddp.overlap_grad_reduce=\"false\""}), "quoted string");
  EXPECT_MESSAGE(limits_error("{}", {"ddp.overlap_grad_reduce=on"}), "got 'on'");
  const auto cfg = parse_training_config(
      "ddp: {overlap_grad_reduce: True, overlap_param_gather: FALSE}\nlogging: {progress: false}");
  EXPECT_TRUE(cfg.ddp.overlap_grad_reduce);
  EXPECT_FALSE(cfg.ddp.overlap_param_gather);
}

TEST(ConfigYamlSafety, HugeValuesAreCutInMessages) {
  const std::string huge(200000, 'q');
  const std::string message = limits_error(str_cat("model:\n  arch: ", huge, "\n"));
  EXPECT_MESSAGE(message, "model.arch: unknown value 'qqqq");
  EXPECT_MESSAGE(message, "(200000 bytes)");
  EXPECT_LT(message.size(), 1000u);
  const std::string key_message = limits_error(str_cat("model:\n  ? ", huge, "\n  : 1\n"));
  EXPECT_MESSAGE(key_message, "model: unknown key 'qqq");
  EXPECT_LT(key_message.size(), 1000u);
  const std::string override_message = limits_error("{}", {str_cat("model.arch=", huge)});
  EXPECT_LT(override_message.size(), 1000u);
  EXPECT_MESSAGE(override_message, "unknown value");
}

TEST(ConfigLimits, ParallelProductsAreOverflowChecked) {
  // pp x vp = 2^32 wrapped to 0 in int and divided by: SIGFPE.
  EXPECT_MESSAGE(limits_error("{}", {"parallel.pp=65536", "parallel.vp=65536"}),
                 "pipeline stages: parallel.pp (65536) x parallel.vp (65536) = 4294967296 "
                 "exceeds the limit of 100000");
  EXPECT_MESSAGE(limits_error("{}", {"parallel.tp=65536", "parallel.pp=65536"}),
                 "model-parallel size: parallel.tp (65536) x parallel.pp (65536) x parallel.cp "
                 "(1) = 4294967296 exceeds the limit of 1048576");
  EXPECT_MESSAGE(limits_error("{}", {"parallel.tp=65536", "parallel.cp=65536"}),
                 "parallel.tp (65536) x parallel.pp (1) x parallel.cp (65536)");
  EXPECT_MESSAGE(limits_error("{}", {"parallel.tp=2147483647"}),
                 "parallel.tp must be <= 1048576 (got 2147483647");
}

TEST(ConfigLimits, SizesPastAnyRealJobAreRefused) {
  EXPECT_MESSAGE(limits_error("{}", {"training.grad_accumulation=2147483647"}),
                 "training.grad_accumulation must be <= 1048576 (got 2147483647");
  EXPECT_MESSAGE(limits_error("{}", {"training.micro_batch_size=2000000"}),
                 "training.micro_batch_size must be <= 1048576");
  EXPECT_MESSAGE(limits_error("{}", {"model.layers=2000000000"}), "model.layers must be <= 100000");
  EXPECT_MESSAGE(limits_error("{}", {"model.seq_len=2147483647"}), "model.seq_len must be <=");
  EXPECT_MESSAGE(limits_error("{}", {"training.steps=9223372036854775807"}),
                 "training.steps must be <= 1000000000000");
  // Each factor in range, their product (the last sample index) not.
  EXPECT_MESSAGE(
      limits_error("{}", {"training.steps=1000000000000", "training.micro_batch_size=1048576",
                          "training.grad_accumulation=1048576"}),
      "samples the run would consume: training.steps (1000000000000) x "
      "training.micro_batch_size (1048576) x training.grad_accumulation (1048576) "
      "overflows 64 bits");
  EXPECT_MESSAGE(limits_error("{}", {"comm_overlap.data_parallel_size=2147483647"}),
                 "comm_overlap.data_parallel_size must be in [1, 1048576]");
  EXPECT_EQ(limits_error("{}", {"model.layers=100000", "training.grad_accumulation=1048576"}), "");
}

bool has_config_warning(const TrainingConfig& config, const std::string& text) {
  for (const auto& w : config_warnings(config)) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(ConfigWarnings, SeqLenIsIgnoredBySyntheticTasks) {
  const std::string warning = "model.seq_len (64) is ignored for data.source synthetic";
  EXPECT_TRUE(has_config_warning(parse_training_config("model: {seq_len: 64}"), warning));
  EXPECT_FALSE(has_config_warning(parse_training_config("{}"), warning));
  EXPECT_FALSE(has_config_warning(
      parse_training_config("model: {seq_len: 64}\ndata: {source: bin, path: x.bin}"), warning));
}

TEST(ConfigWarnings, DigitsAreIgnoredByFileData) {
  const std::string warning = "data.digits (5) is ignored for data.source text";
  EXPECT_TRUE(has_config_warning(parse_training_config("data: {source: text, path: x, digits: 5}"),
                                 warning));
  EXPECT_FALSE(has_config_warning(parse_training_config("data: {source: text, path: x}"), warning));
  EXPECT_FALSE(has_config_warning(parse_training_config("data: {digits: 5}"), warning));
}

}  // namespace
}  // namespace shardwise
