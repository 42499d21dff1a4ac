// What the oneDNN call sites of the CPU kernels share (kernels/cpu/conv_onednn.cpp,
// kernels/cpu/gemm_onednn.cpp): the CPU engine, the thread count a primitive is made for, and the
// per-thread buffers that calls reuse instead of allocating. Built only with oneDNN.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>

namespace cnn::kernels::cpu::onednn {

dnnl::engine& engine();

// OpenMP's thread count now: oneDNN's JIT code is generated for the threads it will run on, so a
// primitive is kept per thread count.
int threads();

// A buffer of the calling thread's, grown as needed and kept: scratchpads and reordered operands are
// reused by every call of a step. The buffers one call uses at once are different ones; calls share
// them in turn (no oneDNN call runs inside another on one thread).
enum class Buffer { scratchpad, weights, transposed_weights, pixels, count };
void* thread_buffer(Buffer which, size_t bytes);

}  // namespace cnn::kernels::cpu::onednn
