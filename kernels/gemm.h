// Row-major GEMM: C[M,N] = alpha * op(A) * op(B) + beta * C, op = transpose when the flag is set.
// lda/ldb/ldc are row strides in elements. CPU: OpenBLAS (f16/bf16 go through float copies).
// CUDA: cuBLAS, f32 accumulation for every floating type, tensor-op math for f16/bf16; f32 inputs
// use plain f32 math, or TF32 tensor cores when `allow_tf32` (10-bit mantissa products, f32 sums,
// like torch.backends.cuda.matmul.allow_tf32).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/dtype.h"

namespace cnn::kernels {

using Stream = void*;

struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
};

// Both backends take cuBLAS's resources: `cublas_handle`, a cublasHandle_t owned by the caller (the
// engine's CUDA context), and `workspace` (workspace_bytes; may be null/0 for cuBLAS's own), device
// memory only GEMMs on `stream` use, and the TF32 policy. The CPU GEMM ignores them (and defaults
// them for direct callers).
#define CNN_GEMM_KERNELS(...)                                                                                          \
  void gemm(DType dt, const GemmShape& s, double alpha, const void* a, const void* b, double beta, void* c             \
            __VA_ARGS__);

namespace cpu {
CNN_GEMM_KERNELS(, void* cublas_handle = nullptr, void* workspace = nullptr, size_t workspace_bytes = 0,
                 bool allow_tf32 = false, Stream stream = nullptr)
}
namespace cuda {
CNN_GEMM_KERNELS(, void* cublas_handle, void* workspace, size_t workspace_bytes, bool allow_tf32, Stream stream)
}
#undef CNN_GEMM_KERNELS

}  // namespace cnn::kernels
