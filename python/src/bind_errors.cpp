// shardwise::Error and its subclasses surface as Python exceptions: shardwise.Error (a
// ValueError) and one subclass per C++ error type, so callers can catch precisely or broadly.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "shardwise/core/error.hpp"

namespace py = pybind11;

namespace shardwise::python {

void bind_errors(py::module_& m) {
  // pybind11 tries translators newest first, so the base class is registered before the
  // subclasses: a subclass is caught by its own translator.
  auto& base = py::register_exception<Error>(m, "Error", PyExc_ValueError);
  py::register_exception<InvalidArgument>(m, "InvalidArgument", base.ptr());
  py::register_exception<ConfigError>(m, "ConfigError", base.ptr());
  py::register_exception<FormatError>(m, "FormatError", base.ptr());
  py::register_exception<ShapeError>(m, "ShapeError", base.ptr());
  py::register_exception<CommError>(m, "CommError", base.ptr());
  py::register_exception<IoError>(m, "IoError", base.ptr());
  py::register_exception<InvariantError>(m, "InvariantError", base.ptr());
}

}  // namespace shardwise::python
