// CNN_HD marks functions compiled for both host and device. Under nvcc it is __host__ __device__;
// under the host compiler (CPU backend, host emulation of CUDA kernels) it is empty.
#pragma once
#if defined(__CUDACC__)
#define CNN_HD __host__ __device__ __forceinline__
#else
#define CNN_HD inline
#endif
