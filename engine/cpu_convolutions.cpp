#include "engine/cpu_convolutions.h"

#include <atomic>

#include "engine/config.h"
#include "engine/error.h"
#if CNN_WITH_ONEDNN
#include "kernels/cpu/conv_onednn.h"
#endif

namespace cnn {

namespace {
std::atomic<CpuConvolutions> choice{CNN_WITH_ONEDNN ? CpuConvolutions::onednn : CpuConvolutions::reference};
}

bool onednn_available() { return CNN_WITH_ONEDNN; }

void set_cpu_convolutions(CpuConvolutions c) {
  CNN_CHECK(c != CpuConvolutions::onednn || onednn_available(),
            "cpu_convolutions = onednn, but this build of cnn has no oneDNN: install libdnnl-dev (Debian) and "
            "rebuild, or set cpu_convolutions = reference");
  choice = c;
}

CpuConvolutions cpu_convolutions() { return choice; }

const char* cpu_convolutions_name(CpuConvolutions c) { return c == CpuConvolutions::onednn ? "onednn" : "reference"; }

CpuConvolutions parse_cpu_convolutions(const std::string& name) {
  if (name == "onednn") return CpuConvolutions::onednn;
  if (name == "reference") return CpuConvolutions::reference;
  CNN_FAIL("cpu_convolutions: '", name, "' is not one of onednn, reference");
}

void run_cpu_convolution(kernels::ConvDirection direction, DType dt, const kernels::ConvGeometry& g, const void* first,
                         const void* second, void* out) {
#if CNN_WITH_ONEDNN
  if (cpu_convolutions() == CpuConvolutions::onednn && kernels::cpu::onednn_conv2d(direction, dt, g, first, second, out))
    return;
#endif
  switch (direction) {
    case kernels::ConvDirection::forward:
      return kernels::cpu::conv2d_forward(dt, g, first, second, out);
    case kernels::ConvDirection::backward_data:
      return kernels::cpu::conv2d_backward_data(dt, g, first, second, out);
    case kernels::ConvDirection::backward_filter:
      return kernels::cpu::conv2d_backward_filter(dt, g, first, second, out);
  }
}

std::string cpu_convolution_implementation(kernels::ConvDirection direction, DType dt, const kernels::ConvGeometry& g) {
#if CNN_WITH_ONEDNN
  if (cpu_convolutions() == CpuConvolutions::onednn) {
    const std::string implementation = kernels::cpu::onednn_conv2d_implementation(direction, dt, g);
    if (!implementation.empty()) return "oneDNN " + implementation;
  }
#else
  (void)direction, (void)dt, (void)g;
#endif
  return "reference";
}

bool cpu_convolution_accumulates(DType dt, const kernels::ConvGeometry& g) {
#if CNN_WITH_ONEDNN
  return cpu_convolutions() == CpuConvolutions::onednn &&
         !kernels::cpu::onednn_conv2d_backward_data_accumulate_implementation(dt, g).empty();
#else
  (void)dt, (void)g;
  return false;
#endif
}

bool run_cpu_convolution_accumulating(DType dt, const kernels::ConvGeometry& g, const void* dy, const void* w, void* dx) {
#if CNN_WITH_ONEDNN
  return cpu_convolutions() == CpuConvolutions::onednn &&
         kernels::cpu::onednn_conv2d_backward_data_accumulate(dt, g, dy, w, dx);
#else
  (void)dt, (void)g, (void)dy, (void)w, (void)dx;
  return false;
#endif
}

bool cpu_convolution_folds(DType dt, const kernels::ConvGeometry& g, bool residual, bool relu) {
#if CNN_WITH_ONEDNN
  return cpu_convolutions() == CpuConvolutions::onednn &&
         !kernels::cpu::onednn_conv2d_folded_implementation(dt, g, residual, relu).empty();
#else
  (void)dt, (void)g, (void)residual, (void)relu;
  return false;
#endif
}

bool run_cpu_convolution_folded(DType dt, const kernels::ConvGeometry& g, const void* x, const void* w,
                                const float* scale, const float* shift, const void* residual, bool relu, void* y) {
#if CNN_WITH_ONEDNN
  return cpu_convolutions() == CpuConvolutions::onednn &&
         kernels::cpu::onednn_conv2d_folded(dt, g, x, w, {scale, shift, residual, relu}, y);
#else
  (void)dt, (void)g, (void)x, (void)w, (void)scale, (void)shift, (void)residual, (void)relu, (void)y;
  return false;
#endif
}

}  // namespace cnn
