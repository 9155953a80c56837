// Pieces of the shardwise._core extension module; each binds one area of the C++ engine.
#pragma once

#include <pybind11/pybind11.h>

namespace shardwise::python {

void bind_errors(pybind11::module_& m);
void bind_layout(pybind11::module_& m);
void bind_mxfp8(pybind11::module_& m);
void bind_newton_schulz(pybind11::module_& m);
void bind_engine(pybind11::module_& m);
void bind_data(pybind11::module_& m);

}  // namespace shardwise::python
