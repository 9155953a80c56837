// Newton–Schulz orthogonalisation (Muon's core) on a row-major fp32 matrix.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "shardwise/core/error.hpp"
#include "shardwise/optim/newton_schulz.hpp"

namespace py = pybind11;

namespace shardwise::python {

void bind_newton_schulz(py::module_& m) {
  m.def(
      "newton_schulz",
      [](const py::array_t<float, py::array::c_style | py::array::forcecast>& g, int steps,
         const std::string& coefficients) {
        SW_REQUIRE(g.ndim() == 2, ShapeError, "newton_schulz: expected a 2-D matrix, got ",
                   g.ndim(), " dims");
        SW_REQUIRE(steps >= 1, InvalidArgument, "newton_schulz: steps must be >= 1, got ", steps);
        optim::NewtonSchulzOptions options;
        options.steps = steps;
        options.coefficients = optim::parse_ns_coefficients(coefficients, "coefficients");
        const std::int64_t rows = g.shape(0), cols = g.shape(1);
        py::array_t<float> out({rows, cols});
        const float* in = g.data();
        float* dst = out.mutable_data();
        {
          py::gil_scoped_release released;
          optim::NewtonSchulz(options).orthogonalize(in, rows, cols, dst);
        }
        return out;
      },
      py::arg("g"), py::arg("steps"), py::arg("coefficients"),
      "NS(g) for a 2-D fp32 matrix: the approximate polar factor U V^T");
}

}  // namespace shardwise::python
