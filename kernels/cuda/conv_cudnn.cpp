// CUDA convolution through cuDNN (this library-call file, not a kernel file, is where cuDNN headers
// live). NHWC tensor and filter descriptors, cross-correlation, f32 accumulation (f64 for f64),
// tensor-op math for f16/bf16; for f32 cuDNN's default math applies (which may use TF32 on tensor
// cores, as PyTorch allows for convolutions by default).
// Algorithm choice per (geometry, dtype, direction, policy) is cached: cuDNN's heuristic ranking by
// default, or measured with cudnnFind* when benchmark mode is on; in deterministic mode the first
// entry of the ranking that cuDNN marks CUDNN_DETERMINISTIC. Each entry of a ranking is an
// (algorithm, math type) pair, and the convolution runs under the math type of the chosen entry (the
// descriptor's initial one only steers the search). Uses cuDNN's v7-style API, which
// cuDNN 9 still ships (deprecated); a later move to the graph API changes only this file.
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "kernels/common/dispatch.h"
#include "kernels/conv.h"
#include "kernels/cuda/library_status.h"

namespace cnn::kernels::cuda {

namespace {
cudnnDataType_t cudnn_type(DType dt) {
  switch (dt) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    default: fail_not_floating("conv2d", dt);
  }
}

// The four descriptors of one convolution, created and destroyed together.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  Descriptors(DType dt, const ConvGeometry& g) {
    const cudnnDataType_t type = cudnn_type(dt);
    check_cudnn(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check_cudnn(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    check_cudnn(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, type, int(g.n), int(g.c), int(g.h), int(g.w)), "input descriptor");
    check_cudnn(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, type, int(g.n), int(g.o), int(g.oh), int(g.ow)),
          "output descriptor");
    check_cudnn(cudnnSetFilter4dDescriptor(w, type, CUDNN_TENSOR_NHWC, int(g.o), int(g.group_in()), int(g.kh), int(g.kw)),
          "filter descriptor");
    check_cudnn(cudnnSetConvolution2dDescriptor(conv, g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dilation_h, g.dilation_w,
                                          CUDNN_CROSS_CORRELATION,
                                          dt == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT),
          "convolution descriptor");
    check_cudnn(cudnnSetConvolutionGroupCount(conv, g.groups), "cudnnSetConvolutionGroupCount");
    const bool half_precision = dt == DType::f16 || dt == DType::bf16;
    check_cudnn(cudnnSetConvolutionMathType(conv, half_precision ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH),
          "cudnnSetConvolutionMathType");
  }
  ~Descriptors() {
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

// An entry of cuDNN's ranking: the algorithm with the math type it was ranked (or timed) under; its
// workspace size and determinism hold for that pair, so the convolution runs with both.
struct Choice {
  int algorithm = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
  const char* name = "";
};

using Key = std::tuple<int, int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int,
                       int, int, int>;

Key key_of(ConvDirection d, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy) {
  return {static_cast<int>(d), static_cast<int>(dt), policy.benchmark, policy.deterministic, g.n, g.h, g.w, g.c, g.o, g.kh, g.kw, g.stride_h,
          g.stride_w, g.pad_h, g.pad_w, g.dilation_h, g.dilation_w, g.groups};
}

std::mutex cache_mutex;
std::map<Key, Choice> cache;

const char* forward_name(int a) {
  static const char* names[] = {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct",
                                "fft", "fft_tiling", "winograd", "winograd_nonfused"};
  return a >= 0 && a < 8 ? names[a] : "unknown";
}
const char* backward_data_name(int a) {
  static const char* names[] = {"algo_0", "algo_1", "fft", "fft_tiling", "winograd", "winograd_nonfused"};
  return a >= 0 && a < 6 ? names[a] : "unknown";
}
const char* backward_filter_name(int a) {
  static const char* names[] = {"algo_0", "algo_1", "fft", "algo_3", "winograd", "winograd_nonfused", "fft_tiling"};
  return a >= 0 && a < 7 ? names[a] : "unknown";
}

// The first usable entry of a cuDNN ranking (heuristic or measured), deterministic if asked.
template <class Perf>
Choice first_usable(const Perf* perf, int count, bool deterministic, const char* (*name)(int), const char* what) {
  for (int i = 0; i < count; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && (!deterministic || perf[i].determinism == CUDNN_DETERMINISTIC))
      return Choice{static_cast<int>(perf[i].algo), perf[i].mathType, perf[i].memory, name(static_cast<int>(perf[i].algo))};
  CNN_FAIL("conv2d: cuDNN found no usable ", deterministic ? "deterministic " : "", what, " algorithm for this geometry",
           deterministic ? "; allow non-deterministic algorithms (cuda::set_cudnn_deterministic(false))"
                         : "; try another dtype, stride or padding");
}

Choice choose(ConvDirection d, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy, cudnnHandle_t handle) {
  const Key key = key_of(d, dt, g, policy);
  const bool benchmark = policy.benchmark;
  {
    std::lock_guard<std::mutex> lock(cache_mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  Descriptors desc(dt, g);
  constexpr int kMax = 8;
  int returned = 0;
  Choice c;
  if (d == ConvDirection::forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMax];
    check_cudnn(benchmark ? cudnnFindConvolutionForwardAlgorithm(handle, desc.x, desc.w, desc.conv, desc.y, kMax, &returned, perf)
                    : cudnnGetConvolutionForwardAlgorithm_v7(handle, desc.x, desc.w, desc.conv, desc.y, kMax, &returned, perf),
          "forward algorithm search");
    c = first_usable(perf, returned, policy.deterministic, forward_name, "forward");
  } else if (d == ConvDirection::backward_data) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
    check_cudnn(benchmark
              ? cudnnFindConvolutionBackwardDataAlgorithm(handle, desc.w, desc.y, desc.conv, desc.x, kMax, &returned, perf)
              : cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, desc.w, desc.y, desc.conv, desc.x, kMax, &returned, perf),
          "backward-data algorithm search");
    c = first_usable(perf, returned, policy.deterministic, backward_data_name, "backward-data");
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
    check_cudnn(benchmark ? cudnnFindConvolutionBackwardFilterAlgorithm(handle, desc.x, desc.y, desc.conv, desc.w, kMax,
                                                                  &returned, perf)
                    : cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, desc.x, desc.y, desc.conv, desc.w, kMax,
                                                                    &returned, perf),
          "backward-filter algorithm search");
    c = first_usable(perf, returned, policy.deterministic, backward_filter_name, "backward-filter");
  }
  std::lock_guard<std::mutex> lock(cache_mutex);
  cache[key] = c;
  return c;
}

// alpha = 1, beta = 0 in the type cuDNN expects for the data type.
struct Scalars {
  float f[2] = {1.0f, 0.0f};
  double d[2] = {1.0, 0.0};
  const void* alpha(DType dt) const { return dt == DType::f64 ? static_cast<const void*>(&d[0]) : &f[0]; }
  const void* beta(DType dt) const { return dt == DType::f64 ? static_cast<const void*>(&d[1]) : &f[1]; }
};

// What each convolution call sets up: the chosen algorithm, the descriptors under its math type, the
// handle on the caller's stream, and the scaling factors (alpha = 1, beta = 0).
struct Call {
  cudnnHandle_t handle;
  Choice choice;
  Descriptors desc;
  Scalars s;

  Call(ConvDirection d, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy, void* cudnn_handle, Stream stream)
      : handle(static_cast<cudnnHandle_t>(cudnn_handle)), choice(choose(d, dt, g, policy, handle)), desc(dt, g) {
    check_cudnn(cudnnSetConvolutionMathType(desc.conv, choice.math), "cudnnSetConvolutionMathType");
    check_cudnn(cudnnSetStream(handle, static_cast<cudaStream_t>(stream)), "cudnnSetStream");
  }
};
}  // namespace

size_t conv2d_workspace(ConvDirection direction, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy, void* cudnn_handle) {
  return choose(direction, dt, g, policy, static_cast<cudnnHandle_t>(cudnn_handle)).workspace;
}

const char* conv2d_algorithm_name(ConvDirection direction, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto it = cache.find(key_of(direction, dt, g, policy));
  return it == cache.end() ? "" : it->second.name;
}

void conv2d_forward(DType dt, const ConvGeometry& g, const void* x, const void* weight, void* y, void* workspace,
                    size_t workspace_bytes, ConvAlgoPolicy policy, void* cudnn_handle, Stream stream) {
  const Call c(ConvDirection::forward, dt, g, policy, cudnn_handle, stream);
  check_cudnn(cudnnConvolutionForward(c.handle, c.s.alpha(dt), c.desc.x, x, c.desc.w, weight, c.desc.conv,
                                static_cast<cudnnConvolutionFwdAlgo_t>(c.choice.algorithm), workspace, workspace_bytes,
                                c.s.beta(dt), c.desc.y, y),
        "cudnnConvolutionForward");
}

void conv2d_backward_data(DType dt, const ConvGeometry& g, const void* dy, const void* weight, void* dx,
                          void* workspace, size_t workspace_bytes, ConvAlgoPolicy policy, void* cudnn_handle, Stream stream) {
  const Call c(ConvDirection::backward_data, dt, g, policy, cudnn_handle, stream);
  check_cudnn(cudnnConvolutionBackwardData(c.handle, c.s.alpha(dt), c.desc.w, weight, c.desc.y, dy, c.desc.conv,
                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(c.choice.algorithm), workspace,
                                     workspace_bytes, c.s.beta(dt), c.desc.x, dx),
        "cudnnConvolutionBackwardData");
}

void conv2d_backward_filter(DType dt, const ConvGeometry& g, const void* x, const void* dy, void* dw, void* workspace,
                            size_t workspace_bytes, ConvAlgoPolicy policy, void* cudnn_handle, Stream stream) {
  const Call c(ConvDirection::backward_filter, dt, g, policy, cudnn_handle, stream);
  check_cudnn(cudnnConvolutionBackwardFilter(c.handle, c.s.alpha(dt), c.desc.x, x, c.desc.y, dy, c.desc.conv,
                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.choice.algorithm), workspace,
                                       workspace_bytes, c.s.beta(dt), c.desc.w, dw),
        "cudnnConvolutionBackwardFilter");
}

}  // namespace cnn::kernels::cuda
