// The engine's public API in one include: tensors, the autograd tape, ops, devices and memory.
#pragma once
#include "engine/allocator.h"
#include "engine/config.h"
#include "engine/cpu_convolutions.h"
#include "engine/cpu_threads.h"
#include "engine/cuda_context.h"
#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/ops.h"
#include "engine/shape.h"
#include "engine/tape.h"
#include "engine/tensor.h"
