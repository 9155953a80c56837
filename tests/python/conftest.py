"""Shared fixtures of the Python suite: the build tree (the `shardwise` CLI next to the package
that is being tested) and a clean environment for launching mpirun from a test."""

import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("SHARDWISE_BUILD_DIR", REPO / "build"))
if str(BUILD / "python") not in sys.path:
    sys.path.insert(0, str(BUILD / "python"))


@pytest.fixture(scope="session")
def cli():
    """Runs `shardwise ARGS...` and returns its stdout (fails the test on a non-zero exit)."""
    binary = BUILD / "bin" / "shardwise"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: build the shardwise CLI first")

    def run(*args):
        done = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True)
        assert done.returncode == 0, f"shardwise {' '.join(map(str, args))}: {done.stderr}"
        return done.stdout
    return run


def launcher_env():
    """The environment for an mpirun started from a test: this process may itself be an MPI
    singleton, whose OMPI_/PMIX_ variables must not leak into the child job."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("OMPI_") or k.startswith("PMIX_") or k.startswith("PRTE_"))}
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BUILD / "python"),
                                                      env.get("PYTHONPATH")]))
    return env


def run_mpi(np, script, *args, timeout=300, extra_env=None):
    """Runs `mpirun -np NP python3 SCRIPT ARGS...` (with `extra_env` added to launcher_env());
    returns the CompletedProcess."""
    command = ["mpirun", "-np", str(np), "--oversubscribe", sys.executable, str(script),
               *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True,
                          env={**launcher_env(), **(extra_env or {})}, timeout=timeout)
