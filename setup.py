"""Builds the extension shardwise._core with the project's CMake build for `pip install .`.

The pure-Python modules come from python/shardwise; the extension is the CMake target
shardwise_python_core, built (alone, no CLI / benchmarks / CUDA) in build-pip-py<version> with
the interpreter pip runs, then copied where setuptools packs it. Environment:
SHARDWISE_PIP_BUILD_DIR overrides that directory; SHARDWISE_JOBS sets the build's parallelism.
"""

import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


class CMakeTarget(Extension):
    def __init__(self, name, target):
        super().__init__(name, sources=[])
        self.target = target


class BuildWithCMake(build_ext):
    def build_extension(self, ext):
        version = f"py{sys.version_info.major}{sys.version_info.minor}"
        build_dir = pathlib.Path(os.environ.get("SHARDWISE_PIP_BUILD_DIR",
                                                ROOT / f"build-pip-{version}"))
        env = dict(os.environ)
        env.setdefault("CCACHE_BASEDIR", str(ROOT))  # share compiled objects with other builds
        configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir),
                     "-DCMAKE_BUILD_TYPE=Release", f"-DPython_EXECUTABLE={sys.executable}",
                     "-DSHARDWISE_BUILD_PYTHON=ON", "-DSHARDWISE_BUILD_APPS=OFF",
                     "-DSHARDWISE_BUILD_BENCH=OFF", "-DSHARDWISE_CUDA_AUTO=OFF"]
        if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").exists():
            configure += ["-G", "Ninja"]
        subprocess.run(configure, check=True, env=env)
        jobs = env.get("SHARDWISE_JOBS", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build_dir), "--target", ext.target, "-j", jobs],
                       check=True, env=env)
        built = next((build_dir / "python" / "shardwise").glob("_core*.so"), None)
        if built is None:
            raise RuntimeError(f"the CMake build in {build_dir} made no shardwise/_core*.so")
        destination = pathlib.Path(self.get_ext_fullpath(ext.name))
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, destination)


(ROOT / "build-pip").mkdir(exist_ok=True)  # egg_base must exist before egg_info runs
setup(
    packages=["shardwise", "shardwise.torch"],
    package_dir={"": "python"},
    ext_modules=[CMakeTarget("shardwise._core", "shardwise_python_core")],
    cmdclass={"build_ext": BuildWithCMake},
    options={"build": {"build_base": "build-pip/setuptools"},
             "egg_info": {"egg_base": "build-pip"}},
)
