// CUDA convolution through cuDNN (this library-call file, not a kernel file, is where cuDNN headers
// live). NHWC tensor and filter descriptors, cross-correlation, f32 accumulation (f64 for f64),
// tensor-op math for f16/bf16; f32 runs FMA math (CUDNN_FMA_MATH), or cuDNN's default math, which
// uses TF32 tensor cores on Ampere and later, when the policy allows TF32 (`[precision] tf32`).
// Per (geometry, dtype, direction, policy) a plan is made once and cached: the descriptors, and the
// ranking of (algorithm, math type) entries (kernels/common/algorithm_ranking.h): cuDNN's heuristic
// ranking by default, or measured by cudnnFind*AlgorithmEx on the caller's own buffers and a
// workspace from its allocator in benchmark mode (the non-Ex calls would cudaMalloc their own). In
// deterministic mode only entries cuDNN marks CUDNN_DETERMINISTIC. Each entry runs under its own
// math type, set on the cached descriptor at call time. Uses cuDNN's v7-style API, which cuDNN 9
// still ships (deprecated); a later move to the graph API changes only this file.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

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

  Descriptors(DType dt, const ConvGeometry& g, cudnnMathType_t math) {
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
    check_cudnn(cudnnSetConvolutionMathType(conv, math), "cudnnSetConvolutionMathType");
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

// The math type the search starts from: tensor ops for f16/bf16; for f32 FMA unless TF32 is allowed.
cudnnMathType_t search_math(DType dt, bool allow_tf32) {
  if (dt == DType::f16 || dt == DType::bf16) return CUDNN_TENSOR_OP_MATH;
  if (dt == DType::f32 && !allow_tf32) return CUDNN_FMA_MATH;
  return CUDNN_DEFAULT_MATH;
}

using Key = std::tuple<int, int, bool, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int,
                       int, int, int, int, int>;

Key key_of(ConvDirection d, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy) {
  return {static_cast<int>(d), static_cast<int>(dt), policy.benchmark, policy.deterministic, policy.allow_tf32, g.n, g.h,
          g.w, g.c, g.o, g.kh, g.kw, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h, g.dilation_w, g.groups};
}

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

// The usable entries of a cuDNN ranking (heuristic or measured), in its order.
template <class Perf>
std::vector<RankedAlgorithm> usable_entries(const Perf* perf, int count, DType dt, ConvAlgoPolicy policy,
                                            const char* (*name)(int)) {
  std::vector<RankedAlgorithm> entries;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (policy.deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    // Without TF32 every f32 entry runs FMA math, whatever math type cuDNN ranked it under.
    const cudnnMathType_t math = dt == DType::f32 && !policy.allow_tf32 ? CUDNN_FMA_MATH : perf[i].mathType;
    const int algorithm = static_cast<int>(perf[i].algo);
    const bool seen = std::any_of(entries.begin(), entries.end(), [&](const RankedAlgorithm& e) {
      return e.algorithm == algorithm && e.math == static_cast<int>(math);
    });
    if (seen) continue;
    std::string label = name(algorithm);
    if (math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) label += "+tensor_op";
    entries.push_back(RankedAlgorithm{algorithm, static_cast<int>(math), perf[i].memory, label});
  }
  return entries;
}

// The workspace each algorithm of this direction asks for (those cuDNN offers for these shapes):
// what a measured search chooses its workspace from.
std::vector<size_t> workspace_requests(ConvDirection d, const Descriptors& desc, cudnnHandle_t handle) {
  std::vector<size_t> requests;
  const auto consider = [&](cudnnStatus_t status, size_t bytes) {
    if (status == CUDNN_STATUS_SUCCESS) requests.push_back(bytes);
  };
  size_t bytes = 0;
  if (d == ConvDirection::forward) {
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a)
      consider(cudnnGetConvolutionForwardWorkspaceSize(handle, desc.x, desc.w, desc.conv, desc.y,
                                                       static_cast<cudnnConvolutionFwdAlgo_t>(a), &bytes), bytes);
  } else if (d == ConvDirection::backward_data) {
    for (int a = 0; a < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT; ++a)
      consider(cudnnGetConvolutionBackwardDataWorkspaceSize(handle, desc.w, desc.y, desc.conv, desc.x,
                                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(a), &bytes), bytes);
  } else {
    for (int a = 0; a < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT; ++a)
      consider(cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, desc.x, desc.y, desc.conv, desc.w,
                                                              static_cast<cudnnConvolutionBwdFilterAlgo_t>(a), &bytes),
               bytes);
  }
  return requests;
}

// cuDNN's ranking for one call: heuristic, or measured on `find` (its buffers, and the workspace it
// allocates for the algorithms' requests; those that need more than it gives are left out).
std::vector<RankedAlgorithm> rank(ConvDirection d, DType dt, ConvAlgoPolicy policy, const Descriptors& desc,
                                  cudnnHandle_t handle, const FindResources* find) {
  constexpr int kMax = 16;
  int returned = 0;
  if (policy.benchmark) {
    CNN_CHECK(find != nullptr && find->workspace, "conv2d: benchmark mode measures algorithms on the call's buffers, and "
              "none were given (an internal error: report it)");
    const auto [workspace, workspace_bytes] = find->workspace(workspace_requests(d, desc, handle));
    const ConvBuffers& b = find->buffers;
    if (d == ConvDirection::forward) {
      cudnnConvolutionFwdAlgoPerf_t perf[kMax];
      check_cudnn(cudnnFindConvolutionForwardAlgorithmEx(handle, desc.x, b.first, desc.w, b.second, desc.conv, desc.y, b.out,
                                                         kMax, &returned, perf, workspace, workspace_bytes),
                  "cudnnFindConvolutionForwardAlgorithmEx");
      return usable_entries(perf, returned, dt, policy, forward_name);
    }
    if (d == ConvDirection::backward_data) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
      check_cudnn(cudnnFindConvolutionBackwardDataAlgorithmEx(handle, desc.w, b.second, desc.y, b.first, desc.conv, desc.x,
                                                              b.out, kMax, &returned, perf, workspace, workspace_bytes),
                  "cudnnFindConvolutionBackwardDataAlgorithmEx");
      return usable_entries(perf, returned, dt, policy, backward_data_name);
    }
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
    check_cudnn(cudnnFindConvolutionBackwardFilterAlgorithmEx(handle, desc.x, b.first, desc.y, b.second, desc.conv, desc.w,
                                                              b.out, kMax, &returned, perf, workspace, workspace_bytes),
                "cudnnFindConvolutionBackwardFilterAlgorithmEx");
    return usable_entries(perf, returned, dt, policy, backward_filter_name);
  }
  if (d == ConvDirection::forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMax];
    check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(handle, desc.x, desc.w, desc.conv, desc.y, kMax, &returned, perf),
                "cudnnGetConvolutionForwardAlgorithm_v7");
    return usable_entries(perf, returned, dt, policy, forward_name);
  }
  if (d == ConvDirection::backward_data) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
    check_cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, desc.w, desc.y, desc.conv, desc.x, kMax, &returned, perf),
                "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    return usable_entries(perf, returned, dt, policy, backward_data_name);
  }
  cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
  check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, desc.x, desc.y, desc.conv, desc.w, kMax, &returned, perf),
              "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  return usable_entries(perf, returned, dt, policy, backward_filter_name);
}

// The cached state of one kind of call: its descriptors and its ranking.
struct Plan {
  Descriptors desc;
  AlgorithmRanking ranking;
  Plan(ConvDirection d, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy, cudnnHandle_t handle,
       const FindResources* find)
      : desc(dt, g, search_math(dt, policy.allow_tf32)), ranking(rank(d, dt, policy, desc, handle, find)) {}
};

std::mutex plans_mutex;  // guards `plans`; held through a search, so each plan is made once
std::map<Key, std::unique_ptr<Plan>> plans;
// A call sets the handle's stream and the plan's math type and enqueues: one at a time, so that two
// threads do not interleave those settings (the enqueue itself is asynchronous and short).
std::mutex call_mutex;

Plan& plan_for(ConvDirection d, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy, cudnnHandle_t handle,
               cudaStream_t stream, const FindResources* find) {
  std::lock_guard<std::mutex> lock(plans_mutex);
  std::unique_ptr<Plan>& plan = plans[key_of(d, dt, g, policy)];
  if (!plan) {
    std::lock_guard<std::mutex> call_lock(call_mutex);  // the search runs on the handle's stream
    check_cudnn(cudnnSetStream(handle, stream), "cudnnSetStream");
    try {
      plan = std::make_unique<Plan>(d, dt, g, policy, handle, find);
    } catch (...) {
      plans.erase(key_of(d, dt, g, policy));
      throw;
    }
  }
  return *plan;
}

// alpha = 1, beta = 0 in the type cuDNN expects for the data type.
struct Scalars {
  float f[2] = {1.0f, 0.0f};
  double d[2] = {1.0, 0.0};
  const void* alpha(DType dt) const { return dt == DType::f64 ? static_cast<const void*>(&d[0]) : &f[0]; }
  const void* beta(DType dt) const { return dt == DType::f64 ? static_cast<const void*>(&d[1]) : &f[1]; }
};

bool not_supported(cudnnStatus_t status) { return CUDNN_STATUS_CATEGORY(status) == CUDNN_STATUS_NOT_SUPPORTED; }

cudnnStatus_t enqueue(ConvDirection d, DType dt, const Descriptors& desc, int algorithm, const ConvBuffers& b,
                      cudnnHandle_t handle) {
  const Scalars s;
  if (d == ConvDirection::forward)
    return cudnnConvolutionForward(handle, s.alpha(dt), desc.x, b.first, desc.w, b.second, desc.conv,
                                   static_cast<cudnnConvolutionFwdAlgo_t>(algorithm), b.workspace, b.workspace_bytes,
                                   s.beta(dt), desc.y, b.out);
  if (d == ConvDirection::backward_data)
    return cudnnConvolutionBackwardData(handle, s.alpha(dt), desc.w, b.second, desc.y, b.first, desc.conv,
                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algorithm), b.workspace,
                                        b.workspace_bytes, s.beta(dt), desc.x, b.out);
  return cudnnConvolutionBackwardFilter(handle, s.alpha(dt), desc.x, b.first, desc.y, b.second, desc.conv,
                                        static_cast<cudnnConvolutionBwdFilterAlgo_t>(algorithm), b.workspace,
                                        b.workspace_bytes, s.beta(dt), desc.w, b.out);
}
}  // namespace

AlgorithmRanking& conv2d_ranking(ConvDirection direction, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy,
                                 void* cudnn_handle, Stream stream, const FindResources* find) {
  return plan_for(direction, dt, g, policy, static_cast<cudnnHandle_t>(cudnn_handle), static_cast<cudaStream_t>(stream),
                  find)
      .ranking;
}

AttemptOutcome conv2d_run(ConvDirection direction, DType dt, const ConvGeometry& g, ConvAlgoPolicy policy,
                          const RankedAlgorithm& entry, const ConvBuffers& buffers, void* cudnn_handle, Stream stream) {
  auto handle = static_cast<cudnnHandle_t>(cudnn_handle);
  const Plan& plan = plan_for(direction, dt, g, policy, handle, static_cast<cudaStream_t>(stream), nullptr);
  CNN_CHECK(buffers.workspace_bytes >= entry.workspace, "conv2d: ", entry.name, " needs a workspace of ", entry.workspace,
            " bytes and was given ", buffers.workspace_bytes);
  std::lock_guard<std::mutex> lock(call_mutex);
  check_cudnn(cudnnSetStream(handle, static_cast<cudaStream_t>(stream)), "cudnnSetStream");
  check_cudnn(cudnnSetConvolutionMathType(plan.desc.conv, static_cast<cudnnMathType_t>(entry.math)),
              "cudnnSetConvolutionMathType");
  const cudnnStatus_t status = enqueue(direction, dt, plan.desc, entry.algorithm, buffers, handle);
  if (not_supported(status)) return AttemptOutcome::not_supported;
  check_cudnn(status, direction == ConvDirection::forward         ? "cudnnConvolutionForward"
                      : direction == ConvDirection::backward_data ? "cudnnConvolutionBackwardData"
                                                                  : "cudnnConvolutionBackwardFilter");
  return AttemptOutcome::ran;
}

}  // namespace cnn::kernels::cuda
