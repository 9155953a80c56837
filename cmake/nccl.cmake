# NCCL process group: library shardwise_nccl from src/nccl/*.cpp (the ProcessGroup backend for
# buffers in GPU memory, bootstrapped over an MPI group) and the multi-rank test binary
# test_nccl_mpi from tests/nccl/mpi/*.cpp, which skips itself without a GPU per rank. Built with
# the CUDA kernels (cmake/cuda.cmake) when nccl.h and libnccl are found: in the CUDA toolkit, under
# NCCL_HOME / -DSHARDWISE_NCCL_ROOT, or in PyTorch's nvidia-nccl wheel of the python3 on PATH.
# The library is linked by its soname (libnccl.so.2), so the GPU machine's own NCCL (a wheel's)
# is the one loaded at run time.
if(NOT TARGET shardwise_cuda)
  return()
endif()

set(SHARDWISE_NCCL_ROOT "$ENV{NCCL_HOME}" CACHE PATH "Where NCCL is installed (include/, lib/)")
set(_nccl_hints ${SHARDWISE_NCCL_ROOT} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
find_program(_nccl_python python3)
if(_nccl_python)
  execute_process(
    COMMAND ${_nccl_python} -c "import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])"
    OUTPUT_VARIABLE _nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_nccl_wheel)
    list(APPEND _nccl_hints ${_nccl_wheel})
  endif()
endif()
find_path(SHARDWISE_NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
          PATH_SUFFIXES include)
find_library(SHARDWISE_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints}
             ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
if(NOT SHARDWISE_NCCL_INCLUDE_DIR OR NOT SHARDWISE_NCCL_LIBRARY)
  message(STATUS "shardwise: NCCL process group off (nccl.h or libnccl not found; set NCCL_HOME)")
  return()
endif()
message(STATUS "shardwise: NCCL process group on (${SHARDWISE_NCCL_LIBRARY})")

add_library(NCCL::nccl UNKNOWN IMPORTED)
set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION ${SHARDWISE_NCCL_LIBRARY}
                                            INTERFACE_INCLUDE_DIRECTORIES ${SHARDWISE_NCCL_INCLUDE_DIR})

shardwise_layer(nccl DEPS shardwise_comm)
target_link_libraries(shardwise_nccl PUBLIC shardwise_comm CUDA::cudart NCCL::nccl)

# shardwise_layer runs test_nccl_mpi at 2 and 4 ranks; one rank is the case a one-GPU machine
# runs in full.
if(TARGET test_nccl_mpi)
  add_test(NAME nccl_mpi_np1
           COMMAND ${CMAKE_COMMAND} -E env ${SHARDWISE_MPIEXEC_ENV} ${MPIEXEC_EXECUTABLE}
                   ${MPIEXEC_NUMPROC_FLAG} 1 $<TARGET_FILE:test_nccl_mpi>)
  set_tests_properties(nccl_mpi_np1 PROPERTIES LABELS "mpi;cuda" TIMEOUT 300)
endif()
