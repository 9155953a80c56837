#!/usr/bin/env bash
# The DeepSeek-V3-sized spec (30,428 params, ~3.3 MB of JSON) is not bundled as a file; this
# regenerates it next to the other examples. `shardwise layout --model deepseek-v3` also works
# without the file. MLA attention is simplified to its plain low-rank matrices (see model_zoo.hpp).
# Usage: examples/models/deepseek-v3.sh [PATH/TO/shardwise]
set -euo pipefail
shardwise=${1:-shardwise}
"$shardwise" model-spec --arch deepseek-v3 --out "$(dirname "$0")/deepseek-v3.json"
