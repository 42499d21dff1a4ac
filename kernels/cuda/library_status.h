// The one way cuBLAS and cuDNN return codes are checked: by the library-call files of the kernels
// (gemm.cpp, conv_cudnn.cpp) and by the engine's CUDA context, which creates the handles. A failed
// call throws cnn::Error naming the call, the library's status and what to try. Library-call files
// only: kernel files (.cu) stay free of cuBLAS and cuDNN headers.
#pragma once
#include <cublas_v2.h>
#include <cudnn.h>

#include "kernels/common/error.h"

namespace cnn::kernels::cuda {

// What to try after a failed library call: most often an earlier asynchronous CUDA error, or
// exhausted GPU memory.
constexpr const char* kLibraryFailureHint =
    " (an earlier asynchronous CUDA error can surface here: rerun with CUDA_LAUNCH_BLOCKING=1 to find it; "
    "if GPU memory is exhausted, lower the batch size)";

// `call` names the library function or what it was doing, e.g. "cublasGemmEx" or "cudnnCreate on cuda:0".
// A failure to allocate device memory inside the library is a LibraryOutOfMemory (retried by the
// engine after emptying its cache); any other failure a plain cnn::Error.
inline void check_cublas(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_ALLOC_FAILED)
    throw LibraryOutOfMemory(detail::concat("cuBLAS ", call, " failed: ", cublasGetStatusString(status),
                                            " (it could not allocate GPU memory of its own)"));
  CNN_CHECK(status == CUBLAS_STATUS_SUCCESS, "cuBLAS ", call, " failed: ", cublasGetStatusString(status),
            kLibraryFailureHint);
}

inline void check_cudnn(cudnnStatus_t status, const char* call) {
  if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
    throw LibraryOutOfMemory(detail::concat("cuDNN ", call, " failed: ", cudnnGetErrorString(status),
                                            " (it could not allocate GPU memory of its own)"));
  CNN_CHECK(status == CUDNN_STATUS_SUCCESS, "cuDNN ", call, " failed: ", cudnnGetErrorString(status),
            kLibraryFailureHint);
}

}  // namespace cnn::kernels::cuda
