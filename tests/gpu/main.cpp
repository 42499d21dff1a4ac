// Test runner for the CPU vs CUDA agreement tests: without a usable CUDA device it prints why and
// exits with 77, which CTest reports as a skipped test.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "engine/cnn.h"

int main(int argc, char** argv) {
  try {
    cnn::cuda::require_device(0);
  } catch (const cnn::Error& e) {
    std::printf("skipped: no usable CUDA device (%s)\n", e.what());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
