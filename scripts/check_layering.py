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

# How docs/architecture.md names the external libraries the build links.
external_names = {
    "nlohmann_json::nlohmann_json": "nlohmann-json", "OpenMP::OpenMP_CXX": "OpenMP",
    "Threads::Threads": "Threads", "${BLAS_LIBRARIES}": "BLAS", "MPI::MPI_CXX": "MPI",
    "yaml-cpp": "yaml-cpp", "PkgConfig::RE2": "RE2", "CUDA::cudart": "CUDA runtime",
    "CUDA::cublas": "cuBLAS", "NCCL::nccl": "NCCL",
}

deps = {}
externals = {}


def add_links(layer, link_text):
    deps.setdefault(layer, set()).update(dep_name.findall(link_text))
    for word in link_text.split():
        if word in ("PUBLIC", "PRIVATE", "INTERFACE") or dep_name.fullmatch(word):
            continue
        externals.setdefault(layer, set()).add(external_names.get(word, word))


for match in layer_line.finditer((root / "CMakeLists.txt").read_text()):
    add_links(match.group(1), match.group(2))
for cmake in sorted((root / "cmake").glob("*.cmake")):
    for match in link_line.finditer(cmake.read_text()):
        add_links(match.group(1), match.group(2))
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


def table_names(cell):
    return set() if cell in ("—", "-", "") else {name.strip() for name in cell.split(",")}


documented = set()
table_row = re.compile(r"^\| `(\w+)`(?: \(with nvcc\))? \| ([^|]*)\| ([^|]*)\|", re.M)
for match in table_row.finditer((root / "docs" / "architecture.md").read_text()):
    layer = match.group(1)
    if layer not in deps:
        continue
    documented.add(layer)
    said_deps = {name.strip("` ") for name in table_names(match.group(2).strip())}
    if said_deps != deps[layer]:
        violations.append(f"docs/architecture.md: layer {layer} depends on {sorted(deps[layer])} "
                          f"in the build, the table says {sorted(said_deps)}")
    said_externals = table_names(match.group(3).strip())
    if said_externals != externals.get(layer, set()):
        violations.append(f"docs/architecture.md: layer {layer} links "
                          f"{sorted(externals.get(layer, set()))}, the table says "
                          f"{sorted(said_externals)}")
for layer in sorted(set(deps) - documented):
    violations.append(f"docs/architecture.md: no row for layer {layer}")

for line in violations:
    print(line)
if violations:
    sys.exit(1)
print(f"layering: {checked} files in {len(deps)} layers include only the layers they link")
