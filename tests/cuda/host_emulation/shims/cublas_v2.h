// Host stand-in for the cuBLAS header: the declarations the emulated host code uses.
#pragma once

#include "cuda_status.hpp"
