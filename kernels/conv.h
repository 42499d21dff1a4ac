// 2-D convolution in NHWC with weights [O, KH, KW, C/groups] (cuDNN's NHWC filter layout).
// CPU: im2col + GEMM per sample and group (OpenBLAS), a direct loop when every group has one input
// channel (depthwise). CUDA: cuDNN, with the algorithm chosen per (geometry, dtype) and cached.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/dtype.h"

namespace cnn::kernels {

using Stream = void*;

struct ConvGeometry {
  int64_t n = 0, h = 0, w = 0, c = 0;  // input [N, H, W, C]
  int64_t o = 0, kh = 0, kw = 0;       // weight [O, KH, KW, C / groups]
  int64_t oh = 0, ow = 0;              // output [N, OH, OW, O]
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1, groups = 1;
  int64_t group_in() const { return c / groups; }
  int64_t group_out() const { return o / groups; }
};

// Algorithm choice on CUDA: the cuDNN heuristic, or measured (cudnnFind) with `benchmark`, like
// torch.backends.cudnn.benchmark; with `deterministic`, only algorithms cuDNN reports as
// deterministic (no atomics: bitwise-equal results run to run), like torch.backends.cudnn.deterministic.
// The CPU kernels are deterministic and have no choice to make.
struct ConvAlgoPolicy {
  bool benchmark = false;
  bool deterministic = false;
};

// Both backends take cuDNN's resources: a workspace of the size cuda::conv2d_workspace returns, the
// policy and the cudnnHandle_t; the CPU kernels ignore them (and default them for direct callers).
#define CNN_CONV_KERNELS(...)                                                                                          \
  void conv2d_forward(DType dt, const ConvGeometry& g, const void* x, const void* weight, void* y __VA_ARGS__);        \
  /* dx = conv_transpose(dy, w) (overwrites dx) */                                                                     \
  void conv2d_backward_data(DType dt, const ConvGeometry& g, const void* dy, const void* weight, void* dx __VA_ARGS__); \
  /* dw = correlation of x with dy (overwrites dw) */                                                                  \
  void conv2d_backward_filter(DType dt, const ConvGeometry& g, const void* x, const void* dy, void* dw __VA_ARGS__);

namespace cpu {
CNN_CONV_KERNELS(, void* workspace = nullptr, size_t workspace_bytes = 0, ConvAlgoPolicy policy = {},
                 void* cudnn_handle = nullptr, Stream stream = nullptr)
// The im2col buffer budget that decides how many samples share one GEMM (default 32 MiB); returns
// the previous value. For tests that need several chunks on small shapes.
int64_t set_im2col_budget_bytes(int64_t bytes);
}  // namespace cpu

namespace cuda {
CNN_CONV_KERNELS(, void* workspace, size_t workspace_bytes, ConvAlgoPolicy policy, void* cudnn_handle, Stream stream)
// Chosen algorithms are cached per (geometry, dtype, direction, policy).
enum class ConvDirection { forward, backward_data, backward_filter };
size_t conv2d_workspace(ConvDirection direction, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy, void* cudnn_handle);
// The name of the algorithm the cache holds for this call, for bench_conv ("" if none yet).
const char* conv2d_algorithm_name(ConvDirection direction, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy);
}  // namespace cuda
#undef CNN_CONV_KERNELS

}  // namespace cnn::kernels
