// One cuDNN convolution as the engine runs it: the ranking of the call (heuristic, or measured in
// benchmark mode on the call's own tensors and a workspace from the caching allocator), walked down
// entry by entry when cuDNN turns one down or its workspace cannot be allocated, so that a
// convolution runs if any algorithm can (kernels/common/algorithm_ranking.h). The policy
// (benchmark, deterministic, TF32) is the process-wide one of engine/cuda_context.h.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "kernels/conv.h"

namespace cnn::cudnn_conv {

using kernels::ConvGeometry;
using kernels::ConvDirection;

// `first`, `second`, `out` in cuDNN's order (kernels/conv.h): forward (x, w -> y), backward_data
// (dy, w -> dx), backward_filter (x, dy -> dw); device memory of `device`, used on its current stream.
void run(ConvDirection direction, DType dt, const ConvGeometry& g, const Device& device, const void* first,
         const void* second, void* out);

// The algorithm a call of this kind now starts with, and its workspace (for bench_conv); the call
// must have run once.
std::string algorithm(ConvDirection direction, DType dt, const ConvGeometry& g, const Device& device);
size_t workspace_bytes(ConvDirection direction, DType dt, const ConvGeometry& g, const Device& device);

// The workspace a measured search (benchmark mode) offers, as PyTorch's does: the largest of the
// algorithms' `requests` that the caching allocator can give without giving back its cache, that is
// no more than the larger of the device's free memory less `margin` (left to the libraries' own
// allocations) and the allocator's largest free block. cuDNN leaves out the algorithms that need more
// (their workspace would have emptied the cache, or failed). 0 when no request fits.
size_t find_workspace_offer(const std::vector<size_t>& requests, size_t device_free, size_t largest_free_block,
                            size_t margin);
// The margin the engine keeps: 256 MiB.
inline constexpr size_t kFindWorkspaceMargin = size_t{256} << 20;

}  // namespace cnn::cudnn_conv
