// The engine's side of a cuDNN convolution (engine/cudnn_conv.h): memory from the caching
// allocator, the walk down the ranking.
#include "engine/cudnn_conv.h"

#include <algorithm>
#include <string_view>

#include "engine/allocator.h"
#include "engine/cuda_context.h"
#include "engine/tensor.h"

namespace cnn::cudnn_conv {

size_t find_workspace_offer(const std::vector<size_t>& requests, size_t device_free, size_t largest_free_block,
                            size_t margin) {
  const size_t limit = std::max(device_free > margin ? device_free - margin : 0, largest_free_block);
  size_t offer = 0;
  for (const size_t request : requests)
    if (request <= limit) offer = std::max(offer, request);
  return offer;
}

#if CNN_WITH_CUDA
namespace {
kernels::ConvAlgoPolicy current_policy() {
  return {cuda::cudnn_benchmark(), cuda::cudnn_deterministic(), cuda::allow_tf32()};
}

const char* direction_name(ConvDirection d) {
  return d == ConvDirection::forward ? "forward" : d == ConvDirection::backward_data ? "backward-data" : "backward-filter";
}

std::string describe_call(ConvDirection d, DType dt, const ConvGeometry& g) {
  return detail::concat("conv2d ", direction_name(d), " (", dtype_name(dt), ", input [", g.n, ",", g.h, ",", g.w, ",", g.c,
                        "], weight [", g.o, ",", g.kh, ",", g.kw, ",", g.group_in(), "], stride ", g.stride_h, "x",
                        g.stride_w, ", padding ", g.pad_h, "x", g.pad_w, ", groups ", g.groups, ")");
}

// Device memory of `bytes` bytes, or an empty tensor when the caching allocator cannot find it even
// after giving back its cache (it retries once itself).
Tensor try_workspace(size_t bytes, const Device& device) {
  try {
    return Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8, device);
  } catch (const OutOfMemoryError&) {
    return Tensor();
  }
}

kernels::AlgorithmRanking& ranking_of(ConvDirection d, DType dt, const ConvGeometry& g, const Device& device,
                                      const kernels::cuda::FindResources* find) {
  cuda::set_device(device.index);
  return kernels::cuda::conv2d_ranking(d, dt, g, current_policy(), cuda::cudnn_handle(device.index),
                                       cuda::current_stream(device.index), find);
}
}  // namespace

namespace {
void run_ranked(ConvDirection direction, DType dt, const ConvGeometry& g, const Device& device, const void* first,
                const void* second, void* out) {
  const kernels::ConvAlgoPolicy policy = current_policy();
  // A measured search offers the largest workspace an algorithm asks for that fits in what the
  // device and the cache have free (find_workspace_offer), or none when even that cannot be had
  // (then the algorithms that need none compete). The search is synchronous, and the workspace goes
  // back to the pool of the same stream, so freeing it at the end is safe.
  Tensor find_workspace;
  const auto offer_workspace = [&](const std::vector<size_t>& requests) -> std::pair<void*, size_t> {
    const size_t offer = find_workspace_offer(requests, cuda::memory_info(device.index).free,
                                              cuda_allocator(device.index).largest_free_block(), kFindWorkspaceMargin);
    if (offer > 0) find_workspace = try_workspace(offer, device);
    if (!find_workspace.defined()) return {nullptr, 0};
    return {find_workspace.data(), offer};
  };
  kernels::cuda::FindResources find{{first, second, out}, offer_workspace};
  kernels::AlgorithmRanking& ranking = ranking_of(direction, dt, g, device, policy.benchmark ? &find : nullptr);
  find_workspace = Tensor();
  void* handle = cuda::cudnn_handle(device.index);
  void* stream = cuda::current_stream(device.index);
  ranking.run([&] { return describe_call(direction, dt, g); }, [&](const kernels::RankedAlgorithm& entry) {
    Tensor workspace;
    if (entry.workspace > 0) {
      workspace = try_workspace(entry.workspace, device);
      if (!workspace.defined()) return kernels::AttemptOutcome::workspace_unavailable;
    }
    const kernels::cuda::ConvBuffers buffers{first, second, out, entry.workspace > 0 ? workspace.data() : nullptr,
                                             entry.workspace};
    return kernels::cuda::conv2d_run(direction, dt, g, policy, entry, buffers, handle, stream);
  });
}
}  // namespace

void run(ConvDirection direction, DType dt, const ConvGeometry& g, const Device& device, const void* first,
         const void* second, void* out) {
  try {
    run_ranked(direction, dt, g, device, first, second, out);
  } catch (const OutOfMemoryError&) {
    throw;
  } catch (const Error& e) {  // a descriptor, search or enqueue status: say which convolution
    const std::string call = describe_call(direction, dt, g);
    if (std::string_view(e.what()).starts_with(call)) throw;  // the ranking's own message names it
    throw Error(call + ": " + e.what());
  }
}

std::string algorithm(ConvDirection direction, DType dt, const ConvGeometry& g, const Device& device) {
  return ranking_of(direction, dt, g, device, nullptr).current().name;
}

size_t workspace_bytes(ConvDirection direction, DType dt, const ConvGeometry& g, const Device& device) {
  return ranking_of(direction, dt, g, device, nullptr).current().workspace;
}

#else

void run(ConvDirection, DType, const ConvGeometry&, const Device& device, const void*, const void*, void*) {
  cuda::require_device(device.index);
}
std::string algorithm(ConvDirection, DType, const ConvGeometry&, const Device& device) {
  cuda::require_device(device.index);
  return "";
}
size_t workspace_bytes(ConvDirection, DType, const ConvGeometry&, const Device& device) {
  cuda::require_device(device.index);
  return 0;
}

#endif

}  // namespace cnn::cudnn_conv
