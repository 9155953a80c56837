#include "optimizer_spec_keywords.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shardwise/config/optimizer_hyperparameters.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/core/message_text.hpp"

namespace py = pybind11;

namespace shardwise::python {
namespace {

struct Keyword {
  std::string name;
  std::function<py::object(const OptimizerConfig&)> get;
  std::function<void(OptimizerConfig&, const py::handle&)> set;
};

// Python's own conversions (float(x), bool(x), int(x)), as torch.optim applies them.
void assign(double& field, const py::handle& value, const std::string&) {
  field = py::float_(py::reinterpret_borrow<py::object>(value)).cast<double>();
}
void assign(bool& field, const py::handle& value, const std::string&) {
  field = py::bool_(py::reinterpret_borrow<py::object>(value)).cast<bool>();
}
// A count: an integer (int, numpy or torch integer), not a float int() would truncate (2.5 ran
// 2 steps while the optimizer's defaults said 2.5) nor a bool. Saturated into int, so a huge
// value is refused by the range check naming the keyword rather than by a cast error.
void assign(int& field, const py::handle& value, const std::string& name) {
  SW_REQUIRE(PyIndex_Check(value.ptr()) && !PyBool_Check(value.ptr()), InvalidArgument, name,
             ": expected an integer, got ", printable(py::repr(value).cast<std::string>(), 64),
             " (", Py_TYPE(value.ptr())->tp_name, ")");
  const py::int_ n(py::reinterpret_borrow<py::object>(value));
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(n.ptr(), &overflow);
  const long long saturated = overflow > 0 ? LLONG_MAX : overflow < 0 ? LLONG_MIN : v;
  field = static_cast<int>(std::clamp<long long>(saturated, INT_MIN, INT_MAX));
}
template <NamedEnum E>
void assign(E& field, const py::handle& value, const std::string& name) {
  field = enum_from_name<E>(py::str(value).cast<std::string>(), name);
}

template <typename T>
py::object to_python(const T& value) {
  if constexpr (NamedEnum<T>) {
    return py::str(std::string(to_string(value)));
  } else {
    return py::cast(value);
  }
}

template <auto Member>
Keyword keyword(std::string name) {
  return Keyword{name, [](const OptimizerConfig& c) { return to_python(c.*Member); },
                 [name](OptimizerConfig& c, const py::handle& v) { assign(c.*Member, v, name); }};
}

// AdamW's betas travel as one (beta1, beta2) pair, as in torch.optim.AdamW.
Keyword betas_keyword() {
  return Keyword{
      "betas", [](const OptimizerConfig& c) { return py::make_tuple(c.adam_beta1, c.adam_beta2); },
      [](OptimizerConfig& c, const py::handle& v) {
        const py::sequence pair = py::reinterpret_borrow<py::sequence>(v);
        SW_REQUIRE(py::isinstance<py::sequence>(v) && py::len(pair) == 2, InvalidArgument,
                   "betas: expected a pair (beta1, beta2)");
        assign(c.adam_beta1, pair[0], "betas[0]");
        assign(c.adam_beta2, pair[1], "betas[1]");
      }};
}

// The one table of make_optimizer's keywords (the user contract: extend, never rename). The
// optimizer kind is make_optimizer's `kind` argument, not a keyword here.
const std::vector<Keyword>& keywords() {
  using C = OptimizerConfig;
  static const std::vector<Keyword> table = {
      keyword<&C::lr>("lr"),
      keyword<&C::muon_lr>("muon_lr"),
      keyword<&C::weight_decay>("weight_decay"),
      betas_keyword(),
      keyword<&C::adam_eps>("eps"),
      keyword<&C::muon_momentum>("momentum"),
      keyword<&C::muon_nesterov>("nesterov"),
      keyword<&C::muon_ns_steps>("ns_steps"),
      keyword<&C::muon_coefficient_set>("coefficients"),
      keyword<&C::muon_ns_algorithm>("ns_algorithm"),
      keyword<&C::muon_scale_mode>("scale_mode"),
      keyword<&C::muon_extra_scale_factor>("extra_scale_factor"),
      keyword<&C::muon_split_qkv>("split_qkv"),
      keyword<&C::muon_matmul_precision>("matmul_precision"),
      keyword<&C::clip_grad>("clip_grad"),
      keyword<&C::overlap_param_gather_with_optimizer_step>(
          "overlap_param_gather_with_optimizer_step"),
  };
  return table;
}

const OptimizerFieldNames& keyword_field_names() {
  static const OptimizerFieldNames names{
      "lr",  "muon_lr",  "weight_decay", "betas[0]",           "betas[1]",
      "eps", "momentum", "ns_steps",     "extra_scale_factor", "clip_grad"};
  return names;
}

std::string keyword_list() {
  std::string out;
  for (const Keyword& k : keywords()) out += str_cat(out.empty() ? "" : ", ", k.name);
  return out;
}

}  // namespace

OptimizerConfig spec_from_keywords(const OptimizerConfig& defaults, const py::dict& options) {
  OptimizerConfig spec = defaults;
  for (const auto& [key, value] : options) {
    const std::string name = py::str(key).cast<std::string>();
    const auto it = std::find_if(keywords().begin(), keywords().end(),
                                 [&name](const Keyword& k) { return k.name == name; });
    if (it == keywords().end()) {
      throw py::type_error(str_cat("make_optimizer() got an unexpected keyword argument '", name,
                                   "' (valid: ", keyword_list(), ")"));
    }
    it->set(spec, value);
  }
  validate(hyperparameters_of(spec), keyword_field_names());
  return spec;
}

void check_decoupled_decay(const OptimizerConfig& spec) {
  validate_decoupled_decay(hyperparameters_of(spec), keyword_field_names());
}

py::dict keywords_of(const OptimizerConfig& spec) {
  py::dict out;
  for (const Keyword& k : keywords()) out[py::str(k.name)] = k.get(spec);
  return out;
}

}  // namespace shardwise::python
