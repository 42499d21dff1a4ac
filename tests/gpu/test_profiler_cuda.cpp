// The profiler on a CUDA device (label gpu): op spans get device times from timed events on the
// stream, inside their phase's device interval; a phase that waits for the device takes its time
// on the host as well.
#include <doctest/doctest.h>

#include "engine/cnn.h"
#include "engine/profiler.h"

using namespace cnn;

TEST_CASE("profiler on cuda: kernel spans have device times, nested in their phase's on the same stream") {
  const Device gpu = Device::cuda(0);
  const Tensor a = Tensor::randn({512, 512}, 1, DType::f32, gpu), b = Tensor::randn({512, 512}, 2, DType::f32, gpu);
  matmul(a, b);  // cuBLAS set up before the recording
  cuda::synchronize(0);
  profiler::start();
  {
    const profiler::Scope phase("matmuls", profiler::Category::phase, gpu);
    for (int i = 0; i < 8; ++i) matmul(a, b);
  }
  const profiler::Recording recording = profiler::stop();
  const profiler::Span* phase = nullptr;
  int gemms = 0;
  for (const profiler::Span& s : recording.spans)
    if (s.name == "matmuls") phase = &s;
  REQUIRE(phase != nullptr);
  CHECK(phase->on_device());
  CHECK(phase->device_us() > 0);
  for (const profiler::Span& s : recording.spans) {
    if (s.category != profiler::Category::op || s.name != "gemm") continue;
    ++gemms;
    CHECK(s.on_device());
    CHECK(s.stream == phase->stream);
    CHECK(s.device_us() > 0);
    CHECK(s.device_start_us >= phase->device_start_us);
    CHECK(s.device_end_us <= phase->device_end_us);
  }
  CHECK(gemms == 8);
}
