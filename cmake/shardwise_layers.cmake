# shardwise_layer(NAME DEPS ...) builds one layer (docs/design.md):
#   library   shardwise_NAME     from src/NAME/*.cpp (skipped while the layer has no sources)
#   test      test_NAME          from tests/NAME/*.cpp, single process (GoogleTest)
#   mpi tests test_NAME_mpi      from tests/NAME/mpi/*.cpp, run by CTest under mpirun -np 2 and 4
#                                (labels mpi and mpi_npN; the ASan run of scripts/test.sh runs np 2)
# Globs keep CMakeLists free of per-file edits; CONFIGURE_DEPENDS re-globs on every build.
set(SHARDWISE_MPIEXEC_ENV
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
    OPENBLAS_NUM_THREADS=1 OMPI_MCA_rmaps_base_oversubscribe=1)
# Debian's OpenBLAS 0.3.21 misdetects newer CPUs and falls back to generic kernels: name the core
# type for test runs from the CPU flags (scripts/env.sh does the same for jobs).
if(EXISTS /proc/cpuinfo AND NOT DEFINED ENV{OPENBLAS_CORETYPE})
  file(READ /proc/cpuinfo _cpuinfo)
  if(_cpuinfo MATCHES " avx512f ")
    list(APPEND SHARDWISE_MPIEXEC_ENV OPENBLAS_CORETYPE=SkylakeX)
  elseif(_cpuinfo MATCHES " avx2 ")
    list(APPEND SHARDWISE_MPIEXEC_ENV OPENBLAS_CORETYPE=Haswell)
  endif()
endif()

function(shardwise_layer name)
  cmake_parse_arguments(L "" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  set(lib shardwise_${name})
  if(srcs)
    add_library(${lib} STATIC ${srcs})
    target_include_directories(${lib} PUBLIC ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(${lib} PUBLIC ${L_DEPS})
  else()
    add_library(${lib} INTERFACE)
    target_include_directories(${lib} INTERFACE ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(${lib} INTERFACE ${L_DEPS})
  endif()

  file(GLOB tests CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/${name}/*.cpp)
  if(tests)
    # Every single-process test binary carries the Open MPI leak suppressions (used under ASan).
    add_executable(test_${name} ${tests} ${PROJECT_SOURCE_DIR}/tests/lsan_suppressions.cpp)
    target_link_libraries(test_${name} PRIVATE ${lib} GTest::gtest_main)
    target_include_directories(test_${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
    add_test(NAME ${name} COMMAND test_${name})
    set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 600
                         ENVIRONMENT "${SHARDWISE_MPIEXEC_ENV}")
  endif()

  file(GLOB mpi_tests CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/${name}/mpi/*.cpp)
  if(mpi_tests)
    add_executable(test_${name}_mpi ${mpi_tests} ${PROJECT_SOURCE_DIR}/tests/mpi_main.cpp
                   ${PROJECT_SOURCE_DIR}/tests/lsan_suppressions.cpp)
    target_link_libraries(test_${name}_mpi PRIVATE ${lib} GTest::gtest MPI::MPI_CXX)
    target_include_directories(test_${name}_mpi PRIVATE ${PROJECT_SOURCE_DIR}/tests)
    foreach(np 2 4)
      add_test(NAME ${name}_mpi_np${np}
               COMMAND ${CMAKE_COMMAND} -E env ${SHARDWISE_MPIEXEC_ENV}
                       ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} --oversubscribe
                       $<TARGET_FILE:test_${name}_mpi>)
      set_tests_properties(${name}_mpi_np${np} PROPERTIES LABELS "mpi;mpi_np${np}" TIMEOUT 300)
    endforeach()
  endif()
endfunction()
