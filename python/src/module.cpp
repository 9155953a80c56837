// shardwise._core: the C++ engine behind the Python package. The Python modules in
// python/shardwise wrap these functions into Megatron-shaped objects and torch tensors.
#include "bindings.hpp"

PYBIND11_MODULE(_core, m) {
  m.doc() = "shardwise C++ engine (layouts, MXFP8, Newton-Schulz, DDP buffers, optimizers)";
  shardwise::python::bind_errors(m);
  shardwise::python::bind_layout(m);
  shardwise::python::bind_mxfp8(m);
  shardwise::python::bind_newton_schulz(m);
  shardwise::python::bind_engine(m);
  shardwise::python::bind_data(m);
}
