// The optimizer spec (OptimizerConfig, config/optimizer_config.hpp) under the keyword names of
// shardwise.torch.make_optimizer. The Python package declares no kinds, defaults or choices of
// its own: it reads them from here, and here they come from the spec.
#pragma once

#include <pybind11/pybind11.h>

#include "shardwise/config/optimizer_config.hpp"

namespace shardwise::python {

// `defaults` with each keyword of `options` (a dict of make_optimizer's keywords) applied,
// then range-checked with the YAML config's checks under the Python names ("betas[0]").
// TypeError for a keyword that is not one; shardwise.Error (a ValueError) for a bad value.
OptimizerConfig spec_from_keywords(const OptimizerConfig& defaults, const pybind11::dict& options);

// The CLI's decoupled-decay rule (lr x weight_decay < 1 for both learning rates) under the
// Python names; shardwise.Error otherwise. make_optimizer applies it, sw.AdamW (torch's rules)
// does not.
void check_decoupled_decay(const OptimizerConfig& spec);

// {keyword: value} of every keyword, from `spec` (so from kDefaultOptimizerConfig: the defaults).
pybind11::dict keywords_of(const OptimizerConfig& spec);

}  // namespace shardwise::python
