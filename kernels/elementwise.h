// Elementwise kernels: unary and binary ops (with broadcasting), cast, fill and random fill, and the
// increment of a count.
// Each function exists in cnn::kernels::cpu (kernels/cpu) and cnn::kernels::cuda (kernels/cuda),
// on raw contiguous buffers, with the same signature: the stream to run on (a cudaStream_t) comes
// last, and the CPU versions ignore it (it defaults to null for direct callers). The engine calls
// them through CNN_KERNEL (engine/backend.h); so do the other kernel headers.
#pragma once
#include <cstdint>

#include "kernels/common/dtype.h"
#include "kernels/common/elementwise_math.h"
#include "kernels/common/philox.h"

namespace cnn::kernels {

using Stream = void*;

#define CNN_ELEMENTWISE_KERNELS(...)                                                                       \
  void unary_forward(UnaryOp op, DType dt, const void* x, void* y, int64_t n, double p0, double p1          \
                         __VA_ARGS__);                                                                     \
  void unary_backward(UnaryOp op, DType dt, const void* x, const void* gy, void* gx, int64_t n, double p0  \
                          __VA_ARGS__);                                                                    \
  /* y[i] = a[ia(i)] op b[ib(i)] for i < n */                                                              \
  void binary_forward(BinaryOp op, DType dt, const void* a, BroadcastIndex ia, const void* b,              \
                      BroadcastIndex ib, void* y, int64_t n __VA_ARGS__);                                  \
  /* Full-size gradients ga[i], gb[i] (either may be null) for i < n; broadcast operands are reduced  */   \
  /* afterwards by reduce_middle_sum. */                                                                   \
  void binary_backward(BinaryOp op, DType dt, const void* a, BroadcastIndex ia, const void* b,             \
                       BroadcastIndex ib, const void* gy, void* ga, void* gb, int64_t n __VA_ARGS__);      \
  void cast(DType from, const void* x, DType to, void* y, int64_t n __VA_ARGS__);                          \
  void fill(DType dt, void* y, int64_t n, double value __VA_ARGS__);                                       \
  /* y[i] = philox_element(kind, seed, stream_id, i, a, b) rounded to dt */                                \
  void random_fill(DType dt, void* y, int64_t n, RandomKind kind, uint64_t seed, uint64_t stream_id,       \
                   double a, double b __VA_ARGS__);                                                  \
  /* counter[0] += 1 for one i64 count (BatchNorm's num_batches_tracked), on the device */              \
  void increment_count(void* counter __VA_ARGS__);

namespace cpu {
CNN_ELEMENTWISE_KERNELS(, Stream stream = nullptr)
}
namespace cuda {
CNN_ELEMENTWISE_KERNELS(, Stream stream)
}
#undef CNN_ELEMENTWISE_KERNELS

}  // namespace cnn::kernels
