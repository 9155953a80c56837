# test_cuda_host_emulation: src/cuda/newton_schulz_cuda.cpp, cublas_products.cpp and
# muon_cuda.cpp (the host code around cuBLAS) compiled against the CPU stand-ins in tests/cuda/host_emulation/shims and compared
# with the CPU optimizers. Needs no GPU and no nvcc, so it runs everywhere the unit tests run.
# The sources are copied next to the shims because a quoted #include looks in the including
# file's own folder first; configure_file keeps the copies in step with the originals.
set(shardwise_emulation_dir ${CMAKE_BINARY_DIR}/cuda_host_emulation)
set(shardwise_shims_dir ${PROJECT_SOURCE_DIR}/tests/cuda/host_emulation/shims)
file(GLOB_RECURSE shardwise_emulation_shims RELATIVE ${shardwise_shims_dir} CONFIGURE_DEPENDS
     ${shardwise_shims_dir}/*.hpp)
foreach(shim ${shardwise_emulation_shims})
  configure_file(${shardwise_shims_dir}/${shim} ${shardwise_emulation_dir}/${shim} COPYONLY)
endforeach()
foreach(name newton_schulz_cuda cublas_products muon_cuda)
  configure_file(${PROJECT_SOURCE_DIR}/src/cuda/${name}.cpp ${shardwise_emulation_dir}/${name}.cpp
                 COPYONLY)
endforeach()
# Real private headers that include shimmed ones travel along, so their includes find the shims.
configure_file(${PROJECT_SOURCE_DIR}/src/cuda/cublas_products.hpp
               ${shardwise_emulation_dir}/cublas_products.hpp COPYONLY)
add_executable(test_cuda_host_emulation
               ${PROJECT_SOURCE_DIR}/tests/cuda/host_emulation/cuda_host_emulation_test.cpp
               ${shardwise_emulation_dir}/newton_schulz_cuda.cpp
               ${shardwise_emulation_dir}/cublas_products.cpp
               ${shardwise_emulation_dir}/muon_cuda.cpp)
# The shims (device_buffer.hpp among them) come before the real headers.
target_include_directories(test_cuda_host_emulation BEFORE PRIVATE ${shardwise_emulation_dir})
target_link_libraries(test_cuda_host_emulation PRIVATE shardwise_optim ${BLAS_LIBRARIES}
                                                       GTest::gtest_main)
set_target_properties(test_cuda_host_emulation PROPERTIES UNITY_BUILD OFF)
add_test(NAME cuda_host_emulation COMMAND test_cuda_host_emulation)
set_tests_properties(cuda_host_emulation PROPERTIES LABELS "unit" TIMEOUT 300)
