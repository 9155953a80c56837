#include "shardwise/checkpoint/checkpoint.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "checkpoint_finite.hpp"
#include "checkpoint_manifest.hpp"
#include "main_param_agreement.hpp"
#include "shardwise/checkpoint/checkpoint_shards.hpp"
#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/comm/rank_flags.hpp"
#include "shardwise/core/atomic_file.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/fnv1a.hpp"
#include "shardwise/core/input_file.hpp"
#include "shardwise/core/json_text.hpp"
#include "shardwise/core/logging.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/core/shape.hpp"

namespace shardwise {

namespace fs = std::filesystem;
using checkpoint_detail::manifest_get;
using checkpoint_detail::manifest_integer;
using checkpoint_detail::parse_step_directory_name;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

std::mutex& hook_mutex() {
  static std::mutex m;
  return m;
}
CheckpointFaultHook& hook_storage() {
  static CheckpointFaultHook hook;
  return hook;
}
void fault_point(std::string_view stage, int rank) {
  CheckpointFaultHook hook;
  {
    std::lock_guard<std::mutex> lock(hook_mutex());
    hook = hook_storage();
  }
  if (hook) hook(stage, rank);
}

std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

// What a load read, to compare across ranks: the manifest, and of each model tensor its name,
// shape and up to 4096 evenly spaced 8-byte words (two runs' weights differ everywhere; hashing
// every byte of a large model would add seconds to each load).
std::uint64_t loaded_checkpoint_fingerprint(const json& manifest,
                                            const std::vector<ModelTensor>& model) {
  Fnv1a h;
  h.text(manifest.dump());
  for (const ModelTensor& t : model) {
    h.text(t.name);
    for (const std::int64_t d : t.shape) h.integer(d);
    const auto* bytes = static_cast<const unsigned char*>(t.values.data);
    const std::int64_t size =
        t.values.numel * static_cast<std::int64_t>(dtype_size(t.values.dtype));
    const std::int64_t words = size / 8, stride = std::max<std::int64_t>(1, words / 4096);
    for (std::int64_t w = 0; w < words; w += stride) h.bytes(bytes + w * 8, 8);
    h.bytes(bytes + words * 8, static_cast<std::size_t>(size - words * 8));
  }
  return h.value();
}

// One entry of the manifest's "model" list (the dtype is the engine's name, "fp32").
struct ListedParam {
  std::vector<std::int64_t> shape;
  std::string dtype;
};

// The manifest's "model" list by param name; FormatError naming `file` when it is malformed.
std::map<std::string, ListedParam> listed_model_params(const json& manifest, const fs::path& file) {
  std::map<std::string, ListedParam> listed;
  try {
    for (const json& p : manifest.at("model").at("params")) {
      listed[p.at("name").get<std::string>()] = {p.at("shape").get<std::vector<std::int64_t>>(),
                                                 p.value("dtype", std::string())};
    }
  } catch (const json::exception& e) {
    throw FormatError(str_cat("checkpoint manifest ", quoted(file),
                              ": malformed \"model\": ", json_error_text(e)));
  }
  return listed;
}

// The manifest's "model.file" must be the one name the writer uses (readers of the weights alone,
// such as reshard, look for that file).
void require_standard_model_file(const json& manifest, const fs::path& manifest_file) {
  const json* model = manifest.contains("model") ? &manifest.at("model") : nullptr;
  const json named = model != nullptr && model->is_object() && model->contains("file")
                         ? model->at("file")
                         : json();
  SW_REQUIRE(named.is_string() && named.get_ref<const std::string&>() == kCheckpointModelFile,
             FormatError, "checkpoint manifest ", quoted(manifest_file), ": \"model.file\" is ",
             json_excerpt(named), ", not '", kCheckpointModelFile, "'");
}

}  // namespace

fs::path checked_checkpoint_model_file(const fs::path& directory) {
  const json m = read_checkpoint_manifest(directory);
  const fs::path manifest_file = directory / kCheckpointManifestFile;
  const fs::path path = directory / kCheckpointModelFile;
  std::map<std::string, ListedParam> listed = listed_model_params(m, manifest_file);
  require_standard_model_file(m, manifest_file);
  const SafetensorsFile file = SafetensorsFile::open(path);
  for (const auto& info : file.tensors()) {
    const auto it = listed.find(info.name);
    SW_REQUIRE(it != listed.end(), FormatError, "checkpoint file ", quoted(path), " has tensor '",
               printable(info.name), "', which its manifest's \"model\" does not list");
    SW_REQUIRE(info.shape == it->second.shape && dtype_name(info.dtype) == it->second.dtype,
               FormatError, "checkpoint file ", quoted(path), ": tensor '", printable(info.name),
               "' is ", dtype_name(info.dtype), " ", json(info.shape).dump(),
               " but its manifest lists ", printable(it->second.dtype), " ",
               json(it->second.shape).dump());
    listed.erase(it);
  }
  SW_REQUIRE(listed.empty(), FormatError, "checkpoint file ", quoted(path), " has no tensor '",
             listed.empty() ? std::string() : printable(listed.begin()->first),
             "', which its manifest's \"model\" lists");
  return path;
}

namespace {

// Ranks that loaded another checkpoint under the same path (node-local storage holding another
// run's, or a `latest` naming another step) would train on a mix of it and rank 0's.
void require_same_checkpoint_as_rank0(ProcessGroup& group, std::uint64_t fingerprint,
                                      const fs::path& directory) {
  const std::vector<int> differ = ranks_differing_from_rank0(group, fingerprint);
  SW_REQUIRE(differ.empty(), FormatError, "checkpoint ", quoted(directory),
             " is not the same on every rank: rank(s) ", rank_list(differ),
             " read a manifest or weights other than rank 0's (storage each node has its own "
             "copy of?); every rank must load the same checkpoint");
}

void write_model_file(const fs::path& path, const std::vector<ModelTensor>& model,
                      std::int64_t step) {
  SafetensorsWriter writer;
  for (const ModelTensor& t : model) {
    require_host_view(t.values, "save_checkpoint: a model tensor");
    writer.add(t.name, t.shape, t.values);
  }
  writer.set_metadata("format", "pt");  // what Hugging Face loaders expect; plain tensors
  writer.set_metadata("shardwise.step", std::to_string(step));
  writer.write_atomic(path, RenameSync::kByCommit);
}

void load_model_file(const fs::path& path, const std::vector<ModelTensor>& model) {
  const SafetensorsFile file = SafetensorsFile::open(path);
  std::set<std::string> expected;
  for (const ModelTensor& t : model) {
    expected.insert(t.name);
    require_host_view(t.values, "load_checkpoint: a model tensor");
    SW_REQUIRE(t.values.numel == shape_numel(t.shape), ShapeError,
               "load_checkpoint: model tensor '", t.name, "' is a view of ", t.values.numel,
               " elements but its shape ", json(t.shape).dump(), " has ", shape_numel(t.shape));
    SW_REQUIRE(file.contains(t.name), FormatError, "checkpoint file ", quoted(path),
               " has no tensor '", t.name, "': the checkpoint is of a different model");
    const SafetensorsTensorInfo& info = file.info(t.name);
    SW_REQUIRE(info.shape == t.shape, ShapeError, "checkpoint file ", quoted(path), ": tensor '",
               t.name, "' has shape ", json(info.shape).dump(), " but the model's is ",
               json(t.shape).dump());
    SW_REQUIRE(info.dtype == t.values.dtype, FormatError, "checkpoint file ", quoted(path),
               ": tensor '", t.name, "' is ", dtype_name(info.dtype), " but the model's is ",
               dtype_name(t.values.dtype));
  }
  for (const auto& info : file.tensors()) {
    SW_REQUIRE(expected.count(info.name) != 0, FormatError, "checkpoint file ", quoted(path),
               " has tensor '", info.name,
               "', which this model does not have: the checkpoint is of a different model");
  }
  // Everything above is checked first: a model of another shape or name leaves it untouched.
  // Non-finite weights are damage, found while each tensor is read (one pass over the bytes);
  // the load then fails with the model partly overwritten.
  for (const ModelTensor& t : model) {
    const auto bad = checkpoint_detail::read_range_checked(
        file, t.name, 0, t.values.numel, t.values.data, checkpoint_detail::ValueCheck::kFinite);
    SW_REQUIRE(!bad, FormatError, "checkpoint file ", quoted(path), ": tensor '", t.name,
               "' holds a non-finite value (NaN or inf) at element ", bad.value_or(0),
               "; a checkpoint is only saved from a finite state, so this one is damaged");
  }
}

ordered_json build_manifest(const CheckpointSaveRequest& request, const fs::path& staged, int size,
                            const std::vector<ModelTensor>& model, bool replicated, int replicas) {
  ordered_json m;
  m["format"] = kCheckpointFormat;
  m["format_version"] = kCheckpointFormatVersion;
  m["step"] = request.step;
  m["trainer"] = {{"next_step", request.step}, {"consumed_samples", request.consumed_samples}};
  m["data_parallel_size"] = size;
  m["optimizer_kind"] = request.optimizer_kind;
  m["optimizer_state_replicated"] = replicated;
  // dp / S with layer-wise shard groups: the files hold each layer-wise shard once (written by
  // the first replica); loading does not depend on it.
  m["layer_wise_replicas"] = replicas;
  ordered_json params = ordered_json::array();
  std::set<std::string> model_names;
  for (const ModelTensor& t : model) {
    params.push_back({{"name", t.name}, {"shape", t.shape}, {"dtype", dtype_name(t.values.dtype)}});
    model_names.insert(t.name);
  }
  m["model"] = {{"file", kCheckpointModelFile}, {"params", params}};
  ordered_json files = ordered_json::array();
  ordered_json index = ordered_json::object();
  for (int r = 0; r < size; ++r) {
    const std::string name = optimizer_rank_file_name(r, size);
    files.push_back(name);
    for (const SavedShard& s : read_shard_file_index(staged / name)) {
      // Published, such a checkpoint would be refused by every load ("a different model").
      SW_REQUIRE(model_names.count(s.param) != 0, InvalidArgument, "rank ", r,
                 "'s optimizer steps param '", s.param,
                 "', which the model tensors given to save_checkpoint do not include");
      index[s.param].push_back(
          {{"file", name}, {"rank", r}, {"start", s.start}, {"end", s.end}, {"fields", s.fields}});
    }
  }
  m["optimizer_files"] = files;
  m["index"] = index;
  if (request.extra.is_object()) {
    for (const auto& [key, value] : request.extra.items()) {
      SW_REQUIRE(!m.contains(key), InvalidArgument, "checkpoint save: extra manifest key '", key,
                 "' is one the manifest writes itself; choose another name");
      m[key] = value;
    }
  } else {
    SW_CHECK(request.extra.is_null(), "CheckpointSaveRequest::extra must be a JSON object");
  }
  return m;
}

// Removes all but the newest `keep` step directories (never the one `latest` names). A directory
// is first renamed to a hidden name, so a half-removed one is never mistaken for a checkpoint.
void prune_old_checkpoints(const fs::path& root, int keep, const std::string& latest) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    if (const auto step = parse_step_directory_name(name)) found.emplace_back(*step, name);
  }
  std::sort(found.rbegin(), found.rend());
  for (std::size_t i = static_cast<std::size_t>(keep); i < found.size(); ++i) {
    if (found[i].second == latest) continue;
    const fs::path doomed = root / ("." + found[i].second + ".pruned");
    std::error_code ec;
    fs::rename(root / found[i].second, doomed, ec);
    if (!ec) fs::remove_all(doomed, ec);
    if (ec) {
      log::warning("keep-last: could not remove old checkpoint ", quoted(root / found[i].second),
                   ": ", ec.message());
    }
  }
  fsync_directory(root);
}

// A rank file records its rank, the data-parallel size and the step it was saved at; a file from
// another save (copied in by hand, or a manifest edited to another size) disagrees.
void check_rank_file_metadata(const SafetensorsFile& file, const fs::path& path,
                              const std::map<std::string, std::string>& expected) {
  for (const auto& [key, value] : expected) {
    const auto it = file.metadata().find(key);
    if (it == file.metadata().end()) continue;  // files from save_state_dict_to_file lack them
    SW_REQUIRE(it->second == value, FormatError, "checkpoint file ", quoted(path),
               " was saved with ", key, " ", printable(it->second, 64),
               " but the manifest makes it ", value, ": the file belongs to another checkpoint");
  }
}

// A file name from the manifest: a plain name inside the step directory.
fs::path file_in(const fs::path& dir, const std::string& name, const fs::path& manifest) {
  SW_REQUIRE(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
             FormatError, "checkpoint manifest ", quoted(manifest), " names file '",
             printable(name), "', which is not a plain file name");
  return dir / name;
}

// Above any element index a saved param reaches (shapes are capped at 2^50 elements).
constexpr std::int64_t kMaxShardElement = std::int64_t{1} << 62;

// The element count of a shape the manifest's "model" lists, refused past 2^50 elements (where
// a damaged shape would overflow the product).
std::int64_t manifest_shape_numel(const std::vector<std::int64_t>& shape, const std::string& param,
                                  const fs::path& file) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 50;
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    const std::optional<std::int64_t> product = checked_mul(n, d);
    SW_REQUIRE(d >= 0 && product && *product <= kLimit, FormatError, "checkpoint manifest ",
               quoted(file), ": \"model\" gives param '", printable(param), "' the shape ",
               json(shape).dump(), ", negative or past 2^50 elements");
    n = *product;
  }
  return n;
}

// Each param's entries must cover [0, numel) exactly once: overlapping or shifted ranges would
// load values at the wrong elements (the coverage check at load counts elements, not places).
void require_index_tiles_each_param(const std::vector<SavedShard>& shards, const fs::path& file) {
  std::map<std::string, std::vector<const SavedShard*>> by_param;
  for (const SavedShard& s : shards) by_param[s.param].push_back(&s);
  for (auto& [param, entries] : by_param) {
    std::sort(entries.begin(), entries.end(),
              [](const SavedShard* a, const SavedShard* b) { return a->start < b->start; });
    std::int64_t next = 0;
    for (const SavedShard* s : entries) {
      SW_REQUIRE(s->start == next && s->end > s->start, FormatError, "checkpoint manifest ",
                 quoted(file), ": the \"index\" entries of param '", printable(param),
                 "' do not cover its elements once each, in order: [", s->start, ", ", s->end,
                 ") where element ", next, " should start a range");
      next = s->end;
    }
    const std::int64_t numel = manifest_shape_numel(entries.front()->shape, param, file);
    SW_REQUIRE(next == numel, FormatError, "checkpoint manifest ", quoted(file),
               ": the \"index\" entries of param '", printable(param), "' end at element ", next,
               " but it has ", numel);
  }
}

std::vector<SavedShard> saved_shards_from_index(const json& manifest, const fs::path& dir,
                                                const fs::path& file) {
  const json index = manifest_get<json>(manifest, "index", file);
  SW_REQUIRE(index.is_object(), FormatError, "checkpoint manifest ", quoted(file),
             ": \"index\" is not an object");
  std::vector<SavedShard> out;
  std::string where = "index";  // the entry being read, for the message
  try {
    for (const auto& [param, entries] : index.items()) {
      where = str_cat("index.", printable(param));
      SW_REQUIRE(entries.is_array(), FormatError, "checkpoint manifest ", quoted(file), ": ", where,
                 " is ", json_excerpt(entries), ", not a list of shard entries");
      for (std::size_t i = 0; i < entries.size(); ++i) {
        const json& e = entries.at(i);
        SavedShard s;
        s.param = param;
        where = str_cat("index.", printable(param), "[", i, "]");
        s.file = file_in(dir, e.at("file").get<std::string>(), file);
        s.start = manifest_integer(e.at("start"), where + ".start", 0, kMaxShardElement, file);
        s.end = manifest_integer(e.at("end"), where + ".end", 0, kMaxShardElement, file);
        s.fields = e.at("fields").get<std::vector<std::string>>();
        out.push_back(std::move(s));
      }
    }
  } catch (const json::exception& e) {
    throw FormatError(str_cat("checkpoint manifest ", quoted(file), ": malformed \"index\" at ",
                              where, ": ", json_error_text(e)));
  }
  // The saved shapes come from the model list (validated against model.safetensors as well).
  const std::map<std::string, ListedParam> listed = listed_model_params(manifest, file);
  for (SavedShard& s : out) {
    const auto it = listed.find(s.param);
    SW_REQUIRE(it != listed.end(), FormatError, "checkpoint manifest ", quoted(file),
               ": index entry for param '", printable(s.param), "', which \"model\" does not list");
    s.shape = it->second.shape;
  }
  require_index_tiles_each_param(out, file);
  return out;
}

}  // namespace

std::vector<SavedShard> read_checkpoint_index(const fs::path& directory) {
  return saved_shards_from_index(read_checkpoint_manifest(directory), directory,
                                 directory / kCheckpointManifestFile);
}

void set_checkpoint_fault_hook(CheckpointFaultHook hook) {
  std::lock_guard<std::mutex> lock(hook_mutex());
  hook_storage() = std::move(hook);
}

namespace {

// What every phase of one save needs to know.
struct SaveJob {
  const CheckpointSaveRequest& request;
  ProcessGroup& group;
  int rank, size;
  std::string step_name;
  fs::path final_dir;
  std::string failed_prefix;  // how every failure message starts
};

SaveJob save_job(const CheckpointSaveRequest& request, ProcessGroup& group) {
  const std::string step_name = step_directory_name(request.step);
  return SaveJob{request,
                 group,
                 group.rank(),
                 group.size(),
                 step_name,
                 request.root / step_name,
                 str_cat("checkpoint save of step ", request.step, " to ", quoted(request.root),
                         " failed; nothing was published (the previous checkpoint stays the "
                         "latest)")};
}

// 1. Rank 0 creates the staging directory and tells the others where it is.
fs::path stage_directory(const SaveJob& job) {
  std::string staged_name;
  std::exception_ptr failure;
  if (job.rank == 0) {
    try {
      require_replaceable_latest_pointer(job.request.root);
      fs::create_directories(job.request.root);
      staged_name = create_temp_directory_next_to(job.final_dir).string();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  const fs::path staged = broadcast_text(job.group, staged_name, 0);
  if (staged.empty()) {
    throw IoError(str_cat(
        job.failed_prefix, ": ",
        job.rank == 0 ? describe(failure) : "rank 0 could not create the staging directory"));
  }
  return staged;
}

// 2. Every rank writes its own file (rank 0 the model too); then all agree on the outcome.
void write_rank_files(const SaveJob& job, const fs::path& staged,
                      const std::vector<ModelTensor>& model, const optim::Optimizer& optimizer,
                      bool replicated) {
  std::exception_ptr failure;
  try {
    fault_point("staged", job.rank);
    // Rank 0 writes the model file on a second thread while it writes its own file: each file's
    // fsync then overlaps the other's writes (the save is bound by the disk, not the CPU).
    std::future<void> model_written;
    if (job.rank == 0) {
      model_written = std::async(std::launch::async, [&] {
        write_model_file(staged / kCheckpointModelFile, model, job.request.step);
      });
    }
    std::exception_ptr shard_failure;
    try {
      optimizer_shard_file(optimizer,
                           {{"rank", std::to_string(job.rank)},
                            {"data_parallel_size", std::to_string(job.size)},
                            {"step", std::to_string(job.request.step)}},
                           !replicated || job.rank == 0, /*skip_replica_copies=*/true)
          .writer.write_atomic(staged / optimizer_rank_file_name(job.rank, job.size),
                               RenameSync::kByCommit);
    } catch (...) {
      shard_failure = std::current_exception();
    }
    if (job.rank == 0) {
      model_written.get();  // joins the writer; rethrows its failure first
      fault_point("model_file_written", job.rank);
    }
    if (shard_failure) std::rethrow_exception(shard_failure);
    fault_point("rank_file_written", job.rank);
  } catch (...) {
    failure = std::current_exception();
  }
  const std::vector<int> failed = ranks_with_flag(job.group, failure != nullptr);
  if (failed.empty()) return;
  std::error_code ec;
  if (job.rank == 0) fs::remove_all(staged, ec);  // every rank is done writing by now
  throw IoError(str_cat(job.failed_prefix, ": writing failed on rank(s) ", rank_list(failed),
                        failure ? str_cat(": ", describe(failure)) : std::string()));
}

// 3. Rank 0 writes the manifest, renames the directory into place and moves `latest`; a
// failure removes the staging directory unless it was already committed.
std::exception_ptr commit_on_rank0(const SaveJob& job, const fs::path& staged,
                                   const std::vector<ModelTensor>& model, bool replicated,
                                   int replicas) {
  bool committed = false;
  try {
    const ordered_json manifest =
        build_manifest(job.request, staged, job.size, model, replicated, replicas);
    write_file_atomic(staged / kCheckpointManifestFile, manifest.dump(1) + "\n",
                      RenameSync::kByCommit);
    fault_point("before_commit", job.rank);
    // Every rank's files were fsynced by their writers before the ranks agreed they were done.
    commit_directory(staged, job.final_dir, /*replace_existing=*/true, StagedFiles::kSynced);
    committed = true;
    fault_point("committed", job.rank);
    replace_pointer_file(job.request.root / kCheckpointLatestFile, job.step_name);
    fault_point("published", job.rank);
  } catch (...) {
    std::error_code ec;
    if (!committed) fs::remove_all(staged, ec);
    return std::current_exception();
  }
  return nullptr;
}

// keep_last: a failed prune leaves extra checkpoints, never a broken one, so it only warns.
void prune_after_publish(const SaveJob& job) {
  if (job.request.keep_last <= 0) return;
  try {
    prune_old_checkpoints(job.request.root, job.request.keep_last, job.step_name);
  } catch (const std::exception& e) {
    log::warning("keep-last: pruning old checkpoints in ", quoted(job.request.root),
                 " failed: ", e.what());
  }
}

}  // namespace

void require_replaceable_latest_pointer(const fs::path& root) {
  const fs::path pointer = root / kCheckpointLatestFile;
  struct stat entry {};
  if (::lstat(pointer.c_str(), &entry) != 0 || !S_ISLNK(entry.st_mode)) return;
  std::error_code ec;
  throw IoError(str_cat(quoted(pointer), " is a symbolic link to ",
                        quoted(fs::read_symlink(pointer, ec)),
                        ": each save replaces it with the step's name, which would write over "
                        "what it points to; remove it (shardwise writes it as a plain file)"));
}

fs::path save_checkpoint(const CheckpointSaveRequest& request,
                         const std::vector<ModelTensor>& model, const optim::Optimizer& optimizer,
                         ProcessGroup& group) {
  const SaveJob job = save_job(request, group);
  const fs::path staged = stage_directory(job);
  const bool replicated = optimizer_state_is_replicated(optimizer);
  write_rank_files(job, staged, model, optimizer, replicated);
  std::exception_ptr failure;
  if (job.rank == 0) {
    failure = commit_on_rank0(job, staged, model, replicated, layer_wise_replicas(optimizer));
    if (!failure) prune_after_publish(job);
  }
  if (!ranks_with_flag(group, failure != nullptr).empty()) {
    throw IoError(str_cat(job.failed_prefix, ": publishing failed on rank 0",
                          failure ? str_cat(": ", describe(failure)) : std::string()));
  }
  return job.final_dir;
}

json read_checkpoint_manifest(const fs::path& directory) {
  const fs::path file = directory / kCheckpointManifestFile;
  // A regular file of plausible size: a FIFO or /dev/zero in its place must not hang the load.
  const std::string text = read_input_file(file, "checkpoint manifest", kManifestFileMaxBytes);
  return checkpoint_detail::parse_checkpoint_manifest(text, directory, file);
}

const json* saved_model_config(const json& manifest) {
  const auto config = manifest.find("config");
  if (config == manifest.end() || !config->is_object()) return nullptr;
  const auto model = config->find("model");
  return model != config->end() && model->is_object() ? &*model : nullptr;
}

std::vector<std::int64_t> list_checkpoint_steps(const fs::path& root) {
  std::vector<std::int64_t> steps;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const auto step = parse_step_directory_name(entry.path().filename().string());
    if (step && fs::exists(entry.path() / kCheckpointManifestFile, ec)) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

namespace {

// fs::exists that reports a symlink loop or a permission error as an IoError naming the path,
// not as a std::filesystem::filesystem_error.
bool checkpoint_path_exists(const fs::path& path) {
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  SW_REQUIRE(!ec, IoError, "cannot access ", quoted(path), ": ", ec.message());
  return exists;
}

// "steps 100, 200" / "no complete checkpoints": what a root holds, for error messages.
std::string describe_steps(const fs::path& root) {
  const std::vector<std::int64_t> steps = list_checkpoint_steps(root);
  if (steps.empty()) return "it holds no complete checkpoints";
  std::string text = steps.size() == 1 ? "it holds step " : "it holds steps ";
  for (std::size_t i = 0; i < steps.size(); ++i) text += str_cat(i ? ", " : "", steps[i]);
  return text;
}

}  // namespace

fs::path resolve_checkpoint_directory(const fs::path& path, std::optional<std::int64_t> step) {
  SW_REQUIRE(checkpoint_path_exists(path), IoError, "checkpoint directory ", quoted(path),
             " does not exist");
  SW_REQUIRE(fs::is_directory(path), IoError, "checkpoint directory ", quoted(path),
             " is not a directory");
  if (checkpoint_path_exists(path / kCheckpointManifestFile)) {
    if (step) {
      const json m = read_checkpoint_manifest(path);
      const auto saved = m.at("step").get<std::int64_t>();
      SW_REQUIRE(saved == *step, InvalidArgument, "checkpoint ", quoted(path), " is of step ",
                 saved, ", not the requested step ", *step);
    }
    return path;
  }
  if (step) {
    const fs::path dir = path / step_directory_name(*step);
    SW_REQUIRE(checkpoint_path_exists(dir / kCheckpointManifestFile), IoError,
               "no complete checkpoint of step ", *step, " in ", quoted(path), " (",
               describe_steps(path), ")");
    return dir;
  }
  const fs::path pointer = path / kCheckpointLatestFile;
  const auto latest = read_pointer_file(pointer);
  SW_REQUIRE(latest.has_value(), IoError, "checkpoint pointer ", quoted(pointer),
             " does not exist: ", quoted(path),
             " holds no published checkpoint (pass a step directory or a step to load)");
  SW_REQUIRE(parse_step_directory_name(*latest).has_value(), FormatError, "checkpoint pointer ",
             quoted(pointer), " holds '", printable(*latest),
             "', which is not a step directory name");
  const fs::path dir = path / *latest;
  SW_REQUIRE(checkpoint_path_exists(dir / kCheckpointManifestFile), FormatError,
             "checkpoint pointer ", quoted(pointer), " names ", quoted(dir),
             ", which is not a complete checkpoint");
  return dir;
}

LoadedCheckpoint load_checkpoint(const fs::path& directory, const std::vector<ModelTensor>& model,
                                 optim::Optimizer& optimizer, ProcessGroup& group,
                                 std::string_view optimizer_kind) {
  LoadedCheckpoint out;
  out.directory = directory;
  const std::vector<int> failed = run_on_every_rank(group, [&] {
    const fs::path manifest_file = directory / kCheckpointManifestFile;
    out.manifest = read_checkpoint_manifest(directory);
    const json& m = out.manifest;
    out.step = m.at("step").get<std::int64_t>();
    try {
      out.consumed_samples = m.at("trainer").at("consumed_samples").get<std::int64_t>();
    } catch (const json::exception& e) {
      throw FormatError(str_cat("checkpoint manifest ", quoted(manifest_file),
                                ": malformed \"trainer\": ", json_error_text(e)));
    }
    const auto saved_kind = m.at("optimizer_kind").get<std::string>();
    SW_REQUIRE(optimizer_kind.empty() || saved_kind == optimizer_kind, InvalidArgument,
               "checkpoint ", quoted(directory), " was saved with optimizer kind '",
               printable(saved_kind), "' but this run uses '", optimizer_kind,
               "': loading across optimizer kinds is not supported (a different data-parallel "
               "size or bucket size is)");
    // Every listed file must be there, well formed and written for this checkpoint, whichever
    // of them this rank needs.
    const auto files = m.at("optimizer_files").get<std::vector<std::string>>();
    for (std::size_t r = 0; r < files.size(); ++r) {
      const fs::path file = file_in(directory, files[r], manifest_file);
      SW_REQUIRE(checkpoint_path_exists(file), IoError, "checkpoint file ", quoted(file),
                 " is missing (listed in ", quoted(manifest_file), ")");
      check_rank_file_metadata(SafetensorsFile::open(file), file,
                               {{"rank", std::to_string(r)},
                                {"data_parallel_size", std::to_string(files.size())},
                                {"step", std::to_string(out.step)}});
    }
    require_standard_model_file(m, manifest_file);
    // State in host memory is read in place. Otherwise the state dict the shards are read into
    // is built on a second thread while the model file is read: allocating and filling it is
    // memory work the read can hide. (The future of std::async joins the thread when destroyed,
    // also when the read throws.)
    std::optional<optim::StateLoadTargets> targets = optimizer.state_load_targets();
    std::future<optim::OptimizerState> state;
    if (!targets) {
      state = std::async(std::launch::async, [&optimizer] { return optimizer.state_dict(); });
    }
    load_model_file(directory / kCheckpointModelFile, model);
    const std::vector<checkpoint_detail::MainParamSample> samples =
        checkpoint_detail::sample_model_values(optimizer, model);
    const std::vector<SavedShard> saved = saved_shards_from_index(m, directory, manifest_file);
    const std::string what = str_cat("checkpoint ", quoted(directory));
    if (targets) {
      load_optimizer_shards(optimizer, saved, what, std::move(*targets));
    } else {
      load_optimizer_shards(optimizer, saved, what, state.get());
    }
    checkpoint_detail::require_main_params_match(samples, directory);
  });
  SW_REQUIRE(failed.empty(), FormatError, "loading checkpoint ", quoted(directory),
             " failed on rank(s) ", rank_list(failed), " (see their errors)");
  require_same_checkpoint_on_every_rank(group, directory, out.manifest, model);
  return out;
}

void require_same_checkpoint_on_every_rank(ProcessGroup& group, const fs::path& directory,
                                           const json& manifest,
                                           const std::vector<ModelTensor>& model) {
  require_same_checkpoint_as_rank0(group, loaded_checkpoint_fingerprint(manifest, model),
                                   directory);
}

}  // namespace shardwise
