// The 19 userbuffers_* presets: values transcribed from Megatron-Bridge into this file, plus a
// field-by-field comparison with the reference data in tests/config/data/, plus the
// name-matching rule.
#include "shardwise/config/comm_overlap_presets.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "shardwise/core/error.hpp"

namespace shardwise {
namespace {

// Slot order: qkv_dgrad qkv_wgrad fc1_dgrad fc1_wgrad qkv_fprop proj_dgrad fc1_fprop fc2_dgrad
// proj_fprop fc2_fprop. "-": not overlapped; b:num_sm:cga_size:set_sm_margin;
// r:aggregate:num_sm:cga_size:set_sm_margin:fp8_buf:atomic_gemm;
// p:num_sm:cga_size:num_splits:set_sm_margin:fp8_buf:atomic_gemm.
struct Transcribed {
  const char* name;
  const char* slots;
};
const Transcribed kTranscribed[] = {
    {"userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192",
     "b:4:2:0 b:24:2:0 b:2:2:0 b:4:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 p:24:2:4:1:0:0 p:16:2:4:1:0:0"},
    {"userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192",
     "b:4:2:0 b:24:2:0 b:2:2:0 b:4:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:1:0:0 r:0:1:1:1:0:0"},
    {"userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192",
     "b:16:2:0 b:24:2:0 b:2:2:0 b:4:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 p:32:2:4:1:0:0 p:16:2:4:1:0:0"},
    {"userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192",
     "b:4:2:0 b:24:2:0 b:2:2:0 b:4:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:1:0:0 r:0:1:1:1:0:0"},
    {"userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192",
     "b:2:2:0 b:24:2:0 b:2:2:0 b:2:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 p:24:2:4:1:0:0 p:8:2:4:1:0:0"},
    {"userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192",
     "b:2:2:0 b:24:2:0 b:2:2:0 b:2:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:1:0:0 r:0:1:1:1:0:0"},
    {"userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192",
     "b:8:2:0 b:24:2:0 b:2:2:0 b:2:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 p:32:2:4:1:0:0 p:8:2:4:1:0:0"},
    {"userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192",
     "b:8:2:0 b:32:2:0 b:2:2:0 b:8:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:1:0:0 r:0:1:1:1:0:0"},
    {"userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora",
     "b:2:2:0 - p:16:2:4:1:1:0 - r:0:1:1:1:0:0 "
     "r:0:1:1:1:0:0 r:0:1:1:1:0:0 r:0:1:1:1:0:0 r:0:1:2:1:1:0 r:0:1:2:1:1:0"},
    {"userbuffers_fp8_h100_h16384_tp4_mbs1_seqlen2048_lora",
     "b:2:2:0 - p:16:2:4:1:1:0 - r:1:1:1:0:0:0 "
     "r:1:1:1:0:0:0 r:1:1:1:0:0:0 r:1:1:1:0:0:0 p:32:2:4:1:1:0 p:16:2:4:1:1:0"},
    {"userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048",
     "b:8:2:0 b:16:2:0 b:4:2:0 b:16:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 p:16:2:4:1:0:0 p:24:2:4:1:0:0"},
    {"userbuffers_fp8_h100_h6144_tp2_mbs2_seqlen2048",
     "b:8:2:0 b:16:2:0 b:4:2:0 b:16:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 p:16:2:4:1:1:0 p:24:2:4:1:1:0"},
    {"userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048",
     "b:4:2:0 b:4:2:0 b:2:2:0 b:4:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 p:24:2:4:1:0:0 r:0:1:1:1:0:0"},
    {"userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048",
     "b:4:2:0 b:4:2:0 b:2:2:0 b:4:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:1:0:0 r:0:1:1:1:0:0"},
    {"userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048",
     "b:4:2:0 b:16:2:0 b:2:2:0 b:8:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:1:0:0 r:0:1:1:1:0:0"},
    {"userbuffers_fp8_b200_h12288_tp4_mbs1_seqlen2048",
     "b:4:2:0 b:16:2:0 b:2:2:0 b:8:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:1:0:0 r:0:1:1:1:0:0"},
    {"userbuffers_bf16_b200_h6144_tp2_mbs1_seqlen4096",
     "b:8:2:0 b:32:2:0 b:2:2:0 b:8:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:1:0:0 r:0:1:1:1:0:0"},
    {"userbuffers_bf16_b200_h18432_tp8_mbs1_seqlen4096",
     "b:8:2:0 b:32:2:0 b:2:2:0 b:8:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:1:0:0 p:24:2:4:1:0:0"},
    {"userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096",
     "b:8:2:0 b:32:2:0 b:2:2:0 b:8:2:0 r:0:1:1:0:0:0 "
     "r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:0:0:0 r:0:1:1:1:0:0 r:0:1:1:1:0:0"},
};

// Independent reader of the notation above.
std::optional<TPOverlapCfg> decode_slot(const std::string& text) {
  if (text == "-") return std::nullopt;
  std::vector<int> n;
  std::stringstream in(text.substr(2));
  for (std::string part; std::getline(in, part, ':');) n.push_back(std::stoi(part));
  switch (text[0]) {
    case 'b': {
      EXPECT_EQ(n.size(), 3u) << text;
      BulkOverlapCfg c;
      c.num_sm = n[0];
      c.cga_size = n[1];
      c.set_sm_margin = n[2] != 0;
      return c;
    }
    case 'r': {
      EXPECT_EQ(n.size(), 6u) << text;
      RingExchangeOverlapCfg c;
      c.aggregate = n[0] != 0;
      c.num_sm = n[1];
      c.cga_size = n[2];
      c.set_sm_margin = n[3] != 0;
      c.fp8_buf = n[4] != 0;
      c.atomic_gemm = n[5] != 0;
      return c;
    }
    case 'p': {
      EXPECT_EQ(n.size(), 6u) << text;
      PipelineOverlapCfg c;
      c.num_sm = n[0];
      c.cga_size = n[1];
      c.num_splits = n[2];
      c.set_sm_margin = n[3] != 0;
      c.fp8_buf = n[4] != 0;
      c.atomic_gemm = n[5] != 0;
      return c;
    }
  }
  ADD_FAILURE() << "bad transcription " << text;
  return std::nullopt;
}

TEST(CommOverlapPresets, EveryPresetMatchesTheTranscribedValues) {
  ASSERT_EQ(comm_overlap_presets().size(), std::size(kTranscribed));
  for (std::size_t i = 0; i < std::size(kTranscribed); ++i) {
    const auto& preset = comm_overlap_presets()[i];
    EXPECT_EQ(preset.name, kTranscribed[i].name) << "presets keep Megatron-Bridge's order";
    std::stringstream in(kTranscribed[i].slots);
    std::size_t slot_index = 0;
    for (std::string token; in >> token; ++slot_index) {
      ASSERT_LT(slot_index, 10u);
      const auto& [slot_name, slot] = TransformerLayerTPOverlapCfg::slots()[slot_index];
      EXPECT_EQ(preset.cfg.*slot, decode_slot(token)) << preset.name << " " << slot_name;
    }
    EXPECT_EQ(slot_index, 10u);
    EXPECT_NO_THROW(validate(preset.cfg, preset.name));
    EXPECT_EQ(&comm_overlap_preset(preset.name), &preset.cfg);
  }
}

// tests/config/data/comm_overlap_presets_reference.txt: "PRESET SLOT key=value ..." per line, or
// "PRESET SLOT -" for a slot that is not overlapped. Values stay text here; the comparison below
// types them.
using ReferenceSlot = std::optional<std::map<std::string, std::string>>;
std::map<std::string, std::map<std::string, ReferenceSlot>> read_reference() {
  const auto path =
      std::filesystem::path(__FILE__).parent_path() / "data" / "comm_overlap_presets_reference.txt";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::map<std::string, std::map<std::string, ReferenceSlot>> reference;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string preset, slot, word;
    words >> preset >> slot;
    ReferenceSlot fields = std::map<std::string, std::string>{};
    while (words >> word) {
      if (word == "-") {
        fields.reset();
        break;
      }
      const auto eq = word.find('=');
      EXPECT_NE(eq, std::string::npos) << line;
      (*fields)[word.substr(0, eq)] = word.substr(eq + 1);
    }
    reference[preset][slot] = fields;
  }
  return reference;
}

std::string field_text(const TpOverlapScalar& value) {
  if (const bool* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&value)) {
    std::ostringstream text;
    text << *d;
    return text.str();
  }
  return std::get<std::string>(value);
}

TEST(CommOverlapPresets, EveryFieldAgreesWithTheReferenceData) {
  const auto reference = read_reference();
  ASSERT_EQ(reference.size(), comm_overlap_presets().size());
  for (const auto& preset : comm_overlap_presets()) {
    SCOPED_TRACE(std::string(preset.name));
    ASSERT_TRUE(reference.count(std::string(preset.name)));
    const auto& expected = reference.at(std::string(preset.name));
    ASSERT_EQ(expected.size(), 10u);
    for (const auto& [slot_name, slot] : TransformerLayerTPOverlapCfg::slots()) {
      ASSERT_TRUE(expected.count(std::string(slot_name))) << slot_name;
      const ReferenceSlot& want = expected.at(std::string(slot_name));
      const auto& have = preset.cfg.*slot;
      ASSERT_EQ(have.has_value(), want.has_value()) << slot_name;
      if (!want) continue;
      const auto fields = overlap_fields(*have);
      EXPECT_EQ(fields.size(), want->size()) << slot_name << ": same set of fields";
      for (const auto& [key, value] : *want) {
        ASSERT_TRUE(fields.count(key)) << slot_name << "." << key;
        EXPECT_EQ(field_text(fields.at(key)), value) << slot_name << "." << key;
      }
    }
  }
}

TEST(CommOverlapPresets, UnknownNameListsTheKnownOnes) {
  try {
    comm_overlap_preset("userbuffers_bf16_h100_h1_tp2_mbs1_seqlen1");
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("unknown TP-overlap preset 'userbuffers_bf16_h100_h1_tp2_mbs1_seqlen1'"),
              std::string::npos);
    EXPECT_NE(message.find("userbuffers_fp8_b200_h18432_tp8_mbs1_seqlen4096"), std::string::npos);
  }
}

TEST(CommOverlapPresets, NamesParseIntoTheirKeys) {
  struct Case {
    std::string_view name;
    CommOverlapPresetKey key;
  };
  const Case cases[] = {
      {"userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192",
       {"bf16", GpuArch::kHopper, 8192, 4, 1, 1, 8192, false}},
      {"userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192",
       {"fp8", GpuArch::kBlackwell, 16384, 4, 2, 1, 8192, false}},
      {"userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora",
       {"fp8", GpuArch::kHopper, 8192, 2, 1, 1, 4096, true}},
      {"userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048",
       {"bf16", GpuArch::kHopper, 6144, 2, 1, 2, 2048, false}},
  };
  for (const auto& c : cases) EXPECT_EQ(parse_preset_name(c.name), c.key) << c.name;
  for (const auto& preset : comm_overlap_presets()) {
    EXPECT_TRUE(parse_preset_name(preset.name).has_value()) << preset.name;
  }
  for (std::string_view bad :
       {"userbuffers_bf16_a100_h8192_tp4_mbs1_seqlen8192",
        "userbuffers_fp16_h100_h8192_tp4_mbs1_seqlen8192", "userbuffers_bf16_h100_h8192_tp4_mbs1",
        "bf16_h100_h8192_tp4", "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192_extra",
        "userbuffers_bf16_h100_hx_tp4_mbs1_seqlen8192"}) {
    EXPECT_FALSE(parse_preset_name(bad).has_value()) << bad;
  }
}

TEST(CommOverlapPresets, EveryPresetIsFoundFromItsOwnKeyAndOnlyThen) {
  for (const auto& preset : comm_overlap_presets()) {
    const auto key = *parse_preset_name(preset.name);
    EXPECT_EQ(find_matching_preset(key), preset.name);
    auto other = key;
    other.seq_length *= 2;
    EXPECT_NE(find_matching_preset(other), preset.name);
    other = key;
    other.lora = !other.lora;
    EXPECT_NE(find_matching_preset(other), preset.name);
    other = key;
    other.gpu = GpuArch::kAmpere;
    EXPECT_FALSE(find_matching_preset(other).has_value());
  }
  CommOverlapPresetKey fp32_run{"fp32", GpuArch::kHopper, 8192, 4, 1, 1, 8192, false};
  EXPECT_FALSE(find_matching_preset(fp32_run).has_value());
}

TEST(TpOverlapConfig, BackendMapIsFlatAndSkipsUnsetSlots) {
  const auto& lora = comm_overlap_preset("userbuffers_fp8_h100_h8192_tp2_mbs1_seqlen4096_lora");
  ASSERT_FALSE(lora.qkv_wgrad.has_value());
  const auto map = to_backend_map(lora);
  EXPECT_EQ(map.count("qkv_wgrad.method"), 0u);
  EXPECT_EQ(map.count("fc1_wgrad.num_sm"), 0u);
  std::size_t expected_entries = 0;  // bulk slots have 4 fields, ring / pipeline slots 7
  for (const auto& [name, slot] : TransformerLayerTPOverlapCfg::slots()) {
    if (const auto& entry = lora.*slot) {
      expected_entries += std::holds_alternative<BulkOverlapCfg>(*entry) ? 4 : 7;
    }
  }
  EXPECT_EQ(map.size(), expected_entries);
  EXPECT_GE(map.size(), 8u * 4);
  const auto& full = comm_overlap_preset("userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192");
  const auto flat = to_backend_map(full);
  EXPECT_EQ(std::get<std::string>(flat.at("proj_fprop.method")), "pipeline");
  EXPECT_EQ(std::get<std::int64_t>(flat.at("proj_fprop.num_sm")), 24);
  EXPECT_EQ(std::get<std::int64_t>(flat.at("fc2_fprop.num_splits")), 4);
  EXPECT_EQ(std::get<bool>(flat.at("fc2_fprop.set_sm_margin")), true);
  EXPECT_EQ(std::get<std::string>(flat.at("qkv_dgrad.method")), "bulk");
  EXPECT_EQ(std::get<bool>(flat.at("qkv_fprop.aggregate")), false);
}

TEST(TpOverlapConfig, ValidateNamesTheField) {
  struct Case {
    std::function<void(TransformerLayerTPOverlapCfg&)> mutate;
    std::string expected;
  };
  const Case cases[] = {
      {[](auto& c) { std::get<PipelineOverlapCfg>(*c.proj_fprop).num_splits = 0; },
       "cfg.proj_fprop.num_splits must be >= 1"},
      {[](auto& c) { std::get<PipelineOverlapCfg>(*c.fc2_fprop).method = "zigzag"; },
       "cfg.fc2_fprop.method: unknown or mismatched method 'zigzag'"},
      {[](auto& c) { std::get<BulkOverlapCfg>(*c.qkv_dgrad).num_sm = 0; },
       "cfg.qkv_dgrad.num_sm must be >= 1"},
      {[](auto& c) { std::get<RingExchangeOverlapCfg>(*c.qkv_fprop).cga_size = -1; },
       "cfg.qkv_fprop.cga_size must be >= 1"},
      {[](auto& c) { c.fc1_fprop = PipelineOverlapCfg{}; }, "cfg.fc1_fprop.num_sm must be >= 1"},
  };
  for (const auto& c : cases) {
    auto cfg = comm_overlap_preset("userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192");
    c.mutate(cfg);
    try {
      validate(cfg, "cfg");
      ADD_FAILURE() << "expected ConfigError: " << c.expected;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(c.expected), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace shardwise
