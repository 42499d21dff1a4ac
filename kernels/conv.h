// 2-D convolution in NHWC with weights [O, KH, KW, C/groups] (cuDNN's NHWC filter layout).
// CPU: im2col + GEMM per sample and group (OpenBLAS), a direct loop when every group has one input
// channel (depthwise); f32 through oneDNN when it is built (kernels/cpu/conv_onednn.h). CUDA: cuDNN, with the algorithm ranking and descriptors cached per (geometry,
// dtype, direction, policy).
#pragma once
#include <cstddef>
#include <cstdint>

#include <functional>
#include <utility>
#include <vector>

#include "kernels/common/algorithm_ranking.h"
#include "kernels/common/dtype.h"
#include "kernels/common/window.h"

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

// The geometry of a convolution with the same stride, padding and dilation along both axes, its
// output size as PyTorch computes it (benchmarks and tests describe their shapes this way).
inline ConvGeometry square_conv_geometry(int64_t n, int64_t h, int64_t w, int64_t c, int64_t o, int64_t kh, int64_t kw,
                                         int stride, int pad, int dilation = 1, int groups = 1) {
  ConvGeometry g;
  g.n = n;
  g.h = h;
  g.w = w;
  g.c = c;
  g.o = o;
  g.kh = kh;
  g.kw = kw;
  g.stride_h = g.stride_w = stride;
  g.pad_h = g.pad_w = pad;
  g.dilation_h = g.dilation_w = dilation;
  g.groups = groups;
  g.oh = window_output_size(h, kh, stride, pad, dilation, false);
  g.ow = window_output_size(w, kw, stride, pad, dilation, false);
  return g;
}

// Algorithm choice on CUDA: the cuDNN heuristic, or measured (cudnnFind) with `benchmark`, like
// torch.backends.cudnn.benchmark; with `deterministic`, only algorithms cuDNN reports as
// deterministic (no atomics: bitwise-equal results run to run), like torch.backends.cudnn.deterministic.
// The CPU kernels are deterministic and have no choice to make.
// With `allow_tf32`, f32 convolutions may use TF32 tensor cores (cuDNN's default math on Ampere and
// later, like torch.backends.cudnn.allow_tf32); without it they run FMA math (CUDNN_FMA_MATH).
struct ConvAlgoPolicy {
  bool benchmark = false;
  bool deterministic = false;
  bool allow_tf32 = false;
};

// The three passes of a convolution, in every backend.
enum class ConvDirection { forward, backward_data, backward_filter };

// The CPU kernels. Their trailing parameters (cuDNN's resources) are ignored and defaulted.
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

// cuDNN, in two steps so that the engine can walk down the ranking with workspaces from its own
// allocator (engine/cudnn_conv.h): the ranking of a call, then one entry of it run.
namespace cuda {

// The memory of one convolution in cuDNN's order: forward (x, w -> y), backward_data (dy, w -> dx),
// backward_filter (x, dy -> dw), and a workspace.
struct ConvBuffers {
  const void* first = nullptr;
  const void* second = nullptr;
  void* out = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// What a measured search (benchmark mode) times the candidates on: the call's own tensors, and a
// workspace the caller allocates given what each algorithm asks for (`requests`, in bytes); it returns
// the buffer and its size, which may be less than the largest request (cuDNN then leaves out the
// algorithms that need more; 0: only algorithms that need none compete).
struct FindResources {
  ConvBuffers buffers;
  std::function<std::pair<void*, size_t>(const std::vector<size_t>& requests)> workspace;
};

// cuDNN's ranking for (direction, dtype, geometry, policy), cached with the call's descriptors (made
// once per key, not per call): the heuristic ranking, or with policy.benchmark the measured one
// (cudnnFind*AlgorithmEx on `find`, which must then be given). Unusable entries (a failed status;
// non-deterministic ones under policy.deterministic) are left out; f32 entries run FMA math unless
// policy.allow_tf32.
AlgorithmRanking& conv2d_ranking(ConvDirection direction, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy,
                                 void* cudnn_handle, Stream stream, const FindResources* find);
// Runs one entry of that ranking on `buffers` (workspace_bytes >= entry.workspace); not_supported
// when cuDNN turns the entry down for these shapes; any other failure throws.
AttemptOutcome conv2d_run(ConvDirection direction, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy,
                          const RankedAlgorithm& entry, const ConvBuffers& buffers, void* cudnn_handle, Stream stream);
}  // namespace cuda
#undef CNN_CONV_KERNELS

}  // namespace cnn::kernels
