// CUDA GEMM through cuBLAS (this file, not a kernel file, is where cuBLAS headers live).
// Row-major C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T, so A and B swap
// places and no data is transposed. f16/bf16 use tensor-op math with float accumulation (and float
// alpha/beta); f32 uses plain float math, or TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32) when the
// caller allows it (`[precision] tf32`, like torch.backends.cuda.matmul.allow_tf32; off by default
// as in PyTorch); f64 uses double.
#include <limits>
#include <mutex>
#include <string>

#include "kernels/common/dispatch.h"
#include "kernels/cuda/library_status.h"
#include "kernels/gemm.h"

namespace cnn::kernels::cuda {

namespace {
cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::f32: return CUDA_R_32F;
    case DType::f64: return CUDA_R_64F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: fail_not_floating("gemm", dt);
  }
}

// The failed call with its problem, for the error: "cublasGemmEx (f16, C[m,n] = A[m,k] B^T[k,n] with
// m=256 n=1000 k=2048, lda=2048 ldb=2048 ldc=1000, compute 32F)".
[[noreturn]] void fail_gemm(cublasStatus_t status, DType dt, const GemmShape& s, const char* compute) {
  const std::string call = detail::concat(
      "cublasGemmEx (", dtype_name(dt), ", C[m,n] = A", s.trans_a ? "^T" : "", "[m,k] B", s.trans_b ? "^T" : "",
      "[k,n] with m=", s.m, " n=", s.n, " k=", s.k, ", lda=", s.lda, " ldb=", s.ldb, " ldc=", s.ldc, ", compute ", compute, ")");
  check_cublas(status, call.c_str());
  CNN_FAIL("unreachable: ", call);
}

// The device's handle is shared by every thread, and its stream and workspace are settings of the
// handle: a GEMM sets them and enqueues under this lock, so that a thread on another stream (a graph
// capture's, or a caller's own) cannot switch them between another thread's settings and its call
// (the kernel would run on the wrong stream, with a workspace another stream is using). As the
// convolutions' call_mutex; the enqueue itself is asynchronous and short.
std::mutex call_mutex;
}  // namespace

void gemm(DType dt, const GemmShape& s, double alpha, const void* a, const void* b, double beta, void* c,
          void* cublas_handle, void* workspace, size_t workspace_bytes, bool allow_tf32, Stream stream) {
  if (s.m == 0 || s.n == 0) return;
  auto handle = static_cast<cublasHandle_t>(cublas_handle);
  const std::lock_guard<std::mutex> lock(call_mutex);
  // Setting the stream resets the workspace to cuBLAS's own, so the workspace follows it every time.
  check_cublas(cublasSetStream(handle, static_cast<cudaStream_t>(stream)), "cublasSetStream");
  if (workspace != nullptr) check_cublas(cublasSetWorkspace(handle, workspace, workspace_bytes), "cublasSetWorkspace");
  const cublasOperation_t op_a = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType_t type = cuda_type(dt);
  for (const int64_t extent : {s.m, s.n, s.k, s.lda, s.ldb, s.ldc})
    CNN_CHECK(extent <= std::numeric_limits<int>::max(), "gemm: a matrix extent of ", extent,
              " exceeds cuBLAS's 32-bit sizes; split the product into smaller ones");
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  if (dt == DType::f64) {
    const double al = alpha, be = beta;
    const cublasStatus_t status =
        cublasGemmEx(handle, op_b, op_a, n, m, k, &al, b, type, static_cast<int>(s.ldb), a, type, static_cast<int>(s.lda),
                     &be, c, type, static_cast<int>(s.ldc), CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT);
    if (status != CUBLAS_STATUS_SUCCESS) fail_gemm(status, dt, s, "64F");
    return;
  }
  const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
  const cublasComputeType_t compute = dt == DType::f32 && allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cublasStatus_t status = cublasGemmEx(handle, op_b, op_a, n, m, k, &al, b, type, static_cast<int>(s.ldb), a, type,
                                             static_cast<int>(s.lda), &be, c, type, static_cast<int>(s.ldc), compute,
                                             CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) fail_gemm(status, dt, s, compute == CUBLAS_COMPUTE_32F ? "32F" : "32F_FAST_TF32");
}

}  // namespace cnn::kernels::cuda
