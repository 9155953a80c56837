// Host stand-in for the CUDA runtime header: the declarations the emulated host code uses.
#pragma once

#include "cuda_status.hpp"
