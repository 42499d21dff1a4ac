#include "kernels/cpu/onednn_context.h"

#include <array>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace cnn::kernels::cpu::onednn {

dnnl::engine& engine() {
  static dnnl::engine cpu(dnnl::engine::kind::cpu, 0);
  return cpu;
}

int threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void* thread_buffer(Buffer which, size_t bytes) {
  // Floats, so that any dtype's data in them is aligned.
  thread_local std::array<std::vector<float>, static_cast<size_t>(Buffer::count)> buffers;
  std::vector<float>& b = buffers[static_cast<size_t>(which)];
  if (b.size() * sizeof(float) < bytes) b.resize((bytes + sizeof(float) - 1) / sizeof(float));
  return b.data();
}

}  // namespace cnn::kernels::cpu::onednn
