# The trainer on CUDA devices: library shardwise_train_cuda from src/train_cuda/*.cpp (the device
# side of train/device_training.hpp), linked into the shardwise CLI, which then accepts
# training.device: cuda. Built with the CUDA kernels (cmake/cuda.cmake); NCCL collectives when
# shardwise_nccl is built too (cmake/nccl.cmake), host-staged MPI otherwise.
if(NOT TARGET shardwise_cuda)
  return()
endif()

file(GLOB shardwise_train_cuda_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/train_cuda/*.cpp)
add_library(shardwise_train_cuda STATIC ${shardwise_train_cuda_sources})
target_include_directories(shardwise_train_cuda PUBLIC ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(shardwise_train_cuda PUBLIC shardwise_train shardwise_cuda CUDA::cudart)
if(TARGET shardwise_nccl)
  target_link_libraries(shardwise_train_cuda PUBLIC shardwise_nccl)
  target_compile_definitions(shardwise_train_cuda PRIVATE SHARDWISE_TRAIN_CUDA_HAS_NCCL=1)
else()
  target_compile_definitions(shardwise_train_cuda PRIVATE SHARDWISE_TRAIN_CUDA_HAS_NCCL=0)
endif()
target_compile_options(shardwise_train_cuda PRIVATE -Wall -Wextra -Wpedantic -Werror)

if(TARGET shardwise)
  target_link_libraries(shardwise PRIVATE shardwise_train_cuda)
  target_compile_definitions(shardwise PRIVATE SHARDWISE_CLI_HAS_CUDA_TRAINING=1)
endif()
