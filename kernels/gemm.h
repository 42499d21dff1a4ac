// Row-major GEMM: C[M,N] = alpha * op(A) * op(B) + beta * C, op = transpose when the flag is set.
// lda/ldb/ldc are row strides in elements. CPU: OpenBLAS (f16/bf16 go through float copies).
// CUDA: cuBLAS, f32 accumulation for every floating type, tensor-op math for f16/bf16.
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

namespace cpu {
void gemm(DType dt, const GemmShape& s, double alpha, const void* a, const void* b, double beta, void* c);
}
namespace cuda {
// `cublas_handle` is a cublasHandle_t owned by the caller (the engine's CUDA context); `workspace`
// (workspace_bytes, may be null/0 for cuBLAS's own) is device memory only GEMMs on `stream` use.
void gemm(DType dt, const GemmShape& s, double alpha, const void* a, const void* b, double beta, void* c,
          void* cublas_handle, void* workspace, size_t workspace_bytes, Stream stream);
}

}  // namespace cnn::kernels
