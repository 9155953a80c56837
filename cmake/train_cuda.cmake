# The trainer's CUDA backend: library shardwise_train_cuda from src/train_cuda/*.cpp (the device
# GPT, DDP and optimizer behind train/device_training.hpp), with NCCL when shardwise_nccl is built.
# The CLI links it and registers it at start, so `training.device: cuda` works in CUDA builds;
# elsewhere the trainer refuses that setting with a ConfigError.
if(NOT TARGET shardwise_cuda)
  return()
endif()

shardwise_layer(train_cuda DEPS shardwise_train shardwise_cuda)
target_link_libraries(shardwise_train_cuda PUBLIC shardwise_train shardwise_cuda CUDA::cudart)
if(TARGET shardwise_nccl)
  target_link_libraries(shardwise_train_cuda PUBLIC shardwise_nccl)
  target_compile_definitions(shardwise_train_cuda PRIVATE SHARDWISE_TRAIN_CUDA_NCCL=1)
endif()

if(TARGET shardwise)
  target_link_libraries(shardwise PRIVATE shardwise_train_cuda)
  target_compile_definitions(shardwise PRIVATE SHARDWISE_CUDA_TRAINING=1)
endif()
