// What the oneDNN call sites of the CPU kernels share (kernels/cpu/conv_onednn.cpp,
// kernels/cpu/gemm_onednn.cpp): the CPU engine, the thread count a primitive is made for, and the
// per-thread buffers that calls reuse instead of allocating. Built only with oneDNN.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

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

// Whether oneDNN picked its reference loops (an implementation name "ref:..."), which are slower
// than our own paths: the call sites decline those.
inline bool is_reference(const std::string& implementation) { return implementation.rfind("ref", 0) == 0; }

// The value made by make() for `key`, made once (under the lock: primitive creation is once per
// key) and kept for the process. One cache per call site (each passes its own lambda type).
template <class Key, class Value, class Make>
const Value& cached(const Key& key, Make make) {
  static std::mutex mutex;
  static std::map<Key, std::unique_ptr<Value>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Value>& entry = cache[key];
  if (!entry) entry = make();
  return *entry;
}

}  // namespace cnn::kernels::cpu::onednn
