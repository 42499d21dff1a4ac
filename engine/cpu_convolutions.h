// Which implementation runs f32 and bf16 convolutions on the CPU: oneDNN's primitives (the default where the
// build has oneDNN; kernels/cpu/conv_onednn.h) or the project's own im2col + OpenBLAS path, which
// is also the oracle the oneDNN results are tested against and what every other dtype runs.
#pragma once
#include <string>

#include "engine/dtype.h"
#include "kernels/conv.h"

namespace cnn {

enum class CpuConvolutions { onednn, reference };

// Refuses onednn, with what to install, in a build without it.
void set_cpu_convolutions(CpuConvolutions choice);
CpuConvolutions cpu_convolutions();
bool onednn_available();  // whether this build has oneDNN
// "onednn" or "reference", and back; anything else is refused with the choices.
const char* cpu_convolutions_name(CpuConvolutions choice);
CpuConvolutions parse_cpu_convolutions(const std::string& name);

// One pass on host memory, in the order of kernels::cuda::ConvBuffers (forward: x, w -> y;
// backward_data: dy, w -> dx; backward_filter: x, dy -> dw), overwriting `out`: oneDNN when chosen
// and it takes the call, else the reference kernels.
void run_cpu_convolution(kernels::ConvDirection direction, DType dt, const kernels::ConvGeometry& g, const void* first,
                         const void* second, void* out);
// What run_cpu_convolution runs for that pass now: "oneDNN <implementation>" or "reference".
std::string cpu_convolution_implementation(kernels::ConvDirection direction, DType dt, const kernels::ConvGeometry& g);

// Backward-data that adds into dx instead of overwriting it (kernels/cpu/conv_onednn.h's
// onednn_conv2d_backward_data_accumulate): whether oneDNN is chosen and takes it, and running it
// (false: not run).
bool cpu_convolution_accumulates(DType dt, const kernels::ConvGeometry& g);
bool run_cpu_convolution_accumulating(DType dt, const kernels::ConvGeometry& g, const void* dy, const void* w, void* dx);

// Inference's forward with an eval-mode BatchNorm folded in (kernels/cpu/conv_onednn.h's
// onednn_conv2d_folded): y = relu?(conv(x, w) * scale + shift [+ residual]), scale and shift f32 [O]
// on the host, w in dt. Whether oneDNN is chosen and takes it, and running it (false: not run).
bool cpu_convolution_folds(DType dt, const kernels::ConvGeometry& g, bool residual, bool relu);
bool run_cpu_convolution_folded(DType dt, const kernels::ConvGeometry& g, const void* x, const void* w,
                                const float* scale, const float* shift, const void* residual, bool relu, void* y);

}  // namespace cnn
