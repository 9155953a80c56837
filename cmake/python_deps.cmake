# Looks for what the Python package needs: a Python 3 interpreter with development headers and
# numpy, and pybind11. Sets SHARDWISE_PYTHON_DEPS_FOUND (the default of SHARDWISE_BUILD_PYTHON).
# The Debian interpreter (/usr/bin/python3, which has numpy and torch) is preferred over whatever
# python3 comes first on PATH.
if(NOT DEFINED Python_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "Python interpreter of the shardwise package")
endif()
find_package(Python 3.8 QUIET COMPONENTS Interpreter Development.Module NumPy)
if(Python_FOUND AND Python_NumPy_FOUND)
  set(PYBIND11_FINDPYTHON ON)
  find_package(pybind11 2.6 CONFIG QUIET)
endif()
if(SHARDWISE_SANITIZE)
  set(SHARDWISE_PYTHON_DEPS_FOUND OFF)
elseif(Python_FOUND AND Python_NumPy_FOUND AND pybind11_FOUND)
  set(SHARDWISE_PYTHON_DEPS_FOUND ON)
else()
  set(SHARDWISE_PYTHON_DEPS_FOUND OFF)
  message(STATUS "shardwise Python package: skipped (needs python3-dev, python3-numpy, pybind11-dev)")
endif()
