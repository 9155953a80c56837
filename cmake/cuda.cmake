# CUDA kernels: library shardwise_cuda from src/cuda/*.cu and *.cpp (MXFP8 quantize / dequantize,
# fused AdamW, cuBLAS Newton-Schulz, a Muon step, grad norm / clip / zero count, the device GPT)
# and the test binary test_cuda from tests/cuda/*.cpp, which skips itself when no GPU is present.
# It sits above optim and model: the device optimizer pieces take optim's options and step
# scalars, and the device GPT model's parameter list and initialisation, so both paths share one
# definition of the hyper-parameters, coefficient sets and weights.
#
# When it is built:
#   -DSHARDWISE_CUDA=ON         always (configuring fails without a CUDA compiler)
#   -DSHARDWISE_CUDA_AUTO=ON    (default) also when nvcc is found: CMAKE_CUDA_COMPILER, nvcc on
#                               PATH or /usr/local/cuda/bin/nvcc. Not in sanitizer builds (ASan
#                               and the CUDA runtime do not mix without extra options).
#   -DSHARDWISE_CUDA_AUTO=OFF   with SHARDWISE_CUDA=OFF: never.
# One architecture (SHARDWISE_CUDA_ARCHITECTURES, default 90 = H100) keeps the compile short.
option(SHARDWISE_CUDA_AUTO "Build the CUDA kernels when nvcc is found" ON)
set(SHARDWISE_CUDA_ARCHITECTURES "90" CACHE STRING "CUDA architectures for shardwise_cuda")

set(shardwise_cuda_build OFF)
if(SHARDWISE_CUDA)
  set(shardwise_cuda_build ON)
elseif(SHARDWISE_CUDA_AUTO AND NOT SHARDWISE_SANITIZE)
  if(CMAKE_CUDA_COMPILER)
    set(shardwise_cuda_build ON)
  else()
    find_program(SHARDWISE_NVCC nvcc HINTS /usr/local/cuda/bin)
    if(SHARDWISE_NVCC)
      set(shardwise_cuda_build ON)
    endif()
  endif()
endif()

if(NOT shardwise_cuda_build)
  message(STATUS "shardwise: CUDA kernels off (no nvcc, SHARDWISE_CUDA_AUTO=OFF, or a sanitizer build)")
  return()
endif()

if(NOT CMAKE_CUDA_COMPILER)
  if(SHARDWISE_NVCC)
    set(CMAKE_CUDA_COMPILER ${SHARDWISE_NVCC})
  elseif(EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES ${SHARDWISE_CUDA_ARCHITECTURES})
endif()
enable_language(CUDA)
# CUDA sources use the project's C++20 (the shardwise headers need it). CMake 3.25 predates nvcc's
# C++20 support and knows no flag for it; nvcc >= 12 takes -std=c++20.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND
   CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
set(CMAKE_CUDA_STANDARD 20)
# Dependencies of shardwise_core carry /usr/include as an include directory; CMake drops it for
# g++ (implicit) but would pass it to nvcc as -isystem, which breaks libstdc++'s #include_next.
list(APPEND CMAKE_CUDA_IMPLICIT_INCLUDE_DIRECTORIES /usr/include)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
find_package(CUDAToolkit REQUIRED)
message(STATUS "shardwise: CUDA kernels on (${CMAKE_CUDA_COMPILER}, "
               "CUDA ${CUDAToolkit_VERSION}, arch ${CMAKE_CUDA_ARCHITECTURES})")

file(GLOB shardwise_cuda_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cuda/*.cu
     ${PROJECT_SOURCE_DIR}/src/cuda/*.cpp)
add_library(shardwise_cuda STATIC ${shardwise_cuda_sources})
target_include_directories(shardwise_cuda PUBLIC ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(shardwise_cuda PUBLIC shardwise_optim shardwise_model shardwise_reshard PRIVATE CUDA::cudart CUDA::cublas)
# One (shared) CUDA runtime. Executables that link this library are linked by g++, which adds
# nvcc's implicit runtime libraries but not their directory: export it.
set_target_properties(shardwise_cuda PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
target_link_directories(shardwise_cuda INTERFACE ${CUDAToolkit_LIBRARY_DIR})
# The project-wide -Wall/-Wpedantic/-Werror are g++ flags that nvcc does not take; give nvcc its
# own warnings-as-errors and pass the g++ ones to the host compiler. The .cpp files (host code
# around cuBLAS) keep the project's g++ flags.
set_target_properties(shardwise_cuda PROPERTIES COMPILE_OPTIONS "")
set(shardwise_cuda_werror "")
set(shardwise_cxx_werror "")
if(SHARDWISE_WERROR)
  set(shardwise_cuda_werror --Werror=all-warnings -Xcompiler=-Werror)
  set(shardwise_cxx_werror -Werror)
endif()
foreach(flag -Xcompiler=-Wall -Xcompiler=-Wextra ${shardwise_cuda_werror})
  target_compile_options(shardwise_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${flag}>)
endforeach()
foreach(flag -Wall -Wextra -Wpedantic -ffp-contract=off ${shardwise_cxx_werror})
  target_compile_options(shardwise_cuda PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${flag}>)
endforeach()

file(GLOB shardwise_cuda_tests CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/cuda/*.cpp)
if(shardwise_cuda_tests)
  add_executable(test_cuda ${shardwise_cuda_tests})
  target_link_libraries(test_cuda PRIVATE shardwise_cuda GTest::gtest_main)
  add_test(NAME cuda COMMAND test_cuda)
  set_tests_properties(cuda PROPERTIES LABELS "unit;cuda" TIMEOUT 300)
endif()

# Multi-rank GPU tests (tests/cuda/mpi), run under mpirun by scripts/gpu_check.sh only: not a
# ctest test (it needs a GPU and mpirun; without a GPU every case skips).
file(GLOB shardwise_cuda_mpi_tests CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/cuda/mpi/*.cpp)
if(shardwise_cuda_mpi_tests)
  add_executable(test_cuda_mpi ${shardwise_cuda_mpi_tests} ${PROJECT_SOURCE_DIR}/tests/mpi_main.cpp)
  target_link_libraries(test_cuda_mpi PRIVATE shardwise_cuda GTest::gtest MPI::MPI_CXX)
  target_include_directories(test_cuda_mpi PRIVATE ${PROJECT_SOURCE_DIR}/tests)
endif()

# GPU benchmarks (bench/cuda/<name>.cpp -> bench_<name>), each next to a limit measured in the
# same run (device copy, cuBLAS GEMM); they exit 0 without a GPU.
if(SHARDWISE_BUILD_BENCH)
  file(GLOB shardwise_cuda_benches CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/bench/cuda/*.cpp)
  foreach(source ${shardwise_cuda_benches})
    get_filename_component(name ${source} NAME_WE)
    add_executable(bench_${name} ${source})
    target_link_libraries(bench_${name} PRIVATE shardwise_cuda CUDA::cudart CUDA::cublas)
  endforeach()
endif()

# `shardwise version` says whether (and for which architectures) the CUDA kernels were built.
if(TARGET shardwise)
  target_compile_definitions(shardwise PRIVATE
                             SHARDWISE_CUDA_ARCHITECTURES="${CMAKE_CUDA_ARCHITECTURES}")
endif()
