#include "shardwise/checkpoint/checkpoint_shards.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <utility>

#include "checkpoint_finite.hpp"
#include "shardwise/checkpoint/safetensors.hpp"
#include "shardwise/core/checked_size.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/json_text.hpp"
#include "shardwise/core/message_text.hpp"
#include "shardwise/core/shape.hpp"
#include "shardwise/optim/chained_optimizer.hpp"
#include "shardwise/optim/distributed_optimizer.hpp"
#include "shardwise/optim/layer_wise_distributed_optimizer.hpp"

namespace shardwise {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::vector<optim::OwnedSlice>* owned_slices_of(const optim::Optimizer& optimizer) {
  if (const auto* d = dynamic_cast<const optim::DistributedOptimizer*>(&optimizer)) {
    return &d->owned_slices();
  }
  if (const auto* l = dynamic_cast<const optim::LayerWiseDistributedOptimizer*>(&optimizer)) {
    return &l->owned_params();
  }
  return nullptr;
}

// A rank's copy of a param that the first replica of a layer-wise shard group also holds: it
// loads it, but only the first replica writes it (each element is saved once).
bool is_replica_copy(const optim::Optimizer& optimizer, const std::string& param) {
  const auto* l = dynamic_cast<const optim::LayerWiseDistributedOptimizer*>(&optimizer);
  return l != nullptr && l->is_replica_copy(param);
}

void collect_shards(const optim::Optimizer& optimizer, bool for_saving,
                    std::vector<OptimizerShard>& out) {
  if (const auto* chained = dynamic_cast<const optim::ChainedOptimizer*>(&optimizer)) {
    for (const auto& child : chained->children()) collect_shards(*child, for_saving, out);
    return;
  }
  std::map<std::string, const optim::OwnedSlice*> slice_of;
  const auto* slices = owned_slices_of(optimizer);
  if (slices != nullptr) {
    for (const auto& s : *slices) {
      SW_CHECK(slice_of.emplace(s.name, &s).second, "optimizer ", optimizer.kind(),
               " owns two slices of param ", s.name);
    }
  }
  for (const optim::ParamGroup& group : optimizer.param_groups()) {
    for (const optim::OptimParam& p : group.params) {
      if (for_saving && is_replica_copy(optimizer, p.name)) continue;
      OptimizerShard shard;
      shard.param = p.name;
      shard.main_param = p.main_param;
      if (slices != nullptr) {
        const auto it = slice_of.find(p.name);
        SW_CHECK(it != slice_of.end(), "optimizer ", optimizer.kind(), " steps param ", p.name,
                 " but owns no slice of it");
        shard.shape = it->second->shape;
        shard.start = it->second->offset;
        shard.end = it->second->offset + it->second->count;
      } else {
        shard.shape = p.shape;
        shard.start = 0;
        shard.end = p.numel();
      }
      SW_CHECK(shard.count() == p.numel(), "param ", p.name, ": slice of ", shard.count(),
               " elements but the optimizer sees ", p.numel());
      out.push_back(std::move(shard));
    }
  }
}

// Whole params keep their shape (readable as such from Python); partial runs are 1-D.
std::vector<std::int64_t> stored_shape(const OptimizerShard& shard) {
  if (shard.start == 0 && shard.count() == shape_numel(shard.shape)) return shard.shape;
  return {shard.count()};
}

// Opens each file once, on first use, and reads the shard index it carries in its __metadata__.
class FileCache {
 public:
  // `shard` as the manifest describes it, checked against the index of the file it names: a
  // manifest edited to move a range would otherwise place the file's values at other elements.
  const SafetensorsFile& get(const SavedShard& shard) {
    const OpenFile& open = open_file(shard.file);
    const auto it = open.index.find(shard.param);
    SW_REQUIRE(
        it != open.index.end() && it->second.start == shard.start && it->second.end == shard.end,
        FormatError, "checkpoint manifest and file ", quoted(shard.file),
        " disagree: the manifest's \"index\" puts elements [", shard.start, ", ", shard.end,
        ") of param '", shard.param, "' there, the file's own index ",
        it == open.index.end() ? std::string("has no such param")
                               : str_cat("says [", it->second.start, ", ", it->second.end, ")"));
    return open.file;
  }

 private:
  struct OpenFile {
    SafetensorsFile file;
    std::map<std::string, SavedShard> index;
  };
  const OpenFile& open_file(const fs::path& path) {
    auto it = files_.find(path.string());
    if (it == files_.end()) {
      OpenFile opened{SafetensorsFile::open(path), {}};
      for (SavedShard& s : read_shard_file_index(opened.file)) {
        opened.index.emplace(s.param, std::move(s));
      }
      it = files_.emplace(path.string(), std::move(opened)).first;
    }
    return it->second;
  }

  std::map<std::string, OpenFile> files_;
};

// Checks that `file` holds tensor `name` as fp32 with `numel` elements.
void check_tensor(const SafetensorsFile& file, const std::string& name, std::int64_t numel,
                  const std::string& purpose) {
  SW_REQUIRE(file.contains(name), FormatError, "checkpoint file ", quoted(file.path()),
             " has no tensor '", name, "' (", purpose, ")");
  const SafetensorsTensorInfo& info = file.info(name);
  SW_REQUIRE(info.dtype == DType::kFloat32, FormatError, "checkpoint file ", quoted(file.path()),
             ": tensor '", name, "' is ", dtype_name(info.dtype), ", expected F32");
  SW_REQUIRE(info.numel() == numel, FormatError, "checkpoint file ", quoted(file.path()),
             ": tensor '", name, "' has ", info.numel(), " elements, its shard index says ", numel);
}

}  // namespace

std::vector<OptimizerShard> optimizer_shards(const optim::Optimizer& optimizer) {
  std::vector<OptimizerShard> out;
  collect_shards(optimizer, /*for_saving=*/false, out);
  return out;
}

std::vector<OptimizerShard> optimizer_shards_to_save(const optim::Optimizer& optimizer) {
  std::vector<OptimizerShard> out;
  collect_shards(optimizer, /*for_saving=*/true, out);
  return out;
}

int layer_wise_replicas(const optim::Optimizer& optimizer) {
  if (const auto* chained = dynamic_cast<const optim::ChainedOptimizer*>(&optimizer)) {
    int most = 1;
    for (const auto& child : chained->children()) {
      most = std::max(most, layer_wise_replicas(*child));
    }
    return most;
  }
  const auto* l = dynamic_cast<const optim::LayerWiseDistributedOptimizer*>(&optimizer);
  return l != nullptr ? l->replicas() : 1;
}

bool optimizer_state_is_replicated(const optim::Optimizer& optimizer) {
  if (const auto* chained = dynamic_cast<const optim::ChainedOptimizer*>(&optimizer)) {
    return std::all_of(chained->children().begin(), chained->children().end(),
                       [](const auto& child) { return optimizer_state_is_replicated(*child); });
  }
  return owned_slices_of(optimizer) == nullptr;
}

bool is_per_param_field(std::string_view field) { return field == "step"; }

std::string shard_tensor_name(std::string_view param, std::string_view field) {
  return str_cat(param, "/", field);
}

OptimizerShardFile optimizer_shard_file(const optim::Optimizer& optimizer,
                                        const std::map<std::string, std::string>& metadata,
                                        bool include_shards, bool skip_replica_copies) {
  std::vector<OptimizerShard> shards;
  OptimizerShardFile out;
  const optim::OptimizerStateView& state = out.state;
  if (include_shards) {
    shards =
        skip_replica_copies ? optimizer_shards_to_save(optimizer) : optimizer_shards(optimizer);
    out.state = optimizer.state_view();
  }
  SafetensorsWriter& writer = out.writer;
  json index = json::object();
  for (const OptimizerShard& shard : shards) {
    const auto it = state.params().find(shard.param);
    SW_CHECK(it != state.params().end(), "optimizer ", optimizer.kind(),
             " has no state entry for param ", shard.param);
    const std::vector<std::int64_t> shape = stored_shape(shard);
    std::vector<std::string> fields{std::string(kMainParamField)};
    writer.add(shard_tensor_name(shard.param, kMainParamField), DType::kFloat32, shape,
               shard.main_param);
    for (const auto& [field, values] : it->second) {
      SW_CHECK(field != kMainParamField, "optimizer state field named ", kMainParamField);
      const bool per_param = is_per_param_field(field);
      const auto expected = static_cast<std::size_t>(per_param ? 1 : shard.count());
      SW_CHECK(values.size() == expected, "param ", shard.param, " field ", field, " has ",
               values.size(), " values, expected ", expected);
      writer.add(shard_tensor_name(shard.param, field), DType::kFloat32,
                 per_param ? std::vector<std::int64_t>{1} : shape, values.data());
      fields.push_back(field);
    }
    index[shard.param] = {
        {"start", shard.start}, {"end", shard.end}, {"shape", shard.shape}, {"fields", fields}};
  }
  for (const auto& [key, value] : metadata) writer.set_metadata(key, value);
  writer.set_metadata("format", std::string(kShardFileFormat));
  writer.set_metadata("format_version", std::to_string(kShardFileFormatVersion));
  writer.set_metadata("optimizer", std::string(optimizer.kind()));
  writer.set_metadata("shards", index.dump());
  return out;
}

std::vector<SavedShard> read_shard_file_index(const fs::path& path) {
  return read_shard_file_index(SafetensorsFile::open(path));
}

std::vector<SavedShard> read_shard_file_index(const SafetensorsFile& file) {
  const fs::path& path = file.path();
  const auto& meta = file.metadata();
  const auto format = meta.find("format");
  SW_REQUIRE(format != meta.end() && format->second == kShardFileFormat, FormatError,
             "checkpoint file ", quoted(path),
             " is not a shardwise optimizer shard file (its "
             "__metadata__ has no \"format\": \"",
             kShardFileFormat, "\")");
  const auto shards_text = meta.find("shards");
  SW_REQUIRE(shards_text != meta.end(), FormatError, "checkpoint file ", quoted(path),
             ": __metadata__ has no \"shards\" entry");
  std::vector<SavedShard> out;
  try {
    const json index =
        parse_json_text(shards_text->second,
                        str_cat("checkpoint file ", quoted(path), ": __metadata__ \"shards\""));
    SW_REQUIRE(index.is_object(), FormatError, "checkpoint file ", quoted(path),
               ": __metadata__ \"shards\" is not a JSON object");
    for (const auto& [param, entry] : index.items()) {
      // Integers read strictly: get<int64_t> of a float such as 1e300 is undefined behaviour.
      const auto integer = [&](const json& value, const char* field) {
        const std::optional<std::int64_t> v =
            json_integer_within(value, 0, std::numeric_limits<std::int64_t>::max() / 2);
        SW_REQUIRE(v.has_value(), FormatError, "checkpoint file ", quoted(path), ": param '",
                   printable(param), "' has ", field, " ", json_excerpt(value),
                   " in its shard index; expected a non-negative integer");
        return *v;
      };
      SavedShard s;
      s.file = path;
      s.param = param;
      s.start = integer(entry.at("start"), "start");
      s.end = integer(entry.at("end"), "end");
      const json& shape = entry.at("shape");
      SW_REQUIRE(shape.is_array(), FormatError, "checkpoint file ", quoted(path), ": param '",
                 printable(param), "' has shape ", json_excerpt(shape),
                 " in its shard index; expected an array");
      std::int64_t numel = 1;  // checked: shape_numel of huge dimensions would overflow
      for (const json& dim : shape) {
        s.shape.push_back(integer(dim, "a shape dimension"));
        const auto product = checked_mul(numel, s.shape.back());
        SW_REQUIRE(product.has_value(), FormatError, "checkpoint file ", quoted(path), ": param '",
                   printable(param), "' has shape ", json_excerpt(shape),
                   " in its shard index, of more elements than an int64 counts");
        numel = *product;
      }
      s.fields = entry.at("fields").get<std::vector<std::string>>();
      SW_REQUIRE(0 <= s.start && s.start < s.end && s.end <= numel, FormatError, "checkpoint file ",
                 quoted(path), ": param '", printable(param), "' has element range [", s.start,
                 ", ", s.end, ") outside its ", numel, " elements");
      for (const auto& field : s.fields) {
        check_tensor(file, shard_tensor_name(param, field),
                     is_per_param_field(field) ? 1 : s.end - s.start, "listed in its shard index");
      }
      out.push_back(std::move(s));
    }
  } catch (const json::exception& e) {
    throw FormatError(
        str_cat("checkpoint file ", quoted(path),
                ": malformed \"shards\" index in __metadata__: ", json_error_text(e)));
  }
  return out;
}

namespace {

using SavedShardsByParam = std::map<std::string, std::vector<const SavedShard*>>;

// The saved shards of each param, in element order.
SavedShardsByParam saved_shards_by_param(const std::vector<SavedShard>& saved) {
  SavedShardsByParam out;
  for (const SavedShard& s : saved) out[s.param].push_back(&s);
  for (auto& [param, list] : out) {
    std::sort(list.begin(), list.end(),
              [](const SavedShard* a, const SavedShard* b) { return a->start < b->start; });
  }
  return out;
}

// AdamW's second moment is a running mean of squares: a negative value is damage (it would turn
// the update's square root into NaN steps later, blamed on the learning rate).
checkpoint_detail::ValueCheck value_check_of(const std::string& field) {
  return field == "exp_avg_sq" ? checkpoint_detail::ValueCheck::kFiniteNonNegative
                               : checkpoint_detail::ValueCheck::kFinite;
}

// Copies elements [shard.start, shard.end) of `field` into dst from every saved shard
// overlapping them (the saved layout may cut the param differently from this one); every element
// must be covered and pass the field's value check, tested while each piece is in cache.
void fill_from_saved_shards(FileCache& files, const OptimizerShard& shard,
                            const std::vector<const SavedShard*>& sources, const std::string& field,
                            float* dst, const std::string& what) {
  std::int64_t covered = 0;
  for (const SavedShard* src : sources) {
    const std::int64_t lo = std::max(shard.start, src->start);
    const std::int64_t hi = std::min(shard.end, src->end);
    if (lo >= hi) continue;
    const SafetensorsFile& file = files.get(*src);
    const std::string name = shard_tensor_name(shard.param, field);
    check_tensor(file, name, src->end - src->start,
                 str_cat("needed for elements [", lo, ", ", hi, ") of param '", shard.param, "'"));
    float* out = dst + (lo - shard.start);
    const auto bad = checkpoint_detail::read_range_checked(file, name, lo - src->start, hi - lo,
                                                           out, value_check_of(field));
    // A finite value was rejected for its sign.
    SW_REQUIRE(!bad || !std::isfinite(out[bad.value_or(0)]), FormatError, what, ": field '", field,
               "' of param '", shard.param, "' holds a negative value (", out[bad.value_or(0)],
               ") at element ", lo + bad.value_or(0),
               "; it is a running mean of squares: the checkpoint is damaged");
    SW_REQUIRE(!bad, FormatError, "checkpoint file ", quoted(src->file), ": tensor '", name,
               "' holds a non-finite value (NaN or inf) at element ",
               lo - src->start + bad.value_or(0), "; the checkpoint is damaged");
    covered += hi - lo;
  }
  SW_REQUIRE(covered == shard.count(), FormatError, what, ": the saved shards of param '",
             shard.param, "' cover ", covered, " of the ", shard.count(),
             " elements this rank needs ([", shard.start, ", ", shard.end, ")) of field '", field,
             "'");
}

// Where a load puts one param's state: each array field's values, and the per-param scalars
// (the step), which are read as floats and handed to their store.
struct ParamStateSinks {
  std::vector<std::pair<std::string, std::span<float>>> arrays;
  std::vector<std::pair<std::string, std::function<void(float)>>> scalars;
};

// The saved shards of `shard`'s param, each checked to have the model's shape.
const std::vector<const SavedShard*>& sources_of(const SavedShardsByParam& saved_of,
                                                 const OptimizerShard& shard,
                                                 const std::string& what) {
  const auto it = saved_of.find(shard.param);
  SW_REQUIRE(it != saved_of.end(), FormatError, what, " has no saved optimizer state for param '",
             shard.param, "' (saved from a different model or optimizer?)");
  for (const SavedShard* src : it->second) {
    SW_REQUIRE(src->shape == shard.shape, ShapeError, "checkpoint file ", quoted(src->file),
               ": param '", shard.param, "' has shape ", json(src->shape).dump(),
               " but the model's is ", json(shard.shape).dump());
  }
  return it->second;
}

// Reads one param's main param and state fields. Shapes and coverage are checked per param
// before its bytes are read.
void load_param_shard(FileCache& files, const OptimizerShard& shard,
                      const std::vector<const SavedShard*>& sources, const ParamStateSinks& sinks,
                      const std::string& what) {
  auto fill = [&](const std::string& field, float* dst) {
    fill_from_saved_shards(files, shard, sources, field, dst, what);
  };
  fill(std::string(kMainParamField), shard.main_param);
  for (const auto& [field, values] : sinks.arrays) {
    SW_CHECK(static_cast<std::int64_t>(values.size()) == shard.count(), "param ", shard.param,
             " field ", field, " size");
    fill(field, values.data());
  }
  for (const auto& [field, store] : sinks.scalars) {
    const SafetensorsFile& file = files.get(*sources.front());
    const std::string name = shard_tensor_name(shard.param, field);
    check_tensor(file, name, 1, str_cat("the per-param field '", field, "'"));
    float value = 0.0f;
    file.read_range(name, 0, 1, &value);
    // The only per-param field is a step count: the optimizer's own check would not name the file.
    SW_REQUIRE(std::isfinite(value) && value >= 0.0f && value == std::floor(value), FormatError,
               "checkpoint file ", quoted(file.path()), ": tensor '", name, "' holds ", value,
               ", not a step count (a non-negative integer); the checkpoint is damaged");
    store(value);
  }
}

// Reads every shard `optimizer` holds, its state fields into sinks_of(shard).
template <typename SinksOf>
void load_each_shard(const optim::Optimizer& optimizer, const std::vector<SavedShard>& saved,
                     const std::string& what, SinksOf&& sinks_of) {
  const SavedShardsByParam saved_of = saved_shards_by_param(saved);
  FileCache files;
  for (const OptimizerShard& shard : optimizer_shards(optimizer)) {
    const auto& sources = sources_of(saved_of, shard, what);
    load_param_shard(files, shard, sources, sinks_of(shard), what);
  }
}

// The entry of `shard`'s param in a per-param map the optimizer made (it has every param).
template <typename Map>
auto& state_entry(Map& map, const optim::Optimizer& optimizer, const OptimizerShard& shard) {
  const auto it = map.find(shard.param);
  SW_CHECK(it != map.end(), "optimizer ", optimizer.kind(), " has no state for param ",
           shard.param);
  return it->second;
}

}  // namespace

void load_optimizer_shards(optim::Optimizer& optimizer, const std::vector<SavedShard>& saved,
                           const std::string& what) {
  if (std::optional<optim::StateLoadTargets> targets = optimizer.state_load_targets()) {
    load_optimizer_shards(optimizer, saved, what, std::move(*targets));
  } else {
    // The optimizer's state dict names every field it needs, at the right sizes.
    load_optimizer_shards(optimizer, saved, what, optimizer.state_dict());
  }
}

// Main params are read straight into the optimizer's buffers (no staging copy), so a checkpoint
// found damaged (non-finite values) part-way leaves them partly loaded. The state fields are read
// into `state` and handed over only once all were accepted.
void load_optimizer_shards(optim::Optimizer& optimizer, const std::vector<SavedShard>& saved,
                           const std::string& what, optim::OptimizerState state) {
  load_each_shard(optimizer, saved, what, [&](const OptimizerShard& shard) {
    ParamStateSinks sinks;
    for (auto& [field, values] : state_entry(state, optimizer, shard)) {
      if (!is_per_param_field(field)) {
        sinks.arrays.emplace_back(field, std::span<float>(values));
        continue;
      }
      SW_CHECK(values.size() == 1, "per-param field ", field, " of ", shard.param);
      sinks.scalars.emplace_back(field, [&values](float v) { values[0] = v; });
    }
    return sinks;
  });
  optimizer.take_state_dict(std::move(state));  // moves the vectors just read where it can
}

// Everything is read in place: main params and state alike are partly loaded when a checkpoint
// is found damaged part-way (the load throws; the run must not go on from it).
void load_optimizer_shards(optim::Optimizer& optimizer, const std::vector<SavedShard>& saved,
                           const std::string& what, optim::StateLoadTargets targets) {
  load_each_shard(optimizer, saved, what, [&](const OptimizerShard& shard) {
    const optim::StateLoadTarget& target = state_entry(targets, optimizer, shard);
    ParamStateSinks sinks;
    for (const auto& [field, values] : target.arrays) sinks.arrays.emplace_back(field, values);
    if (std::int64_t* step = target.step) {
      sinks.scalars.emplace_back("step", [step, &shard, &optimizer](float v) {
        *step = optim::step_from_float(v, shard.param, optimizer.kind());
      });
    }
    return sinks;
  });
}

void save_state_dict_to_file(const optim::Optimizer& optimizer, const fs::path& path) {
  optimizer_shard_file(optimizer, {}).writer.write_atomic(path);
}

void load_state_dict_from_file(optim::Optimizer& optimizer, const fs::path& path) {
  load_optimizer_shards(optimizer, read_shard_file_index(path),
                        str_cat("optimizer state file ", quoted(path)));
}

}  // namespace shardwise
