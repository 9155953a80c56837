#!/usr/bin/env python3
"""Checks that no layer includes the headers of a layer it does not link.

Usage: check_layering.py [REPO_ROOT]

The layer graph is read from the build: `shardwise_layer(NAME DEPS ...)` in CMakeLists.txt and
`target_link_libraries(shardwise_NAME PUBLIC ...)` in cmake/*.cmake. Every `#include
"shardwise/<layer>/..."` in src/<layer>/ and include/shardwise/<layer>/ must name the file's own
layer or one it depends on (directly or through others). Prints each violation and exits 1.
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
layer_line = re.compile(r"^\s*shardwise_layer\((\w+)\s+DEPS([^)]*)\)", re.M)
link_line = re.compile(r"target_link_libraries\(shardwise_(\w+)\s+PUBLIC([^)]*)\)")
dep_name = re.compile(r"\bshardwise_(\w+)\b")
include_line = re.compile(r'^\s*#\s*include\s+"shardwise/(\w+)/', re.M)

deps = {}
for match in layer_line.finditer((root / "CMakeLists.txt").read_text()):
    deps[match.group(1)] = set(dep_name.findall(match.group(2)))
for cmake in sorted((root / "cmake").glob("*.cmake")):
    for match in link_line.finditer(cmake.read_text()):
        deps.setdefault(match.group(1), set()).update(dep_name.findall(match.group(2)))
if not deps:
    sys.exit(f"check_layering: no shardwise_layer(...) found under {root}")


def below(layer, seen=None):
    """Every layer `layer` links, directly or through others."""
    seen = set() if seen is None else seen
    for dep in deps.get(layer, ()):
        if dep not in seen:
            seen.add(dep)
            below(dep, seen)
    return seen


violations = []
checked = 0
for layer in sorted(deps):
    allowed = below(layer) | {layer}
    for folder in (root / "src" / layer, root / "include" / "shardwise" / layer):
        for path in sorted(folder.rglob("*")):
            if path.suffix not in (".cpp", ".hpp", ".cu", ".cuh", ".h"):
                continue
            checked += 1
            for used in include_line.findall(path.read_text()):
                if used not in allowed:
                    violations.append(f"{path.relative_to(root)}: includes shardwise/{used}/, but "
                                      f"layer {layer} does not link {used}")
for line in violations:
    print(line)
if violations:
    sys.exit(1)
print(f"layering: {checked} files in {len(deps)} layers include only the layers they link")
