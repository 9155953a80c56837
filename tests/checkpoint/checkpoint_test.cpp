// Single-process checkpoint tests: one rank's optimizer state file round trip, the checkpoint
// directory protocol with a world of one (save, resolve, keep-last), every bad-checkpoint case
// (each error names the file and the tensor, and leaves the files as they were), and a save
// killed with SIGKILL at several moments, after which the previous checkpoint still loads.
#include "shardwise/checkpoint/checkpoint.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <thread>
#include <tuple>

#include "ddp/fake_process_group.hpp"
#include "shardwise/checkpoint/checkpoint_shards.hpp"
#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/atomic_file.hpp"
#include "shardwise/core/cpu_isa.hpp"
#include "shardwise/optim/adamw.hpp"

namespace shardwise {
namespace {

namespace fs = std::filesystem;
using testing_support::FakeProcessGroup;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / str_cat("shardwise-ckpt-", name, "-", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A tiny "model" (params with values and grads) and an AdamW over it.
struct TinyModel {
  struct Param {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<float> value, grad;
  };
  std::vector<Param> params;
  std::unique_ptr<optim::AdamW> optimizer;

  TinyModel(const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& spec,
            std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (const auto& [name, shape] : spec) {
      std::int64_t n = 1;
      for (auto d : shape) n *= d;
      Param p{name, shape, std::vector<float>(static_cast<std::size_t>(n)),
              std::vector<float>(static_cast<std::size_t>(n))};
      for (float& v : p.value) v = normal(rng);
      params.push_back(std::move(p));
    }
    std::vector<optim::OptimParam> views;
    for (Param& p : params) {
      views.push_back(optim::OptimParam{p.name, p.shape, p.value.data(), p.grad.data(), {}});
    }
    optimizer = std::make_unique<optim::AdamW>(optim::single_group(std::move(views)),
                                               optim::AdamWOptions{1e-2, 0.1, 0.9, 0.99, 1e-8});
  }

  void step(std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (Param& p : params) {
      for (float& g : p.grad) g = normal(rng);
    }
    optimizer->step();
  }

  std::vector<ModelTensor> tensors() {
    std::vector<ModelTensor> out;
    for (Param& p : params) {
      out.push_back(
          {p.name, p.shape,
           TensorView{p.value.data(), static_cast<std::int64_t>(p.value.size()), DType::kFloat32}});
    }
    return out;
  }
};

const std::vector<std::pair<std::string, std::vector<std::int64_t>>> kSpec = {
    {"layers.0.weight", {8, 6}}, {"layers.0.bias", {6}}, {"head.weight", {5, 8}}};

CheckpointSaveRequest request(const fs::path& root, std::int64_t step, int keep_last = 0) {
  CheckpointSaveRequest r;
  r.root = root;
  r.step = step;
  r.consumed_samples = step * 16;
  r.keep_last = keep_last;
  r.optimizer_kind = "ddp";
  r.extra = {{"note", "unit test"}};
  return r;
}

std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    out[fs::relative(e.path(), dir).string()] =
        std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return out;
}

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(OptimizerStateFile, RoundTripRestoresStateAndContinuesBitIdentically) {
  const fs::path dir = fresh_dir("state-file");
  TinyModel a(kSpec, 1);
  for (std::uint32_t s = 0; s < 3; ++s) a.step(100 + s);
  save_state_dict_to_file(*a.optimizer, dir / "rank0.safetensors");

  // The file is a safetensors file with "<param>/<field>" tensors and the shard index.
  const SafetensorsFile file = SafetensorsFile::open(dir / "rank0.safetensors");
  EXPECT_TRUE(file.contains("layers.0.weight/exp_avg_sq"));
  EXPECT_EQ(file.info("layers.0.weight/main_param").shape, (std::vector<std::int64_t>{8, 6}));
  EXPECT_EQ(file.info("head.weight/step").numel(), 1);
  EXPECT_EQ(file.metadata().at("format"), "shardwise.optimizer_shards");

  TinyModel b(kSpec, 2);  // different values, never stepped
  load_state_dict_from_file(*b.optimizer, dir / "rank0.safetensors");
  EXPECT_EQ(a.optimizer->state_dict(), b.optimizer->state_dict());
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_EQ(a.params[i].value, b.params[i].value) << a.params[i].name;
  }
  a.step(7);
  b.step(7);
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_EQ(a.params[i].value, b.params[i].value) << a.params[i].name;
  }
  EXPECT_EQ(b.optimizer->state_dict().at("layers.0.bias").at("step"), std::vector<float>{4.0f});
  fs::remove_all(dir);
}

// The in-place load (AdamW's state is in host memory) and the hand-over of a filled state dict
// (the path of state kept elsewhere, e.g. on a GPU) give the same optimizer.
TEST(OptimizerStateFile, InPlaceLoadEqualsStateDictHandOver) {
  const fs::path dir = fresh_dir("state-file-in-place");
  TinyModel a(kSpec, 1);
  for (std::uint32_t s = 0; s < 3; ++s) a.step(200 + s);
  save_state_dict_to_file(*a.optimizer, dir / "rank0.safetensors");
  const std::vector<SavedShard> saved = read_shard_file_index(dir / "rank0.safetensors");
  TinyModel in_place(kSpec, 2);
  TinyModel handed_over(kSpec, 3);
  ASSERT_TRUE(in_place.optimizer->state_load_targets().has_value());
  load_optimizer_shards(*in_place.optimizer, saved, "test",
                        *in_place.optimizer->state_load_targets());
  load_optimizer_shards(*handed_over.optimizer, saved, "test", handed_over.optimizer->state_dict());
  EXPECT_EQ(in_place.optimizer->state_dict(), a.optimizer->state_dict());
  EXPECT_EQ(handed_over.optimizer->state_dict(), a.optimizer->state_dict());
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_EQ(in_place.params[i].value, a.params[i].value) << a.params[i].name;
    EXPECT_EQ(handed_over.params[i].value, a.params[i].value) << a.params[i].name;
  }
  fs::remove_all(dir);
}

TEST(OptimizerStateFile, WrongModelIsRejectedNamingParam) {
  const fs::path dir = fresh_dir("state-file-wrong");
  TinyModel a(kSpec, 1);
  a.step(1);
  save_state_dict_to_file(*a.optimizer, dir / "s.safetensors");
  TinyModel other({{"layers.0.weight", {8, 6}}, {"other.weight", {3}}}, 1);
  const std::string message =
      error_of([&] { load_state_dict_from_file(*other.optimizer, dir / "s.safetensors"); });
  EXPECT_NE(message.find("other.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("s.safetensors"), std::string::npos) << message;
  TinyModel reshaped({{"layers.0.weight", {6, 8}}, {"layers.0.bias", {6}}, {"head.weight", {5, 8}}},
                     1);
  const std::string shape_message =
      error_of([&] { load_state_dict_from_file(*reshaped.optimizer, dir / "s.safetensors"); });
  EXPECT_NE(shape_message.find("layers.0.weight"), std::string::npos) << shape_message;
  EXPECT_NE(shape_message.find("shape"), std::string::npos) << shape_message;
  fs::remove_all(dir);
}

// `latest` as a symlink: a save wrote the step's name over the file it pointed to (the Python
// API's saves too, which have no CLI preflight). Refused before anything is written.
TEST(Checkpoint, SaveRefusesALatestSymlinkAndLeavesItsTarget) {
  const fs::path root = fresh_dir("latest_link");
  fs::create_directories(root);
  const fs::path target = root.parent_path() / "latest_link_target.txt";
  { std::ofstream(target) << "precious\n"; }
  fs::create_symlink(target, root / "latest");
  FakeProcessGroup group(0, 1);
  TinyModel a(kSpec, 1);
  a.step(1);
  try {
    save_checkpoint(request(root, 1), a.tensors(), *a.optimizer, group);
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("is a symbolic link to"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_pointer_file(target), "precious");
  EXPECT_FALSE(fs::exists(root / "step-0000001"));
  fs::remove_all(root);
  fs::remove(target);
}

// Training resumes from the rank files' main params, generate and reshard read model.safetensors:
// a rank file from another run (same shapes, same step) loaded without a word.
TEST(Checkpoint, LoadRefusesMainParamsThatAreNotTheModelFiles) {
  const fs::path root_a = fresh_dir("main_a"), root_b = fresh_dir("main_b");
  FakeProcessGroup group(0, 1);
  TinyModel a(kSpec, 1), b(kSpec, 2);
  a.step(1);
  b.step(1);
  const fs::path dir_a = save_checkpoint(request(root_a, 1), a.tensors(), *a.optimizer, group);
  const fs::path dir_b = save_checkpoint(request(root_b, 1), b.tensors(), *b.optimizer, group);
  const std::string rank_file = "optimizer-rank-00000-of-00001.safetensors";
  fs::copy_file(dir_b / rank_file, dir_a / rank_file, fs::copy_options::overwrite_existing);
  TinyModel c(kSpec, 9);
  try {
    load_checkpoint(dir_a, c.tensors(), *c.optimizer, group, "ddp");
    ADD_FAILURE() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("in the optimizer rank files' main params"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(root_a);
  fs::remove_all(root_b);
}

TEST(Checkpoint, SaveLoadRoundTripWithManifestAndLatest) {
  const fs::path root = fresh_dir("roundtrip");
  FakeProcessGroup group(0, 1);
  TinyModel a(kSpec, 1);
  a.step(1);
  a.step(2);
  const fs::path dir = save_checkpoint(request(root, 2), a.tensors(), *a.optimizer, group);
  EXPECT_EQ(dir, root / "step-0000002");
  EXPECT_EQ(read_pointer_file(root / "latest"), "step-0000002");
  for (const char* f :
       {"model.safetensors", "checkpoint.json", "optimizer-rank-00000-of-00001.safetensors"}) {
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  }
  const auto manifest = read_checkpoint_manifest(dir);
  EXPECT_EQ(manifest.at("step"), 2);
  EXPECT_EQ(manifest.at("trainer").at("consumed_samples"), 32);
  EXPECT_EQ(manifest.at("note"), "unit test");
  EXPECT_EQ(manifest.at("index").at("head.weight").at(0).at("end"), 40);
  // model.safetensors: one tensor per param, full shape, the current values.
  const SafetensorsFile model = SafetensorsFile::open(dir / "model.safetensors");
  ASSERT_EQ(model.tensors().size(), kSpec.size());
  EXPECT_EQ(model.info("head.weight").shape, (std::vector<std::int64_t>{5, 8}));
  EXPECT_EQ(model.tensor("head.weight").as<float>()[7], a.params[2].value[7]);

  TinyModel b(kSpec, 9);
  const LoadedCheckpoint loaded =
      load_checkpoint(resolve_checkpoint_directory(root), b.tensors(), *b.optimizer, group, "ddp");
  EXPECT_EQ(loaded.step, 2);
  EXPECT_EQ(loaded.consumed_samples, 32);
  EXPECT_EQ(a.optimizer->state_dict(), b.optimizer->state_dict());
  a.step(3);
  b.step(3);
  for (std::size_t i = 0; i < a.params.size(); ++i) EXPECT_EQ(a.params[i].value, b.params[i].value);

  // Resolution: a step directory itself, a step number, the latest pointer.
  EXPECT_EQ(resolve_checkpoint_directory(dir), dir);
  EXPECT_EQ(resolve_checkpoint_directory(root, 2), dir);
  // A missing step lists the steps that exist.
  EXPECT_NE(error_of([&] {
              resolve_checkpoint_directory(root, 3);
            }).find("no complete checkpoint of step 3 in"),
            std::string::npos);
  EXPECT_NE(error_of([&] { resolve_checkpoint_directory(root, 3); }).find("(it holds step 2)"),
            std::string::npos);
  EXPECT_EQ(list_checkpoint_steps(root), (std::vector<std::int64_t>{2}));
  EXPECT_TRUE(list_checkpoint_steps(root / "nowhere").empty());
  EXPECT_NE(error_of([&] { resolve_checkpoint_directory(dir, 5); }).find("step 2"),
            std::string::npos);
  fs::remove_all(root);
}

TEST(Checkpoint, KeepLastPrunesOlderStepDirectories) {
  const fs::path root = fresh_dir("keep-last");
  FakeProcessGroup group(0, 1);
  TinyModel a(kSpec, 1);
  for (std::int64_t s = 1; s <= 5; ++s) {
    a.step(static_cast<std::uint32_t>(s));
    save_checkpoint(request(root, s, /*keep_last=*/2), a.tensors(), *a.optimizer, group);
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"latest", "step-0000004", "step-0000005"}));
  EXPECT_EQ(read_pointer_file(root / "latest"), "step-0000005");
  fs::remove_all(root);
}

// A model list without a param the optimizer steps was published, then refused by every load.
TEST(Checkpoint, SaveRefusesModelTensorsThatMissAnOptimizerParam) {
  const fs::path root = fresh_dir("missing-model-tensor");
  FakeProcessGroup group(0, 1);
  TinyModel a(kSpec, 1);
  a.step(1);
  std::vector<ModelTensor> tensors = a.tensors();
  tensors.pop_back();  // head.weight
  const std::string message =
      error_of([&] { save_checkpoint(request(root, 1), tensors, *a.optimizer, group); });
  EXPECT_NE(message.find("'head.weight', which the model tensors given to save_checkpoint do not"),
            std::string::npos)
      << message;
  EXPECT_FALSE(fs::exists(root / "step-0000001"));
  fs::remove_all(root);
}

TEST(Checkpoint, FailingSaveLeavesPreviousCheckpointAndNoStagingDirectory) {
  const fs::path root = fresh_dir("failing-save");
  FakeProcessGroup group(0, 1);
  TinyModel a(kSpec, 1);
  a.step(1);
  save_checkpoint(request(root, 1), a.tensors(), *a.optimizer, group);
  a.step(2);
  for (const char* stage : {"staged", "rank_file_written", "before_commit"}) {
    set_checkpoint_fault_hook([stage](std::string_view s, int) {
      if (s == stage) throw IoError(str_cat("injected failure at ", s));
    });
    const std::string message =
        error_of([&] { save_checkpoint(request(root, 2), a.tensors(), *a.optimizer, group); });
    set_checkpoint_fault_hook({});
    EXPECT_NE(message.find("injected failure"), std::string::npos) << message;
    EXPECT_NE(message.find("nothing was published"), std::string::npos) << message;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(root)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"latest", "step-0000001"})) << stage;
  }
  TinyModel b(kSpec, 3);
  EXPECT_EQ(
      load_checkpoint(resolve_checkpoint_directory(root), b.tensors(), *b.optimizer, group, "ddp")
          .step,
      1);
  fs::remove_all(root);
}

class BadCheckpoint : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fresh_dir("bad");
    TinyModel a(kSpec, 1);
    a.step(1);
    dir_ = save_checkpoint(request(root_, 1), a.tensors(), *a.optimizer, group_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Loads into a fresh model of `spec`; returns the error message (and checks nothing on disk
  // changed and the model's values were left alone when the error came from the model file).
  std::string load_error(
      const std::vector<std::pair<std::string, std::vector<std::int64_t>>>& spec = kSpec,
      const std::string& kind = "ddp") {
    const auto before = snapshot(root_);
    TinyModel b(spec, 5);
    const std::string message = error_of([&] {
      load_checkpoint(resolve_checkpoint_directory(root_), b.tensors(), *b.optimizer, group_, kind);
    });
    EXPECT_EQ(snapshot(root_), before) << "a failed load modified the checkpoint";
    return message;
  }
  void overwrite(const fs::path& file, std::size_t offset, std::string_view bytes) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  FakeProcessGroup group_{0, 1};
  fs::path root_, dir_;
  const std::string rank_file_ = "optimizer-rank-00000-of-00001.safetensors";
};

#define EXPECT_MENTIONS(message, text) \
  EXPECT_NE((message).find(text), std::string::npos) << "message: " << (message)

TEST_F(BadCheckpoint, TruncatedRankFile) {
  fs::resize_file(dir_ / rank_file_, fs::file_size(dir_ / rank_file_) - 10);
  const std::string m = load_error();
  EXPECT_MENTIONS(m, rank_file_);
}

TEST_F(BadCheckpoint, TruncatedModelFile) {
  fs::resize_file(dir_ / "model.safetensors", 100);
  const std::string m = load_error();
  EXPECT_MENTIONS(m, "model.safetensors");
}

TEST_F(BadCheckpoint, CorruptedHeader) {
  overwrite(dir_ / rank_file_, 8, "[[[[");
  const std::string m = load_error();
  EXPECT_MENTIONS(m, rank_file_);
}

TEST_F(BadCheckpoint, CorruptedManifest) {
  overwrite(dir_ / "checkpoint.json", 0, "#");
  const std::string m = load_error();
  EXPECT_MENTIONS(m, "checkpoint.json");
}

TEST_F(BadCheckpoint, MissingRankFile) {
  fs::remove(dir_ / rank_file_);
  const std::string m = load_error();
  EXPECT_MENTIONS(m, rank_file_);
  EXPECT_MENTIONS(m, "missing");
}

TEST_F(BadCheckpoint, ShapeMismatchWithModel) {
  const std::string m =
      load_error({{"layers.0.weight", {6, 8}}, {"layers.0.bias", {6}}, {"head.weight", {5, 8}}});
  EXPECT_MENTIONS(m, "model.safetensors");
  EXPECT_MENTIONS(m, "layers.0.weight");
  EXPECT_MENTIONS(m, "[8,6]");
}

// A model tensor whose view holds fewer elements than its shape loaded only part of the tensor.
TEST_F(BadCheckpoint, ModelViewShorterThanItsShape) {
  TinyModel b(kSpec, 5);
  std::vector<ModelTensor> tensors = b.tensors();
  tensors[0].values.numel -= 8;
  const std::string m = error_of([&] {
    load_checkpoint(resolve_checkpoint_directory(root_), tensors, *b.optimizer, group_, "ddp");
  });
  EXPECT_MENTIONS(m, tensors[0].name);
  EXPECT_MENTIONS(m, "view of 40 elements");
  tensors[0].values.numel += 8;
  tensors[0].values.device = 0;
  EXPECT_MENTIONS(error_of([&] {
                    load_checkpoint(resolve_checkpoint_directory(root_), tensors, *b.optimizer,
                                    group_, "ddp");
                  }),
                  "CUDA device 0");
}

TEST_F(BadCheckpoint, DifferentModelParamNames) {
  const std::string m =
      load_error({{"layers.0.weight", {8, 6}}, {"layers.0.bias", {6}}, {"lm_head.weight", {5, 8}}});
  EXPECT_MENTIONS(m, "model.safetensors");
  EXPECT_MENTIONS(m, "lm_head.weight");
  EXPECT_MENTIONS(m, "different model");
}

TEST_F(BadCheckpoint, MissingStateTensor) {
  // A rank file without one of the state tensors the optimizer needs.
  const SafetensorsFile original = SafetensorsFile::open(dir_ / rank_file_);
  SafetensorsWriter writer;
  for (const auto& [k, v] : original.metadata()) writer.set_metadata(k, v);
  for (const auto& info : original.tensors()) {
    if (info.name == "layers.0.bias/exp_avg_sq") continue;
    writer.add(info.name, info.dtype, info.shape, original.tensor(info.name).data);
  }
  writer.write_atomic(dir_ / "rewritten");
  fs::rename(dir_ / "rewritten", dir_ / rank_file_);
  const std::string m = load_error();
  EXPECT_MENTIONS(m, rank_file_);
  EXPECT_MENTIONS(m, "layers.0.bias/exp_avg_sq");
}

TEST_F(BadCheckpoint, MissingLatestPointer) {
  fs::remove(root_ / "latest");
  const std::string m = load_error();
  EXPECT_MENTIONS(m, "latest");
  EXPECT_MENTIONS(m, root_.string());
}

TEST_F(BadCheckpoint, OtherOptimizerKind) {
  const std::string m = load_error(kSpec, "distributed");
  EXPECT_MENTIONS(m, "optimizer kind 'ddp'");
  EXPECT_MENTIONS(m, "'distributed'");
}

// Manifests edited by hand (or damaged): every field a resume trusts is checked against the
// others, the directory name and the files present.
class BadManifest : public BadCheckpoint {
 protected:
  void edit_manifest(const std::function<void(nlohmann::json&)>& edit) {
    const fs::path file = dir_ / "checkpoint.json";
    std::ifstream in(file);
    nlohmann::json m = nlohmann::json::parse(in);
    in.close();
    edit(m);
    std::ofstream(file, std::ios::trunc) << m.dump(1);
  }
};

TEST_F(BadManifest, StepOf2To63DoesNotWrapAround) {
  edit_manifest([](nlohmann::json& m) { m["step"] = std::uint64_t{1} << 63; });
  const std::string m = load_error();
  EXPECT_MENTIONS(m, "\"step\" is 9223372036854775808");
  EXPECT_MENTIONS(m, "checkpoint.json");
}

TEST_F(BadManifest, NegativeStep) {
  edit_manifest([](nlohmann::json& m) { m["step"] = -5; });
  EXPECT_MENTIONS(load_error(), "\"step\" is -5");
}

TEST_F(BadManifest, StepDiffersFromDirectoryName) {
  edit_manifest([](nlohmann::json& m) {
    m["step"] = 7;
    m["trainer"]["next_step"] = 7;
  });
  const std::string m = load_error();
  EXPECT_MENTIONS(m, "\"step\" is 7 but its directory is named for step 1");
}

TEST_F(BadManifest, NextStepDiffersFromStep) {
  edit_manifest([](nlohmann::json& m) { m["trainer"]["next_step"] = 3; });
  EXPECT_MENTIONS(load_error(), "trainer.next_step");
}

TEST_F(BadManifest, NegativeConsumedSamples) {
  edit_manifest([](nlohmann::json& m) { m["trainer"]["consumed_samples"] = -16; });
  EXPECT_MENTIONS(load_error(), "\"trainer.consumed_samples\" is -16");
}

TEST_F(BadManifest, HugeConsumedSamples) {
  edit_manifest(
      [](nlohmann::json& m) { m["trainer"]["consumed_samples"] = std::int64_t{1} << 62; });
  EXPECT_MENTIONS(load_error(), "\"trainer.consumed_samples\" is 4611686018427387904");
}

TEST_F(BadManifest, DataParallelSizeThatDoesNotMatchTheRankFiles) {
  edit_manifest([](nlohmann::json& m) { m["data_parallel_size"] = 2; });
  const std::string m = load_error();
  EXPECT_MENTIONS(m, "\"data_parallel_size\" is 2 but \"optimizer_files\" lists 1");
}

TEST_F(BadManifest, EmptyOptimizerFiles) {
  edit_manifest([](nlohmann::json& m) { m["optimizer_files"] = nlohmann::json::array(); });
  EXPECT_MENTIONS(load_error(), "\"optimizer_files\" is empty");
}

TEST_F(BadManifest, RankFileNamedForAnotherSize) {
  edit_manifest([](nlohmann::json& m) {
    m["optimizer_files"][0] = "optimizer-rank-00000-of-00002.safetensors";
  });
  EXPECT_MENTIONS(load_error(), "expected 'optimizer-rank-00000-of-00001.safetensors'");
}

// The writer names its weights file one way; reshard and refit look for that name, so a load
// must not follow a manifest to another file (it did: one field, two rules).
TEST_F(BadManifest, ModelFileOtherThanTheWritersNameIsRefused) {
  fs::copy_file(dir_ / "model.safetensors", dir_ / "weights.safetensors");
  edit_manifest([](nlohmann::json& m) { m["model"]["file"] = "weights.safetensors"; });
  EXPECT_MENTIONS(load_error(),
                  "\"model.file\" is \"weights.safetensors\", not 'model.safetensors'");
  edit_manifest([](nlohmann::json& m) { m["model"].erase("file"); });
  EXPECT_MENTIONS(load_error(), "\"model.file\" is");
}

TEST_F(BadManifest, RankFileFromAnotherSaveIsRefused) {
  // Another save's rank file (step 2) copied over this checkpoint's (step 1).
  TinyModel other(kSpec, 3);
  other.step(1);
  other.step(2);
  const fs::path elsewhere = fresh_dir("bad-other");
  const fs::path other_dir =
      save_checkpoint(request(elsewhere, 2), other.tensors(), *other.optimizer, group_);
  fs::copy_file(other_dir / rank_file_, dir_ / rank_file_, fs::copy_options::overwrite_existing);
  fs::remove_all(elsewhere);
  const std::string m = load_error();
  EXPECT_MENTIONS(m, rank_file_);
  EXPECT_MENTIONS(m, "was saved with step 2 but the manifest makes it 1");
}

TEST_F(BadManifest, ControlCharactersInNamesAreEscapedInTheMessage) {
  edit_manifest([](nlohmann::json& m) { m["optimizer_files"][0] = "x\n\x1b[2Jy"; });
  const std::string m = load_error();
  EXPECT_MENTIONS(m, "is 'x\\n\\x1b[2Jy'");
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
}

// The index says which elements each rank file holds. Ranges moved by an edit used to load the
// file's values at other elements (only the element count was checked), and a fractional start
// was truncated.
TEST_F(BadManifest, IndexRangesThatDoNotTileTheParamAreRefused) {
  edit_manifest([](nlohmann::json& m) {
    m["index"]["head.weight"][0]["start"] = 8;
    m["index"]["head.weight"][0]["end"] = 48;
  });
  const std::string m = load_error();
  EXPECT_MENTIONS(m, "\"index\" entries of param 'head.weight' do not cover its elements");
  EXPECT_MENTIONS(m, "checkpoint.json");
}

TEST_F(BadManifest, IndexRangesTheRankFileDoesNotHoldAreRefused) {
  // Two entries that tile the param, but the file's own index holds it as one range [0, 40).
  edit_manifest([](nlohmann::json& m) {
    nlohmann::json first = m["index"]["head.weight"][0], second = first;
    first["end"] = 20;
    second["start"] = 20;
    m["index"]["head.weight"] = nlohmann::json::array({first, second});
  });
  const std::string m = load_error();
  EXPECT_MENTIONS(m, "disagree");
  EXPECT_MENTIONS(m, "elements [0, 20) of param 'head.weight'");
  EXPECT_MENTIONS(m, "says [0, 40)");
}

TEST_F(BadManifest, FractionalIndexBoundIsRefused) {
  edit_manifest([](nlohmann::json& m) { m["index"]["head.weight"][0]["start"] = 0.5; });
  EXPECT_MENTIONS(load_error(), "\"index.head.weight[0].start\" is 0.5; expected an integer");
}

TEST_F(BadManifest, FractionalFormatVersionIsRefused) {
  edit_manifest([](nlohmann::json& m) { m["format_version"] = 1.9; });
  EXPECT_MENTIONS(load_error(), "\"format_version\" is 1.9; expected an integer");
}

TEST_F(BadManifest, TextAfterANulByteOrARepeatedKeyIsRefused) {
  const fs::path file = dir_ / "checkpoint.json";
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  std::ofstream(file, std::ios::trunc | std::ios::binary) << text << std::string(1, '\0') << "{{";
  EXPECT_MENTIONS(load_error(), "a NUL byte at offset");
  const std::size_t brace = text.find('{');
  std::ofstream(file, std::ios::trunc | std::ios::binary)
      << text.substr(0, brace + 1) << "\"step\": 0, " << text.substr(brace + 1);
  EXPECT_MENTIONS(load_error(), "the key \"step\" appears twice in one object");
}

TEST_F(BadManifest, ValidManifestStillLoads) {
  edit_manifest([](nlohmann::json&) {});
  EXPECT_EQ(load_error(), "(no error)");
}

// Rewrites the fp32 safetensors `file`, each metadata value and tensor passed through the edits.
void rewrite_safetensors(
    const fs::path& file,
    const std::function<void(const std::string& key, std::string& value)>& edit_metadata,
    const std::function<void(const std::string& name, std::vector<float>& values)>& edit_values) {
  const SafetensorsFile original = SafetensorsFile::open(file);
  SafetensorsWriter writer;
  for (auto [k, v] : original.metadata()) {
    edit_metadata(k, v);
    writer.set_metadata(k, v);
  }
  std::vector<std::vector<float>> copies;
  for (const auto& info : original.tensors()) {
    const float* data = original.tensor(info.name).as<float>();
    copies.emplace_back(data, data + info.numel());
    edit_values(info.name, copies.back());
  }
  for (std::size_t i = 0; i < original.tensors().size(); ++i) {
    const auto& info = original.tensors()[i];
    writer.add(info.name, info.dtype, info.shape, copies[i].data());
  }
  const fs::path rewritten = file.string() + ".rewritten";
  writer.write_atomic(rewritten);
  fs::rename(rewritten, file);
}

// Rewrites `file` with element `element` of tensor `name` replaced by `value`.
void poison_tensor(const fs::path& file, const std::string& name, std::int64_t element,
                   float value) {
  rewrite_safetensors(
      file, [](const std::string&, std::string&) {},
      [&](const std::string& tensor, std::vector<float>& values) {
        if (tensor == name) values[static_cast<std::size_t>(element)] = value;
      });
}

// A rank file's shard index with one field of the param "head.weight" replaced by `text` (JSON).
void edit_shard_index(const fs::path& file, const std::string& field, const std::string& text) {
  rewrite_safetensors(
      file,
      [&](const std::string& key, std::string& value) {
        if (key != "shards") return;
        nlohmann::json index = nlohmann::json::parse(value);
        index["head.weight"][field] = nlohmann::json::parse(text);
        value = index.dump();
      },
      [](const std::string&, std::vector<float>&) {});
}

// Integers of the shard index were read with get<int64_t>: a float such as 1e300 is undefined
// behaviour there, and huge dimensions overflowed the element count.
TEST_F(BadCheckpoint, ShardIndexNumbersAreReadStrictly) {
  for (const auto& [field, text, said] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"start", "1e300", "has start 1e+300 in its shard index"},
           {"end", "2.5", "has end 2.5 in its shard index"},
           {"shape", "[4611686018427387903, 4]", "of more elements than an int64 counts"},
           {"shape", "5", "has shape 5 in its shard index; expected an array"}}) {
    SetUp();
    edit_shard_index(dir_ / rank_file_, field, text);
    EXPECT_MENTIONS(load_error(), said) << field << " = " << text;
  }
}

TEST_F(BadCheckpoint, NaNInModelWeights) {
  poison_tensor(dir_ / "model.safetensors", "head.weight", 5, std::nanf(""));
  const std::string m = load_error();
  EXPECT_MENTIONS(m, "model.safetensors");
  EXPECT_MENTIONS(m, "'head.weight' holds a non-finite value (NaN or inf) at element 5");
}

TEST_F(BadCheckpoint, InfinityInOptimizerState) {
  poison_tensor(dir_ / rank_file_, "layers.0.weight/exp_avg", 11, INFINITY);
  const std::string m = load_error();
  EXPECT_MENTIONS(m, rank_file_);
  EXPECT_MENTIONS(m,
                  "'layers.0.weight/exp_avg' holds a non-finite value (NaN or inf) at element 11");
}

// Finite but impossible values: the run used to fail steps later with "non-finite training
// state ... try a lower optimizer.lr".
TEST_F(BadCheckpoint, NegativeSecondMomentInOptimizerState) {
  poison_tensor(dir_ / rank_file_, "layers.0.weight/exp_avg_sq", 3, -1.0f);
  EXPECT_MENTIONS(load_error(),
                  "field 'exp_avg_sq' of param 'layers.0.weight' holds a negative "
                  "value (-1) at element 3");
}

// The load scans every value it reads, a chunk of 1024 at a time, with kernels per ISA level:
// each level must find the same first bad element, at a chunk's edges and in the last one.
TEST(CheckpointScan, EveryIsaLevelFindsTheFirstBadValue) {
  const std::vector<std::pair<std::string, std::vector<std::int64_t>>> spec = {
      {"layers.0.weight", {70, 41}}};  // 2870 elements: two whole chunks and a partial one
  FakeProcessGroup group{0, 1};
  const std::string rank_file = "optimizer-rank-00000-of-00001.safetensors";
  for (const IsaLevel level : supported_isa_levels()) {
    const ScopedIsaLevel scoped(level);
    for (const std::int64_t element : {0, 1023, 1024, 2047, 2869}) {
      SCOPED_TRACE(testing::Message() << isa_level_name(level) << ", element " << element);
      const fs::path root = fresh_dir("scan");
      TinyModel a(spec, 1);
      a.step(1);
      const fs::path dir = save_checkpoint(request(root, 1), a.tensors(), *a.optimizer, group);
      auto error = [&] {
        TinyModel b(spec, 5);
        return error_of([&] {
          load_checkpoint(resolve_checkpoint_directory(root), b.tensors(), *b.optimizer, group,
                          "ddp");
        });
      };
      // -0.0 is not below zero, NaN is not either (the non-finite scan finds it instead).
      poison_tensor(dir / rank_file, "layers.0.weight/exp_avg_sq", element / 2, -0.0f);
      poison_tensor(dir / rank_file, "layers.0.weight/exp_avg_sq", element, -2.5f);
      EXPECT_MENTIONS(error(), str_cat("holds a negative value (-2.5) at element ", element));
      // The same pass finds a NaN there, and names it as non-finite.
      poison_tensor(dir / rank_file, "layers.0.weight/exp_avg_sq", element, std::nanf(""));
      EXPECT_MENTIONS(error(), str_cat("tensor 'layers.0.weight/exp_avg_sq' holds a non-finite "
                                       "value (NaN or inf) at element ",
                                       element));
      poison_tensor(dir / "model.safetensors", "layers.0.weight", element, INFINITY);
      if (element + 1 < 2870) {
        poison_tensor(dir / "model.safetensors", "layers.0.weight", element + 1, std::nanf(""));
      }
      EXPECT_MENTIONS(error(),
                      str_cat("holds a non-finite value (NaN or inf) at element ", element));
      fs::remove_all(root);
    }
  }
}

TEST_F(BadCheckpoint, StepBeyondWhatASaveStores) {
  poison_tensor(dir_ / rank_file_, "layers.0.weight/step", 0, 1e30f);
  EXPECT_MENTIONS(load_error(), "field 'step' of param layers.0.weight is 1e+30, beyond the 2^24");
}

// A damaged step count named no file ("chained state dict field 'step'"); the file is named now.
TEST_F(BadCheckpoint, StepThatIsNoCountNamesTheFile) {
  for (const float bad : {std::nanf(""), -3.0f, 2.5f}) {
    poison_tensor(dir_ / rank_file_, "layers.0.weight/step", 0, bad);
    const std::string m = load_error();
    EXPECT_MENTIONS(m, rank_file_);
    EXPECT_MENTIONS(m, "tensor 'layers.0.weight/step' holds");
  }
}

// A save killed by SIGKILL at any stage leaves `latest` naming a complete checkpoint: the
// previous one unless the kill came after the new one was published. The child stops at a named
// stage of the save (the fault hook) and the parent kills it there, so every trial hits the stage
// it names whatever the scheduling.
TEST(CheckpointCrash, KilledSaveLeavesPreviousCheckpointLoadable) {
  const fs::path root = fresh_dir("kill");
  FakeProcessGroup group(0, 1);
  // The kills land at named stages, not after a delay, so a small model does: the save need not
  // take long for a kill to hit it.
  const std::vector<std::pair<std::string, std::vector<std::int64_t>>> big = {
      {"big.weight", {64, 256}}, {"small.bias", {256}}};
  TinyModel a(big, 1);
  a.step(1);
  save_checkpoint(request(root, 1), a.tensors(), *a.optimizer, group);
  const auto step1_files = snapshot(root / "step-0000001");

  struct Trial {
    const char* stage;   // the child stops here and is killed...
    const char* latest;  // ...after which `latest` names this checkpoint
  };
  const Trial trials[] = {{"staged", "step-0000001"},
                          {"model_file_written", "step-0000001"},
                          {"rank_file_written", "step-0000001"},
                          {"before_commit", "step-0000001"},
                          {"committed", "step-0000001"},
                          {"published", "step-0000002"}};
  for (const Trial& t : trials) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(fds[0]);
      set_checkpoint_fault_hook([&](std::string_view stage, int) {
        if (stage != t.stage) return;
        const char byte = 1;
        if (::write(fds[1], &byte, 1) != 1) ::_exit(3);
        ::pause();
      });
      try {
        a.step(2);
        save_checkpoint(request(root, 2), a.tensors(), *a.optimizer, group);
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    char byte = 0;
    // A child that ends without reaching the stage closes the pipe: read() returns 0.
    ASSERT_EQ(::read(fds[0], &byte, 1), 1) << t.stage << " was never reached";
    ::close(fds[0]);
    ::kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);

    const auto latest = read_pointer_file(root / "latest");
    ASSERT_TRUE(latest.has_value());
    EXPECT_EQ(*latest, t.latest) << "killed at " << t.stage;
    // Whatever `latest` names loads completely; the previous checkpoint is untouched.
    TinyModel b(big, 2);
    const LoadedCheckpoint loaded = load_checkpoint(resolve_checkpoint_directory(root), b.tensors(),
                                                    *b.optimizer, group, "ddp");
    EXPECT_EQ(step_directory_name(loaded.step), *latest) << t.stage;
    EXPECT_EQ(snapshot(root / "step-0000001"), step1_files);
    TinyModel c(big, 3);
    EXPECT_EQ(load_checkpoint(root / "step-0000001", c.tensors(), *c.optimizer, group, "ddp").step,
              1);
    // Start the next trial from step 1 again (and drop what the killed save left staged).
    for (const auto& e : fs::directory_iterator(root)) {
      if (e.path().filename().string().rfind(".step-", 0) == 0) fs::remove_all(e.path());
    }
    fs::remove_all(root / "step-0000002");
    replace_pointer_file(root / "latest", "step-0000001");
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace shardwise
