// Engine bindings: buffer views as numpy arrays (zero copy, keeping the Engine alive), grad-ready
// registration, grad / param sync, the optimizer, and checkpoints.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include "bindings.hpp"
#include "engine.hpp"
#include "layout_dict.hpp"
#include "optimizer_spec_keywords.hpp"
#include "shardwise/comm/mpi_process_group.hpp"
#include "shardwise/comm/settings_agreement.hpp"
#include "shardwise/config/optimizer_hyperparameters.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/layout/param_info.hpp"

namespace py = pybind11;

namespace shardwise::python {
namespace {

// numpy has no bfloat16: bf16 buffers travel as int16 (which torch.from_numpy accepts, unlike
// uint16) and Python reinterprets them.
py::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return py::dtype::of<float>();
    case DType::kFloat16:
      return py::dtype("float16");
    case DType::kBFloat16:
      return py::dtype::of<std::int16_t>();
    default:
      break;
  }
  throw InvalidArgument(str_cat("no numpy view for ", dtype_name(dtype), " buffers"));
}

// A numpy array over `view` with `shape`, whose base is the Engine (so the buffer outlives it).
py::array array_over(const py::object& owner, const TensorView& view,
                     const std::vector<std::int64_t>& shape) {
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  return py::array(numpy_dtype(view.dtype), dims, view.data, owner);
}

Engine& engine_of(const py::object& self) { return self.cast<Engine&>(); }

// The optimizer kind named `name`; ValueError listing the kinds otherwise.
OptimizerKind kind_from_name(const std::string& name) {
  if (auto kind = parse_enum<OptimizerKind>(name)) return *kind;
  throw InvalidArgument(
      str_cat("unknown optimizer '", name, "' (valid: ", enum_choices<OptimizerKind>(), ")"));
}

py::dict step_result(const optim::StepResult& r) {
  py::dict out;
  out["stepped"] = r.stepped;
  out["grad_norm"] = r.grad_norm;
  out["clip_coeff"] = r.clip_coeff;
  return out;
}

// Optimizer state as {param: {field: float32 array}}: numpy arrays, not lists of Python floats
// (a list costs ~8x the memory of the state it holds).
py::dict state_to_python(const optim::OptimizerState& state) {
  py::dict out;
  for (const auto& [name, fields] : state) {
    py::dict entry;
    for (const auto& [field, values] : fields) {
      py::array_t<float> a(static_cast<py::ssize_t>(values.size()));
      std::copy(values.begin(), values.end(), a.mutable_data());
      entry[py::str(field)] = a;
    }
    out[py::str(name)] = entry;
  }
  return out;
}

optim::OptimizerState state_from_python(const py::dict& state) {
  optim::OptimizerState out;
  for (const auto& [name, fields] : state) {
    optim::ParamState& entry = out[name.cast<std::string>()];
    for (const auto& [field, values] : fields.cast<py::dict>()) {
      const auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(values);
      SW_REQUIRE(a && a.ndim() == 1, InvalidArgument, "optimizer state '", name.cast<std::string>(),
                 "' field '", field.cast<std::string>(), "': expected a 1-D float array");
      entry[field.cast<std::string>()].assign(a.data(), a.data() + a.size());
    }
  }
  return out;
}

// One param's hyperparameters from {"lr", "weight_decay", "beta1", "beta2", "eps", "momentum"}
// (each optional), range-checked as the spec's; errors name the param and the field.
optim::GroupOverrides param_overrides_from_python(const std::string& param, const py::dict& d) {
  optim::GroupOverrides o;
  OptimizerHyperparameters checked;
  const auto take = [&d](const char* key, std::optional<double>& field, double& check) {
    if (!d.contains(key)) return;
    field = d[key].cast<double>();
    check = *field;
  };
  take("lr", o.lr, checked.lr);
  take("weight_decay", o.weight_decay, checked.weight_decay);
  take("beta1", o.beta1, checked.beta1);
  take("beta2", o.beta2, checked.beta2);
  take("eps", o.eps, checked.eps);
  take("momentum", o.momentum, checked.momentum);
  const auto name = [&param](const char* field) { return str_cat("param '", param, "': ", field); };
  validate(checked,
           OptimizerFieldNames{name("lr"), name("muon_lr"), name("weight_decay"), name("betas[0]"),
                               name("betas[1]"), name("eps"), name("momentum"), name("ns_steps"),
                               name("extra_scale_factor"), name("clip_grad")});
  return o;
}

void bind_buffers(py::class_<Engine>& c) {
  c.def("param_array",
        [](const py::object& self, ParamId id) {
          const Engine& e = engine_of(self);
          return array_over(self, e.ddp().param(id), e.ddp().params().at(id).shape);
        })
      .def("grad_array",
           [](const py::object& self, ParamId id) {
             const Engine& e = engine_of(self);
             return array_over(self, e.ddp().main_grad(id), e.ddp().params().at(id).shape);
           })
      .def("layout",
           [](const Engine& e) {
             py::list out;
             for (const auto& [key, buffer] : e.ddp().layout().layouts) {
               out.append(buffer_to_dict(key, buffer));
             }
             return out;
           })
      .def("buffer_bytes", &Engine::buffer_bytes)
      .def("bytes_communicated", &Engine::bytes_communicated)
      .def("broadcast_params_from_rank0", &Engine::broadcast_params_from_rank0,
           py::call_guard<py::gil_scoped_release>())
      .def(
          "broadcast_from_rank0",
          [](Engine& e, py::array values) {
            // Converting would overwrite a temporary copy: the caller's array must be the buffer.
            SW_REQUIRE(values.dtype().is(py::dtype::of<float>()) &&
                           (values.flags() & py::array::c_style) && values.writeable(),
                       InvalidArgument,
                       "broadcast_from_rank0: values must be a writeable C-contiguous float32 "
                       "array (it is overwritten in place); got dtype ",
                       py::str(values.dtype()).cast<std::string>());
            TensorView view{values.mutable_data(), static_cast<std::int64_t>(values.size()),
                            DType::kFloat32};
            py::gil_scoped_release released;
            e.broadcast_from_rank0(view);
          },
          py::arg("values"), "Overwrites the float32 array `values` in place with rank 0's")
      .def("gather_reduced_grads", &Engine::gather_reduced_grads,
           py::call_guard<py::gil_scoped_release>());
}

void bind_sync(py::class_<Engine>& c) {
  using Release = py::call_guard<py::gil_scoped_release>;
  c.def(
       "register_grad_ready", [](Engine& e, ParamId id) { e.register_grad_ready(id); }, Release())
      .def(
          "finish_grad_sync", [](Engine& e) { e.finish_grad_sync(); }, Release())
      .def(
          "zero_grad_buffer", [](Engine& e) { e.zero_grad_buffer(); }, Release())
      .def(
          "close_microbatch", [](Engine& e) { e.ddp().close_microbatch(); }, Release(),
          "Under reproducible_reduction: sets this micro-batch's grads aside (end of a backward "
          "inside no_sync)")
      .def("set_is_last_microbatch",
           [](Engine& e, bool last) { e.ddp().set_is_last_microbatch(last); })
      .def("is_last_microbatch", [](const Engine& e) { return e.ddp().is_last_microbatch(); })
      .def("bucket_group_of",
           [](const Engine& e, ParamId id) { return e.ddp().bucket_group_of(id); })
      .def("num_bucket_groups",
           [](const Engine& e) { return static_cast<int>(e.ddp().bucket_groups().size()); })
      .def("groups_dispatched",
           [](const Engine& e) {
             int n = 0;
             for (const auto& g : e.ddp().bucket_groups()) n += g->grad_sync_dispatched() ? 1 : 0;
             return n;
           })
      .def(
          "finish_param_sync", [](Engine& e, int group) { e.ddp().finish_param_sync(group); },
          Release())
      .def(
          "finish_all_param_sync", [](Engine& e) { e.ddp().finish_all_param_sync(); }, Release())
      .def("overlap_param_gather",
           [](const Engine& e) { return e.ddp().config().overlap_param_gather; })
      .def(
          "all_reduce_sum",
          [](Engine& e, double value) {
            return optim::all_reduce_sum_exact(*e.data_parallel_group(), value);
          },
          Release())
      .def(
          "ranks_using",
          [](Engine& e, const std::vector<bool>& used_here) {
            std::vector<std::int64_t> counts(used_here.begin(), used_here.end());
            if (!counts.empty()) {
              e.data_parallel_group()
                  ->all_reduce(TensorView{counts.data(), static_cast<std::int64_t>(counts.size()),
                                          DType::kInt64},
                               ReduceOp::kSum)
                  ->wait();
            }
            return counts;
          },
          py::arg("used_here"), Release(),
          "Per param, how many data-parallel ranks used it (a collective: every rank calls it "
          "with one flag per param)");
}

void bind_optimizer(py::class_<Engine>& c) {
  c.def(
       "make_optimizer",
       [](Engine& e, const std::string& kind, const py::dict& options, bool torch_rules) {
         OptimizerConfig defaults = kDefaultOptimizerConfig;
         defaults.kind = kind_from_name(kind);
         const OptimizerConfig spec = spec_from_keywords(defaults, options);
         if (!torch_rules) check_decoupled_decay(spec);
         e.make_optimizer(spec);
         return keywords_of(spec);
       },
       py::arg("kind"), py::arg("options"), py::arg("torch_rules") = false,
       "Builds the optimizer of `kind` with make_optimizer's keywords `options` over the buffers "
       "(the spec's defaults for the rest); returns every keyword's value. The CLI's rules apply "
       "(lr x weight_decay < 1) unless torch_rules (sw.AdamW / sw.Muon: torch allows it)")
      .def("has_optimizer", &Engine::has_optimizer)
      .def("step",
           [](Engine& e) {
             optim::StepResult r;
             {
               py::gil_scoped_release released;
               r = e.step();
             }
             return step_result(r);
           })
      .def(
          "reload_model_params", [](Engine& e) { e.optimizer().reload_model_params(); },
          "Re-reads the optimizer's fp32 main copies of 16-bit params from the param buffer")
      .def("set_lr",
           [](Engine& e, double lr) {
             validate_learning_rate(lr, "lr");
             e.optimizer().set_lr(lr);
           })
      .def(
          "set_param_hyperparameters",
          [](Engine& e, const py::dict& by_param) {
            optim::ParamOverrides overrides;
            for (const auto& [name, values] : by_param) {
              const auto param = name.cast<std::string>();
              overrides[param] = param_overrides_from_python(param, values.cast<py::dict>());
            }
            e.optimizer().set_param_overrides(overrides);
          },
          py::arg("by_param"),
          "Per-param lr / weight_decay / beta1 / beta2 / eps / momentum, by param name, over the "
          "optimizer's own (replaces the previous set)")
      .def(
          "set_params_without_grad",
          [](Engine& e, const std::vector<std::string>& names) {
            e.optimizer().set_params_without_grad({names.begin(), names.end()});
          },
          py::arg("names"),
          "Params (by name) the next steps leave untouched: no grad reached them on any rank "
          "(replaces the previous set)")
      .def("muon_params",
           [](const Engine& e) {
             // Which params Muon steps: the layer-wise kinds' routing, fixed by the layout.
             std::vector<bool> out;
             const bool layer_wise = e.kind() == OptimizerKind::kLayerWise ||
                                     e.kind() == OptimizerKind::kLegacyLayerWise;
             for (const ParamInfo& info : e.ddp().params()) {
               out.push_back(layer_wise && is_managed_by_layer_wise_optimizer(info));
             }
             return out;
           })
      .def("state_dict",
           [](const Engine& e) { return state_to_python(e.optimizer().state_dict()); })
      .def("state_numel",
           [](const Engine& e) {
             std::int64_t n = 0;
             for (const auto& [name, fields] : e.optimizer().state_dict()) {
               for (const auto& [field, values] : fields)
                 n += static_cast<std::int64_t>(values.size());
             }
             return n;
           })
      .def("load_state_dict", [](Engine& e, const py::dict& s) {
        e.optimizer().load_state_dict(state_from_python(s));
      });
}

void bind_checkpoints(py::class_<Engine>& c) {
  c.def(
       "save_checkpoint",
       [](Engine& e, const std::string& root, std::int64_t step, std::int64_t consumed_samples,
          int keep_last, const std::string& extra_json) {
         CheckpointSaveRequest request;
         request.root = root;
         request.step = step;
         request.consumed_samples = consumed_samples;
         request.keep_last = keep_last;
         request.extra = nlohmann::ordered_json::parse(extra_json);
         py::gil_scoped_release released;
         return e.save_checkpoint(std::move(request));
       },
       py::arg("root"), py::arg("step"), py::arg("consumed_samples"), py::arg("keep_last"),
       py::arg("extra_json"))
      .def(
          "load_checkpoint",
          [](Engine& e, const std::string& path, std::optional<std::int64_t> step) {
            LoadedCheckpoint loaded;
            {
              py::gil_scoped_release released;
              e.ddp().finish_all_param_sync();  // no gather may land on top of loaded weights
              const auto dir = resolve_checkpoint_directory(path, step);
              loaded = load_checkpoint(dir, e.model_tensors(), e.optimizer(),
                                       *e.data_parallel_group(), to_string(e.kind()));
            }
            return py::make_tuple(loaded.directory.string(), loaded.step, loaded.consumed_samples,
                                  loaded.manifest.dump());
          },
          py::arg("path"), py::arg("step") = py::none());
}

}  // namespace

void bind_engine(py::module_& m) {
  py::class_<EngineOptions>(m, "EngineOptions")
      .def(py::init<>())
      .def_property(
          "kind", [](const EngineOptions& o) { return std::string(to_string(o.kind)); },
          [](EngineOptions& o, const std::string& name) { o.kind = kind_from_name(name); })
      .def_readwrite("bucket_size", &EngineOptions::bucket_size)
      .def_readwrite("overlap_grad_reduce", &EngineOptions::overlap_grad_reduce)
      .def_readwrite("overlap_param_gather", &EngineOptions::overlap_param_gather)
      .def_readwrite("reproducible_reduction", &EngineOptions::reproducible_reduction)
      .def_readwrite("symmetric_buffers", &EngineOptions::symmetric_buffers)
      .def_readwrite("grad_reduce_in_fp32", &EngineOptions::grad_reduce_in_fp32)
      .def_readwrite("all_layer_wise", &EngineOptions::all_layer_wise)
      .def_readwrite("comm_timeout", &EngineOptions::comm_timeout);

  py::class_<Engine> engine(m, "Engine", "DDP buffers + optimizer of one model on this rank");
  engine.def(py::init<ParamList, const EngineOptions&>(), py::arg("params"), py::arg("options"))
      .def_property_readonly("rank", &Engine::rank)
      .def_property_readonly("world_size", &Engine::world_size)
      .def_property_readonly("dp_size",
                             [](const Engine& e) { return e.data_parallel_group()->size(); })
      .def_property_readonly("kind",
                             [](const Engine& e) { return std::string(to_string(e.kind())); });
  bind_buffers(engine);
  bind_sync(engine);
  bind_optimizer(engine);
  bind_checkpoints(engine);

  m.def(
      "optimizer_kinds",
      [] {
        py::list out;
        for (const auto& entry : enum_names(OptimizerKind{})) out.append(std::string(entry.name));
        return out;
      },
      "The optimizer kinds (the spec's names, as `shardwise train`'s optimizer.kind)");
  m.def(
      "optimizer_defaults",
      [] {
        py::dict out = keywords_of(kDefaultOptimizerConfig);
        out["kind"] = std::string(to_string(kDefaultOptimizerConfig.kind));
        return out;
      },
      "make_optimizer's keywords and `kind` with the spec's defaults (those of an empty YAML "
      "optimizer section)");
  m.def(
      "init_mpi",
      [] {
        const ProcessGroupPtr world = init_mpi_world();
        return py::make_tuple(world->rank(), world->size());
      },
      "Initialises MPI (MPI_THREAD_MULTIPLE) unless already done; returns (rank, size)");
  m.def(
      "check_settings_agree",
      [](const std::string& settings_json) {
        const auto settings = nlohmann::ordered_json::parse(settings_json);
        const ProcessGroupPtr world = init_mpi_world();
        py::gil_scoped_release released;
        check_settings_agree(*world, settings);
      },
      py::arg("settings_json"),
      "Collective over the job: ConfigError (a ValueError) on every rank naming the first setting "
      "of the JSON object that differs between ranks");
  m.def("mpi_running", &mpi_running,
        "Whether MPI is initialised (and not finalised) in this process");
  m.def(
      "abort_world", [](const std::string& message) { abort_world(message, 2); },
      "Aborts every rank of the job (exit code 2) after printing message");
}

}  // namespace shardwise::python
