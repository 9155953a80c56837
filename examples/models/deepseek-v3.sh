#!/usr/bin/env bash
# The DeepSeek-V3-sized spec (30,428 params, ~3.3 MB of JSON) is not bundled as a file; this
# regenerates it next to the other examples. `shardwise layout --model deepseek-v3` also works
# without the file. MLA attention is simplified to its plain low-rank matrices (see model_zoo.hpp).
# Usage: examples/models/deepseek-v3.sh [PATH/TO/shardwise]
# Without an argument it uses the repository's build/bin/shardwise, else `shardwise` on PATH.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ $# -ge 1 ]]; then
  shardwise=$1
elif [[ -x "$here/../../build/bin/shardwise" ]]; then
  shardwise="$here/../../build/bin/shardwise"
elif command -v shardwise >/dev/null; then
  shardwise=shardwise
else
  echo "deepseek-v3.sh: no shardwise binary: build it (scripts/build.sh) or pass its path" >&2
  exit 2
fi
"$shardwise" model-spec --arch deepseek-v3 --out "$here/deepseek-v3.json"
