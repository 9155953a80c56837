// A layout buffer as the plain dict the Python layout module wraps (shared by the layout and
// engine bindings).
#pragma once

#include <pybind11/pybind11.h>

#include "shardwise/layout/param_layout.hpp"

namespace shardwise::python {

pybind11::dict buffer_to_dict(const BufferKey& key, const PerBufferParamLayout& layout);

}  // namespace shardwise::python
